"""What a placement engine is: buffers placed in a given order, best or first fit.

Three engines implement it, each fastest on its own kind of instance
(:mod:`~kswap.allocator._place_simple`, :mod:`~kswap.allocator._place_batched`,
:mod:`~kswap.allocator._place_dense`); the algorithms pick one and call
:meth:`Placer.place`. Engines that can resume an order from any position with
the earlier offsets kept, which local search needs, are
:class:`ResumablePlacer`.

Example:
    >>> import numpy as np
    >>> from kswap.allocator._place_dense import DensePlacer
    >>> isinstance(DensePlacer(np.array([1]), np.array([0]), np.array([1])), ResumablePlacer)
    True
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

__all__ = ["Placer", "ResumablePlacer"]


class Placer(abc.ABC):
    """Places buffers in a given order.

    Args:
        sizes: Positive sizes.
        starts: Start times.
        ends: End times (exclusive).
    """

    def __init__(self, sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.asarray(ends, dtype=np.int64)

    @abc.abstractmethod
    def place(self, order: np.ndarray, *, best_fit: bool) -> np.ndarray:
        """Offsets of the buffers placed in ``order``.

        Args:
            order: Permutation of the buffer indices.
            best_fit: Best fit if True, else first fit.
        """


class ResumablePlacer(Placer):
    """A :class:`Placer` that can resume an order from any position."""

    @abc.abstractmethod
    def place(
        self,
        order: np.ndarray,
        *,
        best_fit: bool,
        offsets: Sequence[int] | np.ndarray | None = None,
        start: int = 0,
    ) -> np.ndarray:
        """Offsets of the buffers placed in ``order``.

        Args:
            order: Permutation of the buffer indices.
            best_fit: Best fit if True, else first fit.
            offsets: Offsets of an earlier placement whose first ``start``
                buffers of ``order`` are kept.
            start: Position of ``order`` to resume placing from.
        """
