"""Sequential placement over an explicit overlap graph (small instances).

Keeps, for every buffer, the list of buffers whose lifetimes overlap it, and
places the buffers one by one. Placement can resume from any position of an
order with the earlier offsets kept, which is what local search needs.

Example:
    >>> import numpy as np
    >>> placer = SimplePlacer(np.array([2, 1, 2]), np.array([0, 1, 2]), np.array([2, 3, 4]))
    >>> placer.place(np.array([0, 2, 1]), best_fit=True).tolist()
    [0, 2, 0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kswap.allocator._gaps import choose_offset
from kswap.allocator._intervals import iter_overlapping_pairs
from kswap.allocator._placer import ResumablePlacer

__all__ = ["SimplePlacer"]


class SimplePlacer(ResumablePlacer):
    """Places buffers in a given order, one at a time (see :class:`ResumablePlacer`)."""

    def __init__(self, sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        super().__init__(sizes, starts, ends)
        n = len(sizes)
        self._sizes = [int(s) for s in sizes]  # Python ints for the per-buffer loop
        neighbors: list[list[int]] = [[] for _ in range(n)]
        for i, j in iter_overlapping_pairs(self.starts, self.ends):
            for a, b in zip(i.tolist(), j.tolist(), strict=True):
                neighbors[a].append(b)
                neighbors[b].append(a)
        self.neighbors = neighbors

    def place(
        self,
        order: np.ndarray,
        *,
        best_fit: bool,
        offsets: Sequence[int] | np.ndarray | None = None,
        start: int = 0,
    ) -> np.ndarray:
        order_l = [int(i) for i in order]
        n = len(order_l)
        rank = [0] * n
        for r, i in enumerate(order_l):
            rank[i] = r
        off = np.asarray(offsets).tolist() if offsets is not None else [0] * n
        sizes, neighbors = self._sizes, self.neighbors
        for r in range(start, n):
            j = order_l[r]
            ranges = [(off[k], off[k] + sizes[k]) for k in neighbors[j] if rank[k] < r]
            off[j] = choose_offset(sizes[j], ranges, best_fit=best_fit)
        return np.array(off, dtype=np.int64)
