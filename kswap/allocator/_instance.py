"""The packing problem as the algorithms see it.

Sizes are in units of the alignment, so every algorithm works on integers
and any offset it returns is aligned. Two kinds of buffers need no search
and are set aside:

* zero-size buffers occupy nothing and get offset 0;
* buffers alive over the whole horizon (start at the earliest start, end at
  the latest end: weights, optimizer slots) overlap every other buffer, so
  they are stacked at the bottom, largest first, and the rest of the
  problem (the *core*) is packed above them.

Example:
    >>> import numpy as np
    >>> inst = Instance(np.array([4, 1, 2]), np.array([0, 0, 2]), np.array([5, 2, 5]))
    >>> inst.base, inst.core.tolist(), inst.lower_bound
    (4, [1, 2], 6)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kswap.allocator._intervals import peak_load

__all__ = ["Instance", "as_int_array"]


def as_int_array(values: Any) -> np.ndarray:
    """A one-dimensional int64 copy of ``values``."""
    return np.array(values, dtype=np.int64).reshape(-1)


class Instance:
    """Sizes (alignment units), lifetimes and the core sub-problem.

    Attributes:
        sizes: Sizes in alignment units, one per buffer.
        starts: Start times.
        ends: End times (exclusive).
        fixed: Whole-horizon buffers, in the order they are stacked.
        fixed_offsets: Their offsets.
        base: Where the core starts (total size of ``fixed``).
        core: Indices of the remaining buffers with a positive size.
        lower_bound: Largest total size alive at one time (whole problem).
    """

    def __init__(self, sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self.sizes = as_int_array(sizes)
        self.starts = as_int_array(starts)
        self.ends = as_int_array(ends)
        n = self.sizes.size
        if not n == self.starts.size == self.ends.size:
            raise ValueError(
                "`sizes`, `starts` and `ends` must have the same length. "
                f"Received: {n}, {self.starts.size}, {self.ends.size}"
            )
        if (self.sizes < 0).any() or (self.ends <= self.starts).any():
            raise ValueError("Sizes must be non-negative and every end after its start.")
        positive = self.sizes > 0
        if n:
            whole = (self.starts == self.starts.min()) & (self.ends == self.ends.max())
        else:
            whole = np.zeros(0, dtype=bool)
        fixed = np.flatnonzero(whole & positive)
        self.fixed = fixed[np.argsort(-self.sizes[fixed], kind="stable")]
        tops = np.cumsum(self.sizes[self.fixed])
        self.fixed_offsets = tops - self.sizes[self.fixed]
        self.base = int(tops[-1]) if tops.size else 0
        self.core = np.flatnonzero(~whole & positive)
        self.lower_bound = peak_load(self.sizes, self.starts, self.ends)

    @property
    def core_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(sizes, starts, ends)`` of the core buffers."""
        c = self.core
        return self.sizes[c], self.starts[c], self.ends[c]

    @property
    def core_lower_bound(self) -> int:
        """Lower bound on the core's arena (the whole-horizon stack removed)."""
        return self.lower_bound - self.base

    def full_offsets(self, core_offsets: np.ndarray) -> np.ndarray:
        """Offsets of every buffer from the offsets of the core buffers."""
        out = np.zeros(self.sizes.size, dtype=np.int64)
        out[self.fixed] = self.fixed_offsets
        out[self.core] = np.asarray(core_offsets, dtype=np.int64) + self.base
        return out
