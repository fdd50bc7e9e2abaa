"""Improving a placement order: local search and squeaky-wheel re-ordering.

:func:`improve_order` is a local search. Starting from a good order, it
repeatedly perturbs it and re-places with best fit, keeping the change when
the arena does not grow (equal arenas are accepted, so the search can drift
across plateaus). Two moves:

* move a buffer that reaches the top of the arena to a random earlier
  position (placed earlier, it tends to land lower);
* swap two random buffers that are close in the order.

Only the part of the order after the first changed position is re-placed.
The search stops at the lower bound, after ``patience`` moves without
improvement, or when it has placed ``work`` buffers in all. It is seeded, so
it is deterministic.

:func:`squeaky_wheel` is cheaper per step on large instances: it moves every
buffer that reaches the top of the arena to the front of the order and
places the whole order again, a fixed number of times.

Example:
    >>> import numpy as np
    >>> from kswap.allocator._place_simple import SimplePlacer
    >>> sizes, starts, ends = np.array([2, 1, 2]), np.array([0, 1, 2]), np.array([2, 3, 4])
    >>> placer = SimplePlacer(sizes, starts, ends)
    >>> order = np.array([0, 2, 1])
    >>> order, offsets = improve_order(placer, order, placer.place(order, best_fit=True), lower=3)
    >>> int((offsets + sizes).max())
    3
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from kswap.allocator._placer import ResumablePlacer

__all__ = ["MOVE_OVERHEAD", "improve_order", "squeaky_wheel"]

#: What a local-search move costs besides re-placing buffers, in placements.
MOVE_OVERHEAD = 8


def improve_order(
    placer: ResumablePlacer,
    order: np.ndarray,
    offsets: np.ndarray,
    *,
    lower: int,
    work: int | None = None,
    patience: int | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """A best-fit order at least as good as ``order``, and its offsets.

    Args:
        placer: Placer of the buffers (one that can resume an order).
        order: Starting order.
        offsets: Best-fit offsets of ``order``.
        lower: A lower bound on the arena: reaching it ends the search.
        work: Buffer placements to spend at most: a move re-placing the
            last ``k`` buffers of the order costs ``k + MOVE_OVERHEAD``
            (default: ``50 * n``).
        patience: Moves without improvement before stopping (default
            ``max(50, n // 2)``).
        seed: Seed of the random moves.
    """
    sizes = placer.sizes
    n = sizes.size
    best_order, best_offsets = np.array(order), np.array(offsets)
    best_arena = int((best_offsets + sizes).max(initial=0))
    if n < 2 or best_arena <= lower:
        return best_order, best_offsets
    rng = np.random.default_rng(seed)
    patience = patience if patience is not None else max(50, n // 2)
    left = work if work is not None else 50 * n
    cur_order, cur_offsets, cur_arena = best_order.copy(), best_offsets.copy(), best_arena
    stale = 0
    while stale < patience and left > 0:
        new_order = cur_order.copy()
        if rng.random() < 0.5:
            tops = cur_offsets + sizes
            critical = np.flatnonzero(tops == cur_arena)
            c = int(critical[rng.integers(critical.size)])
            pos = int(np.flatnonzero(cur_order == c)[0])
            if pos == 0:
                stale += 1
                left -= MOVE_OVERHEAD
                continue
            at = int(rng.integers(pos))
            new_order[at + 1 : pos + 1] = cur_order[at:pos]
            new_order[at] = c
        else:
            at = int(rng.integers(n - 1))
            other = min(n - 1, at + 1 + int(rng.geometric(0.3)) - 1)
            new_order[at], new_order[other] = cur_order[other], cur_order[at]
        new_offsets = placer.place(new_order, best_fit=True, offsets=cur_offsets, start=at)
        left -= n - at + MOVE_OVERHEAD
        arena = int((new_offsets + sizes).max())
        stale += 1
        if arena <= cur_arena:
            cur_order, cur_offsets, cur_arena = new_order, new_offsets, arena
        if arena < best_arena:
            best_order, best_offsets, best_arena = new_order, new_offsets, arena
            stale = 0
            if arena <= lower:
                break
    return best_order, best_offsets


def squeaky_wheel(
    place: Callable[[np.ndarray], np.ndarray],
    sizes: np.ndarray,
    order: np.ndarray,
    offsets: np.ndarray,
    *,
    lower: int,
    rounds: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Re-orderings of ``order`` that put the buffers on top first.

    Each round moves the buffers reaching the top of the arena to the front
    of the order (keeping their relative order, and that of the others) and
    places it again, ``rounds`` times or until the lower bound is reached.

    Args:
        place: ``order -> offsets`` (the placement rule of ``offsets``).
        sizes: Sizes of the buffers.
        order: Starting order.
        offsets: Its offsets.
        lower: A lower bound on the arena.
        rounds: Placements to make at most.

    Yields:
        ``(order, offsets)`` of every round.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    for _ in range(rounds):
        tops = offsets + sizes
        arena = int(tops.max(initial=0))
        if arena <= lower:
            return
        on_top = (tops == arena)[order]
        order = np.concatenate([order[on_top], order[~on_top]])
        offsets = place(order)
        yield order, offsets
