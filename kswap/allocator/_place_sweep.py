"""Best-fit placement in order of start time, as an allocator simulation.

When buffers are placed in order of start time, the placed buffers that
overlap the next one are exactly those still alive when it starts. Placing
is then what a best-fit allocator with coalescing free lists does: sweep the
allocation and free events in time order, keeping the live blocks sorted by
address and the holes between them sorted by size. That costs O(n log n)
however many lifetimes overlap, and gives the same offsets as the generic
engines for such an order.

Example:
    >>> import numpy as np
    >>> sizes, starts, ends = np.array([2, 1, 2]), np.array([0, 1, 2]), np.array([2, 3, 4])
    >>> sweep_place(np.array([0, 1, 2]), sizes, starts, ends).tolist()
    [0, 2, 0]
"""

from __future__ import annotations

from bisect import bisect_left, insort

import numpy as np

__all__ = ["sweep_place"]


def sweep_place(
    order: np.ndarray, sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """Best-fit offsets of the buffers placed in ``order``.

    Args:
        order: Permutation of the buffer indices, sorted by start time (ties in
            any order).
        sizes: Positive sizes.
        starts: Start times.
        ends: End times (exclusive).
    """
    n = len(sizes)
    order = np.asarray(order, dtype=np.int64)
    # Events: frees (kind 0) sort before allocations (kind 1) at the same time.
    by_end = np.argsort(ends, kind="stable")
    times = np.concatenate([ends[by_end], starts[order]])
    kinds = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
    events = np.concatenate([by_end, order])
    seq = np.lexsort((np.arange(2 * n), kinds, times))
    size_l = sizes.tolist()
    offsets = [0] * n
    live: list[int] = []  # offsets of the live blocks, sorted
    top_at: dict[int, int] = {}  # offset -> end address of the live block there
    holes: list[tuple[int, int]] = []  # (size, offset) of the holes between blocks
    for kind, j in zip(kinds[seq].tolist(), events[seq].tolist(), strict=True):
        if kind:
            size = size_l[j]
            k = bisect_left(holes, (size, -1))
            if k < len(holes):
                hole, at = holes.pop(k)
                if hole > size:
                    insort(holes, (hole - size, at + size))
            else:
                at = top_at[live[-1]] if live else 0
            insort(live, at)
            top_at[at] = at + size
            offsets[j] = at
            continue
        at = offsets[j]
        k = bisect_left(live, at)
        top = top_at.pop(at)
        del live[k]
        below = top_at[live[k - 1]] if k else 0
        if below < at:
            holes.pop(bisect_left(holes, (at - below, below)))
        if k < len(live):  # a block above: the hole grows to reach it
            above = live[k]
            if top < above:
                holes.pop(bisect_left(holes, (above - top, top)))
            insort(holes, (above - below, below))
    return np.array(offsets, dtype=np.int64)
