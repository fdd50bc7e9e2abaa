"""Choosing an offset among the gaps left by buffers already placed.

The rule every engine implements: given the address ranges of the placed
buffers whose lifetimes overlap the new one, the free gaps are the holes in
their union. *First fit* takes the lowest gap that is large enough; *best
fit* the smallest such gap (the lowest one on ties). Either places the
buffer at the bottom of the gap, or on top of the union when no gap fits.

Example:
    >>> choose_offset(2, [(0, 4), (6, 9), (12, 13)], best_fit=True)
    4
    >>> choose_offset(3, [(0, 4), (6, 9), (12, 13)], best_fit=True)
    9
    >>> choose_offset(3, [(0, 4), (6, 9), (12, 13)], best_fit=False)
    9
    >>> choose_offset(4, [(0, 4), (6, 9), (12, 13)], best_fit=False)
    13
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["choose_offset"]


def choose_offset(size: int, ranges: Iterable[tuple[int, int]], *, best_fit: bool) -> int:
    """The offset of a buffer of ``size`` among occupied ``[lo, hi)`` ranges.

    Args:
        size: Size of the buffer (positive).
        ranges: Occupied address ranges, in any order; they may overlap.
        best_fit: Smallest fitting gap if True, else the lowest one.
    """
    reach = 0
    best = -1
    best_gap = 0
    for lo, hi in sorted(ranges):
        gap = lo - reach
        if gap >= size:
            if not best_fit:
                return reach
            if best < 0 or gap < best_gap:
                best, best_gap = reach, gap
        if hi > reach:
            reach = hi
    return reach if best < 0 else best
