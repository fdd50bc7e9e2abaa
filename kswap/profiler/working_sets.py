"""Working sets of a block's backward, from a trace's buffers: as it ran, side by side, or ordered.

A block's backward runs either side by side (TensorFlow's executor starts
every op whose inputs exist; a kept block, or a plain model's layer) or one op
at a time in the order that keeps the fewest bytes alive (kswap's wrappers of
a swapped or recomputed block, :mod:`kswap.layers.order`; ops that take no
control input run beside that chain). A profiled step
shows one of the two; :mod:`kswap.profiler.workload` derives the other with
these functions. Buffers are :class:`~kswap.trace.Allocation` s; an op's
temporaries (``region_type == "temp"``) are freed when the op ends.

Example:
    >>> from kswap.trace import Allocation
    >>> from kswap.profiler.working_sets import ordered_peak, side_by_side_peak
    >>> bufs = [Allocation(100, 0, 10, op="a", region_type="temp"),
    ...         Allocation(200, 0, 10, op="b", region_type="temp"),
    ...         Allocation(50, 0, 20, op="a")]
    >>> ordered_peak(bufs), side_by_side_peak(bufs, width=2)
    (250, 350)
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Sequence

from kswap.trace import Allocation, OpInterval

__all__ = [
    "backward_bytes",
    "beside_bytes",
    "ordered_peak",
    "peak",
    "replayed_peak",
    "side_by_side_peak",
    "temporaries",
]


def peak(buffers: Sequence[Allocation]) -> int:
    """Most bytes of ``buffers`` alive at once."""
    changes: dict[int, int] = {}
    for b in buffers:
        changes[b.start_ns] = changes.get(b.start_ns, 0) + b.size
        changes[b.end_ns] = changes.get(b.end_ns, 0) - b.size
    best = live = 0
    for t in sorted(changes):
        live += changes[t]
        best = max(best, live)
    return best


def temporaries(buffers: Sequence[Allocation]) -> tuple[list[Allocation], dict]:
    """The buffers that are not a block op's temporaries, and each op's temporary bytes.

    The optimizer's run beside the backward however kswap orders its ops: never temporaries.
    """
    temps: dict[str | None, int] = {}
    kept = []
    for b in buffers:
        if b.region_type == "temp" and b.phase != "update":
            temps[b.op] = temps.get(b.op, 0) + b.size
        else:
            kept.append(b)
    return kept, temps


def ordered_peak(buffers: Sequence[Allocation]) -> int:
    """Most bytes alive at once if the ops ran one at a time: only one op's temporaries at once."""
    kept, temps = temporaries(buffers)
    return peak(kept) + max(temps.values(), default=0)


def side_by_side_peak(buffers: Sequence[Allocation], width: int) -> int:
    """Most bytes alive at once if the ops that ran one at a time had run side by side.

    ``width`` ops at most run at once (the executor's threads): the largest
    ``width`` ops' temporaries together.
    """
    kept, temps = temporaries(buffers)
    return peak(kept) + sum(sorted(temps.values(), reverse=True)[:width])


def replayed_peak(
    buffers: Sequence[Allocation], ops: Sequence[OpInterval], every_op: Sequence[OpInterval]
) -> int | None:
    """Most bytes alive at once if a block's backward ``ops`` ran one at a time in kswap's order.

    kswap chains a swapped block's backward ops in the order that keeps the
    fewest bytes alive (:func:`kswap.layers.order.min_peak_order`), which a
    side-by-side run does not: BatchNormalization's gradient makes several
    tensors the size of its input, and the executor starts them together.
    The graph is rebuilt from the trace: each buffer (of ``buffers``, the
    block's backward working set) is made by its op and read last by the
    block's op that ended last before it was freed (``ops``: the block's
    backward ops and those of no layer its gradient made, as the ``AddN``
    summing BatchNormalization's input gradient); one made before them (the
    upstream gradient) is there from the start, one whose last reader is an
    op of ``every_op`` outside ``ops`` to the end, and an op's temporaries
    (freed when it ends) count only while it runs. Reads other than the last
    are not in a trace. The upstream gradient is read by most of a block's
    ops (BatchNormalization's gradient reads it three times), so every op
    that ran while it was alive counts as reading it: otherwise the replay
    could run its last reader first and free it early, and found two tensors
    of the input's size alive where kswap's order holds three. Other
    buffers count their last reader only, so the order may still be freer
    than the real one. None if there is nothing to order or too much to
    search.
    """
    from kswap.layers import order

    ops = sorted(ops, key=lambda o: (o.start_ns, o.end_ns))
    if len(ops) < 3:
        return None
    made_by = {o.op: i for i, o in enumerate(ops)}
    position = {id(o): i for i, o in enumerate(ops)}
    every = sorted(every_op, key=lambda o: o.end_ns)
    end_times = [o.end_ns for o in every]
    inputs: list[list] = [[] for _ in ops]
    outputs: list[list] = [[] for _ in ops]
    temps = [0] * len(ops)
    external: dict = {}
    kept = set()
    for key, b in enumerate(buffers):
        maker = made_by.get(b.op) if b.op else None
        j = bisect.bisect_right(end_times, b.end_ns) - 1
        reader = position.get(id(every[j])) if j >= 0 else None  # None: read by another's op
        if maker is not None and (b.region_type == "temp" or reader == maker):
            temps[maker] += b.size
            continue
        if reader is not None and maker is not None and ops[reader].end_ns <= ops[maker].end_ns:
            reader = None
        if maker is None:
            if reader is None:  # read last by another block's op: not in this backward
                continue
            external[key] = b.size
            # the upstream gradient: any op that ran while it was alive may have read it
            for i, o in enumerate(ops):
                if i != reader and o.start_ns >= b.start_ns and o.end_ns <= b.end_ns:
                    inputs[i].append(key)
        else:
            outputs[maker].append((key, b.size))
        if reader is None:
            kept.add(key)
        else:
            inputs[reader].append(key)
    used = [i for i in range(len(ops)) if inputs[i] or outputs[i] or temps[i]]
    if len(used) < 3 or len(used) > 24:
        return None
    nodes = [order.Node(inputs=tuple(inputs[i]), outputs=tuple(outputs[i])) for i in used]
    _, most = order.min_peak_order(nodes, external, kept)  # start order if it gives up
    # an op's temporaries on top of what is alive while it runs
    return most + max((temps[i] for i in used), default=0)


def beside_bytes(temps: dict, types: dict, beside: Collection[str]) -> int:
    """Temporaries that run beside the largest op's in an ordered backward.

    ``temps`` maps each op to its temporary bytes, ``types`` each op to its
    type. An op of a type in ``beside`` takes no place in kswap's chain
    (:func:`kswap.layers.chain.beside_chain`): the executor may run it while
    any other op runs, so its temporaries may be alive with the largest
    op's (a convolution's filter gradient beside its input gradient, each
    with a scratch buffer).
    """
    if not beside or len(temps) < 2:
        return 0
    ranked = sorted(temps, key=lambda o: temps[o], reverse=True)
    top, rest = ranked[0], ranked[1:]
    if types.get(top) in beside:
        return temps[rest[0]]
    return max((temps[o] for o in rest if types.get(o) in beside), default=0)


def backward_bytes(
    buffers: Sequence[Allocation],
    ops: Sequence[OpInterval],
    every_op: Sequence[OpInterval],
    ordered: bool,
    beside: Collection[str] = (),
) -> int:
    """A block's working set when kswap orders its backward.

    One op's temporaries at a time (measured if the block ran ordered, else
    the least of two derivations), plus those of an op that runs beside the
    chain (:func:`beside_bytes`; ``beside`` are those ops' types). A block
    that ran ordered counts at least what its buffers held at once.
    """
    _, temps = temporaries(buffers)
    types = {o.op: o.type for o in ops}
    extra = beside_bytes(temps, types, beside)
    measured = ordered_peak(buffers)
    if ordered:
        return max(measured + extra, peak(buffers))
    replayed = replayed_peak(buffers, ops, every_op)
    return (measured if replayed is None else min(measured, replayed)) + extra
