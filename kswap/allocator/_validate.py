"""Checking that no two buffers alive together overlap in memory.

Two strategies, chosen by a count made in O(n log n):

* when few pairs of buffers overlap in time, or few overlap in address
  space (a good packing is dense in one of the two), those pairs are listed
  with numpy and the other dimension is checked for each;
* otherwise a sweep line: events in time order (frees before allocations at
  the same time), live blocks kept sorted by address, and each new block
  checked against its two neighbours - enough, since the live blocks are
  disjoint until the first conflict. O(n log n) in all cases.

Example:
    >>> import numpy as np
    >>> sizes, starts, ends = np.array([2, 2]), np.array([0, 1]), np.array([2, 3])
    >>> find_conflict(sizes, starts, ends, np.array([0, 2])) is None
    True
    >>> find_conflict(sizes, starts, ends, np.array([0, 1]))
    (0, 1)
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

import numpy as np

from kswap.allocator._instance import as_int_array
from kswap.allocator._intervals import count_overlapping_pairs, iter_overlapping_pairs

__all__ = ["find_conflict"]

_PAIRS_PER_BUFFER = 64  # list pairs below this many per buffer, else sweep


def find_conflict(
    sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray, offsets: np.ndarray
) -> tuple[int, int] | None:
    """Two buffers alive at the same time whose address ranges overlap.

    Args:
        sizes: Sizes (zero-size buffers never conflict).
        starts: Start times.
        ends: End times (exclusive).
        offsets: Offsets.

    Returns:
        The indices ``(i, j)``, ``i < j``, of one conflicting pair, or None.
    """
    sizes, offsets = as_int_array(sizes), as_int_array(offsets)
    starts, ends = as_int_array(starts), as_int_array(ends)
    tops = offsets + sizes
    live = sizes > 0
    t_lo, t_hi = np.where(live, starts, 0), np.where(live, ends, 0)
    in_time = count_overlapping_pairs(t_lo, t_hi)
    in_space = count_overlapping_pairs(offsets, tops)
    if min(in_time, in_space) > _PAIRS_PER_BUFFER * max(sizes.size, 1):
        return _sweep(np.flatnonzero(live), starts, ends, offsets, tops)
    if in_time <= in_space:
        return _check_pairs(iter_overlapping_pairs(t_lo, t_hi), offsets, tops)
    return _check_pairs(iter_overlapping_pairs(offsets, tops), t_lo, t_hi)


def _check_pairs(pairs, lo: np.ndarray, hi: np.ndarray) -> tuple[int, int] | None:
    """The first listed pair whose ``[lo, hi)`` ranges also overlap."""
    for i, j in pairs:
        bad = (lo[i] < hi[j]) & (lo[j] < hi[i])
        if bad.any():
            k = int(np.argmax(bad))
            a, b = int(i[k]), int(j[k])
            return (a, b) if a < b else (b, a)
    return None


def _sweep(
    ids: np.ndarray, starts: np.ndarray, ends: np.ndarray, offsets: np.ndarray, tops: np.ndarray
) -> tuple[int, int] | None:
    """Sweep line over the buffers ``ids`` (all of positive size)."""
    m = ids.size
    times = np.concatenate([ends[ids], starts[ids]])
    kinds = np.concatenate([np.zeros(m, np.int8), np.ones(m, np.int8)])  # frees first
    seq = np.lexsort((kinds, times))
    who = np.concatenate([ids, ids])[seq].tolist()
    kinds_l = kinds[seq].tolist()
    off_l, top_l = offsets.tolist(), tops.tolist()
    live: list[int] = []  # offsets of the live blocks, sorted
    owner: dict[int, int] = {}  # offset -> buffer
    for kind, j in zip(kinds_l, who, strict=True):
        lo = off_l[j]
        if not kind:
            del live[bisect_left(live, lo)]
            del owner[lo]
            continue
        k = bisect_right(live, lo)
        if k and top_l[owner[live[k - 1]]] > lo:
            other = owner[live[k - 1]]
            return (min(j, other), max(j, other))
        if k < len(live) and live[k] < top_l[j]:
            other = owner[live[k]]
            return (min(j, other), max(j, other))
        insort(live, lo)
        owner[lo] = j
    return None
