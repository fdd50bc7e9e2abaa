"""Local search over placement orders.

Starting from a good order, repeatedly perturbs it and re-places with best
fit, keeping the change when the arena does not grow (equal arenas are
accepted, so the search can drift across plateaus). Two moves:

* move a buffer that reaches the top of the arena to a random earlier
  position (placed earlier, it tends to land lower);
* swap two random buffers that are close in the order.

Only the part of the order after the first changed position is re-placed.
The search stops at the lower bound, at the deadline, or after ``patience``
moves without improvement. It is seeded, so it is deterministic unless the
deadline cuts it short.

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

import time

import numpy as np

from kswap.allocator._place_simple import SimplePlacer

__all__ = ["improve_order"]


def improve_order(
    placer: SimplePlacer,
    order: np.ndarray,
    offsets: np.ndarray,
    *,
    lower: int,
    deadline: float | None = None,
    patience: int | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """A best-fit order at least as good as ``order``, and its offsets.

    Args:
        placer: Placer of the buffers.
        order: Starting order.
        offsets: Best-fit offsets of ``order``.
        lower: A lower bound on the arena: reaching it ends the search.
        deadline: ``time.perf_counter()`` value at which to stop.
        patience: Moves without improvement before stopping (default
            ``max(50, n // 2)``).
        seed: Seed of the random moves.
    """
    sizes = np.asarray(placer.sizes, dtype=np.int64)
    n = sizes.size
    best_order, best_offsets = np.array(order), np.array(offsets)
    best_arena = int((best_offsets + sizes).max(initial=0))
    if n < 2 or best_arena <= lower:
        return best_order, best_offsets
    rng = np.random.default_rng(seed)
    patience = patience if patience is not None else max(50, n // 2)
    cur_order, cur_offsets, cur_arena = best_order.copy(), best_offsets.copy(), best_arena
    stale = 0
    while stale < patience:
        if deadline is not None and time.perf_counter() > deadline:
            break
        new_order = cur_order.copy()
        if rng.random() < 0.5:
            tops = cur_offsets + sizes
            critical = np.flatnonzero(tops == cur_arena)
            c = int(critical[rng.integers(critical.size)])
            pos = int(np.flatnonzero(cur_order == c)[0])
            if pos == 0:
                stale += 1
                continue
            at = int(rng.integers(pos))
            new_order[at + 1 : pos + 1] = cur_order[at:pos]
            new_order[at] = c
        else:
            at = int(rng.integers(n - 1))
            other = min(n - 1, at + 1 + int(rng.geometric(0.3)) - 1)
            new_order[at], new_order[other] = cur_order[other], cur_order[at]
        new_offsets = placer.place(new_order, best_fit=True, offsets=cur_offsets.tolist(), start=at)
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
