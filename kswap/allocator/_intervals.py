"""Vectorised interval arithmetic: live-size peaks and overlapping pairs.

Every interval is half-open, ``[lo, hi)``; empty intervals (``hi <= lo``)
overlap nothing.

Example:
    >>> import numpy as np
    >>> peak_load(np.array([2, 3]), np.array([0, 1]), np.array([2, 3]))
    5
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = [
    "count_overlapping_pairs",
    "iter_overlapping_pairs",
    "load_profile",
    "peak_load",
    "range_table",
]

_CHUNK_PAIRS = 1 << 21


def range_table(values: np.ndarray, combine=np.minimum) -> list[np.ndarray]:
    """Sparse table: ``table[k][i] = combine(values[i : i + 2**k])``.

    With ``np.minimum`` (or ``np.maximum``) any range's minimum (maximum) is
    two lookups: ``combine(table[k][i], table[k][j - 2**k])`` for ``[i, j)``
    with ``2**k <= j - i < 2**(k + 1)``.
    """
    table = [values]
    width = 1
    while 2 * width <= values.size:
        prev = table[-1]
        table.append(combine(prev[:-width], prev[width:]))
        width *= 2
    return table


def load_profile(
    weights: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Total weight of the live intervals over time.

    Returns:
        ``(times, load)``: ``load[k]`` is the weight alive during
        ``[times[k], times[k + 1])``; both empty for no intervals.
    """
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([weights, -weights]).astype(np.int64)
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    load = np.cumsum(deltas)
    last = np.ones(times.size, dtype=bool)
    last[:-1] = times[1:] != times[:-1]
    return times[last], load[last]


def peak_load(weights: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """The largest total weight of intervals alive at one time (0 if none)."""
    if len(weights) == 0:
        return 0
    return int(load_profile(weights, starts, ends)[1].max(initial=0))


def _later_overlaps(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorts by ``lo``; counts the later intervals each one overlaps."""
    order = np.argsort(lo, kind="stable")
    slo = lo[order]
    # Intervals after position p overlap it iff they start before it ends.
    stop = np.searchsorted(slo, hi[order], side="left")
    counts = np.maximum(stop - np.arange(lo.size) - 1, 0)
    return order, counts


def count_overlapping_pairs(lo: np.ndarray, hi: np.ndarray) -> int:
    """How many unordered pairs of (non-empty) intervals overlap."""
    keep = hi > lo
    if not keep.all():
        lo, hi = lo[keep], hi[keep]
    return int(_later_overlaps(lo, hi)[1].sum())


def iter_overlapping_pairs(
    lo: np.ndarray, hi: np.ndarray, *, chunk: int = _CHUNK_PAIRS
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every unordered pair of overlapping non-empty intervals, in chunks.

    Yields:
        ``(i, j)`` index arrays of about ``chunk`` pairs each.
    """
    idx = np.flatnonzero(hi > lo)
    if idx.size < 2:
        return
    order, counts = _later_overlaps(lo[idx], hi[idx])
    order = idx[order]
    bounds = np.cumsum(counts)
    first = 0
    while first < idx.size:
        # Take whole rows until about `chunk` pairs are gathered.
        done = int(bounds[first - 1]) if first else 0
        last = int(np.searchsorted(bounds, done + chunk, side="right"))
        last = max(last, first + 1)
        rows = np.arange(first, min(last, idx.size))
        c = counts[rows]
        total = int(c.sum())
        if total:
            row = np.repeat(rows, c)
            step = np.arange(total) - np.repeat(np.cumsum(c) - c, c)
            yield order[row], order[row + 1 + step]
        first = int(rows[-1]) + 1
