"""Sequential placement for instances where many lifetimes overlap.

When thousands of buffers are alive together (activations kept for the
backward pass), enumerating overlapping pairs costs O(n**2). This engine
instead keeps *unions* of occupied address ranges, which stay short in a
dense packing. Time is cut into bins of equal numbers of distinct event
times. Per bin it keeps the union of the placed buffers that cover the whole
bin and the union of all placed buffers that touch it. A buffer's occupied
set is then

* for bins inside its lifetime: the union of everything touching the bin;
* for the (at most two) bins it only partly covers: the union of the buffers
  covering that bin, plus the placed buffers with an end inside that bin that
  overlap it, found with a numpy filter over that bin's few candidates.

Unions are flat sorted lists ``[lo0, hi0, lo1, hi1, ...]`` of disjoint
ranges (touching ranges merged).

Example:
    >>> import numpy as np
    >>> placer = BinnedPlacer(np.array([2, 1, 2]), np.array([0, 1, 2]), np.array([2, 3, 4]))
    >>> placer.place(np.array([0, 2, 1]), best_fit=True).tolist()
    [0, 2, 0]
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from kswap.allocator._gaps import choose_offset

__all__ = ["BinnedPlacer"]


def _add(union: list[int], lo: int, hi: int) -> None:
    """Adds ``[lo, hi)`` to a flat sorted union of disjoint ranges."""
    i = bisect_left(union, lo)
    j = bisect_right(union, hi)
    if i & 1:  # lo falls in (or touches the end of) the range before
        i -= 1
        lo = union[i]
    if j & 1:  # hi falls in (or touches the start of) the range after
        hi = union[j]
        j += 1
    union[i:j] = [lo, hi]


class BinnedPlacer:
    """Places buffers in a given order, one at a time, with unions per time bin.

    Args:
        sizes: Positive sizes.
        starts: Start times.
        ends: End times (exclusive).
        bins: Number of time bins (default: about ``sqrt(n) / 4``).
    """

    def __init__(
        self, sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray, bins: int | None = None
    ) -> None:
        n = len(sizes)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        times = np.unique(np.concatenate([starts, ends]))
        first = np.searchsorted(times, starts)  # slots [first, stop)
        stop = np.searchsorted(times, ends)
        slots = max(int(times.size) - 1, 1)
        bins = bins or max(1, int(np.sqrt(n) / 4))
        width = -(-slots // min(bins, slots))
        self.n_bins = -(-slots // width)
        b_lo, b_hi = first // width, (stop - 1) // width
        c_lo, c_hi = -(-first // width), stop // width - 1  # bins covered entirely
        self.b_lo, self.b_hi = b_lo.tolist(), b_hi.tolist()
        self.c_lo, self.c_hi = c_lo.tolist(), c_hi.tolist()
        self.starts, self.ends = np.asarray(starts), np.asarray(ends)
        # Candidates partly in each bin: buffers touching it without covering it.
        low_part = b_lo < c_lo
        high_part = (b_hi > c_hi) & ~(low_part & (b_hi == b_lo))
        ids = np.concatenate([np.flatnonzero(low_part), np.flatnonzero(high_part)])
        owner = np.concatenate([b_lo[low_part], b_hi[high_part]])
        by_bin = np.lexsort((ids, owner))
        ids, owner = ids[by_bin], owner[by_bin]
        cut = np.searchsorted(owner, np.arange(self.n_bins + 1))
        self.partial = [ids[cut[k] : cut[k + 1]] for k in range(self.n_bins)]
        self.partial_starts = [self.starts[p] for p in self.partial]
        self.partial_ends = [self.ends[p] for p in self.partial]

    def place(self, order: np.ndarray, *, best_fit: bool) -> np.ndarray:
        """Offsets of the buffers placed in ``order`` (best or first fit)."""
        n = self.sizes.size
        offsets = np.zeros(n, dtype=np.int64)
        tops = np.zeros(n, dtype=np.int64)
        placed = np.zeros(n, dtype=bool)
        cover: list[list[int]] = [[] for _ in range(self.n_bins)]
        touch: list[list[int]] = [[] for _ in range(self.n_bins)]
        sizes = self.sizes.tolist()
        starts, ends = self.starts.tolist(), self.ends.tolist()
        b_lo, b_hi, c_lo, c_hi = self.b_lo, self.b_hi, self.c_lo, self.c_hi
        partial, p_starts, p_ends = self.partial, self.partial_starts, self.partial_ends
        for j in np.asarray(order).tolist():
            s, e, lo_bin, hi_bin = starts[j], ends[j], b_lo[j], b_hi[j]
            inner_lo, inner_hi = c_lo[j], c_hi[j]
            flat: list[int] = []
            for k in range(max(lo_bin, inner_lo), min(hi_bin, inner_hi) + 1):
                flat += touch[k]
            for k in {lo_bin, hi_bin}:
                if inner_lo <= k <= inner_hi:
                    continue
                flat += cover[k]
                cand = partial[k]
                if cand.size:
                    hit = cand[placed[cand] & (p_starts[k] < e) & (p_ends[k] > s)]
                    if hit.size:
                        pair = np.empty(2 * hit.size, dtype=np.int64)
                        pair[0::2] = offsets[hit]
                        pair[1::2] = tops[hit]
                        flat += pair.tolist()
            size = sizes[j]
            at = choose_offset(size, zip(flat[0::2], flat[1::2]), best_fit=best_fit)
            top = at + size
            offsets[j], tops[j], placed[j] = at, top, True
            for k in range(lo_bin, hi_bin + 1):
                _add(touch[k], at, top)
            for k in range(inner_lo, inner_hi + 1):
                _add(cover[k], at, top)
        return offsets
