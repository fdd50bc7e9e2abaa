"""An order for one block's backward ops that keeps the fewest bytes alive.

TensorFlow's executor runs an op as soon as its inputs exist. Inside one
layer's backward that often starts every large product at once: the
gradient of BatchNormalization makes about ten tensors the size of its input,
and which of them are alive together depends only on the order they run in.
:func:`min_peak_order` finds, for a small dependency graph, an order of its
large ops whose peak of live bytes is the least (dynamic programming over the
sets of ops already run; at most ``max_states`` sets), and kswap chains the
ops in that order with control dependencies. The values are unchanged: only
when each op runs.

This module is pure Python: it knows ops only by index.

Example:
    Two products of ``dy`` (``a = dy * s`` and ``b = dy * x``), where ``b``
    is then summed to a small vector. Running ``b`` and its sum first keeps
    three large tensors alive at most, instead of four:

    >>> from kswap.layers.order import Node, min_peak_order
    >>> MiB = 1 << 20
    >>> nodes = [
    ...     Node(inputs=("dy",), outputs=(("a", MiB),)),
    ...     Node(inputs=("dy", "x"), outputs=(("b", MiB),)),
    ...     Node(inputs=("b",), outputs=(("sum_b", 4),)),
    ...     Node(inputs=("a", "sum_b"), outputs=(("dx", MiB),)),
    ... ]
    >>> order, peak = min_peak_order(nodes, {"dy": MiB, "x": MiB}, kept={"dx"})
    >>> order, peak // MiB
    ([1, 2, 0, 3], 3)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Hashable, Mapping, Sequence

__all__ = ["Node", "min_peak_order", "peak_of"]


@dataclasses.dataclass(frozen=True)
class Node:
    """One op.

    Attributes:
        inputs: The tensors it reads.
        outputs: The ``(tensor, bytes)`` it makes.
        after: Indices of other nodes it must run after (paths through ops
            left out of the graph).
        alias: Its outputs share its first input's buffer (a reshape): they
            keep those bytes alive but make no new ones.
    """

    inputs: tuple[Hashable, ...]
    outputs: tuple[tuple[Hashable, int], ...]
    after: tuple[int, ...] = ()
    alias: bool = False


def _made(node: Node) -> int:
    return 0 if node.alias else sum(size for _, size in node.outputs)


def _last_use(nodes: Sequence[Node]) -> dict[Hashable, set[int]]:
    users: dict[Hashable, set[int]] = {}
    for i, node in enumerate(nodes):
        for t in node.inputs:
            users.setdefault(t, set()).add(i)
    return users


def peak_of(
    order: Sequence[int],
    nodes: Sequence[Node],
    external: Mapping[Hashable, int],
    kept: Collection[Hashable] = (),
) -> int:
    """The most bytes alive at once when ``nodes`` run in ``order``.

    A tensor is alive from the op that makes it (``external`` ones from the
    start) until the last op that reads it ends; ``kept`` ones, and those
    nothing reads, stay alive to the end.
    """
    users = _last_use(nodes)
    remaining = {t: len(u) for t, u in users.items()}
    live = dict(external)
    peak = sum(live.values())
    for i in order:
        node = nodes[i]
        peak = max(peak, sum(live.values()) + _made(node))
        for t, size in node.outputs:
            live[t] = size
        for t in set(node.inputs):
            remaining[t] -= 1
            if remaining[t] == 0 and t not in kept and t in live:
                del live[t]
    return peak


def min_peak_order(
    nodes: Sequence[Node],
    external: Mapping[Hashable, int],
    kept: Collection[Hashable] = (),
    max_states: int = 20_000,
) -> tuple[list[int], int]:
    """An order of ``nodes`` (a valid schedule) whose peak of live bytes is least.

    Args:
        nodes: The ops, in an order that is already valid (each reads only
            tensors made by earlier ones or ``external``).
        external: Tensors alive before any of them runs, with their bytes.
        kept: Tensors alive to the end (results read by later work).
        max_states: How many sets of run ops to explore; past it the given
            order is returned unchanged.

    Returns:
        ``(order, peak)``: indices into ``nodes`` and the order's peak. Among
        orders with the same peak, the one that frees bytes soonest (least
        bytes alive summed over its steps), then the given order.
    """
    n = len(nodes)
    maker = {t: i for i, node in enumerate(nodes) for t, _ in node.outputs}
    preds = [0] * n
    for i, node in enumerate(nodes):
        for t in node.inputs:
            if t in maker:
                preds[i] |= 1 << maker[t]
        for j in node.after:
            preds[i] |= 1 << j
    users = _last_use(nodes)
    user_mask = {t: sum(1 << u for u in us) for t, us in users.items()}
    kept = set(kept)
    sizes = dict(external)
    for node in nodes:
        sizes.update(node.outputs)
    # what running node i adds to the live bytes, and what it may free
    adds = [sum(size for _, size in node.outputs) for node in nodes]
    frees = [
        [(user_mask[t], sizes[t]) for t in set(node.inputs) if t not in kept and t in sizes]
        for node in nodes
    ]

    # best[done] = (peak so far, bytes alive summed over the steps, order, bytes alive);
    # the sets of run ops grow by one op per round
    start = sum(external.values())
    best: dict[int, tuple[int, int, tuple[int, ...], int]] = {0: (start, 0, (), start)}
    explored = 1
    for _ in range(n):
        grown: dict[int, tuple[int, int, tuple[int, ...], int]] = {}
        for done, (peak, area, steps, live) in best.items():
            for i in range(n):
                if (done >> i) & 1 or preds[i] & ~done:
                    continue
                key = done | (1 << i)
                after = live + adds[i] - sum(size for mask, size in frees[i] if not mask & ~key)
                candidate = (max(peak, live + _made(nodes[i])), area + after, (*steps, i), after)
                if key not in grown or candidate < grown[key]:
                    grown[key] = candidate
            if explored + len(grown) > max_states:
                given = list(range(n))
                return given, peak_of(given, nodes, external, kept)
        explored += len(grown)
        best = grown
    peak, _, steps, _ = best[(1 << n) - 1]
    return list(steps), peak
