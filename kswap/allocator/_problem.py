"""An instance's core as the packing algorithms see it, and the cost model.

:class:`Problem` holds the core of an :class:`~kswap.allocator._instance.Instance`
(the buffers not stacked at the bottom), builds the placement engines on
first use - dense (:mod:`~kswap.allocator._place_dense`), batched
(:mod:`~kswap.allocator._place_batched`), simple
(:mod:`~kswap.allocator._place_simple`) and the time sweeps
(:mod:`~kswap.allocator._place_sweep`) - picks the cheapest for the
instance, and predicts what a placement costs in *work units* (about a
nanosecond each on the reference machine; see
:mod:`kswap.allocator._algorithms`). :func:`placement_cost` is that
prediction for greedy by size.

Example:
    >>> import numpy as np
    >>> from kswap.allocator._instance import Instance
    >>> sizes, starts, ends = np.array([4, 2, 2]), np.array([0, 1, 3]), np.array([2, 4, 5])
    >>> problem = Problem(Instance(sizes, starts, ends))
    >>> order, offsets = problem.place("size")
    >>> offsets.tolist(), problem.arena(offsets), problem.lower
    ([0, 4, 0], 6, 6)
    >>> placement_cost(sizes, starts, ends) == problem.cost("size")
    True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kswap.allocator._instance import Instance
from kswap.allocator._intervals import count_overlapping_pairs
from kswap.allocator._orders import SWEEP_ORDERS, contention, placement_order
from kswap.allocator._place_batched import BatchedPlacer
from kswap.allocator._place_dense import DensePlacer, scan_length
from kswap.allocator._place_simple import SimplePlacer
from kswap.allocator._place_sweep import sweep_place

__all__ = ["Problem", "placement_cost"]

# Cost model, in work units (fitted on random, synthetic and real instances).
_ORDER_PER_BUFFER = 600  # sorting the keys, contention
_SWEEP_PER_BUFFER = 1_700
_DENSE_PER_BUFFER = 7_500
_DENSE_PER_SCANNED = 1
_DENSE_PER_PAIR = 30
_BATCHED_FIXED = 10_000_000  # only for sparse instances: see Problem.use_dense
_BATCHED_PER_BUFFER = 3_000
_BATCHED_PER_PAIR = 50
_BATCHED_CONTENTION_FACTOR = 2  # those orders make smaller batches
_SIMPLE_PER_BUFFER = 1_500
_SIMPLE_PER_PAIR = 330
_SIMPLE_BUILD_PER_PAIR = 300
_DENSE_PAIRS_PER_BUFFER = 64  # denser: the dense engine, and the time sweeps first


class Problem:
    """The core of an instance with its placers, built on first use."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.sizes, self.starts, self.ends = inst.core_arrays
        self.n = self.sizes.size
        self.lower = inst.core_lower_bound
        self._pairs: int | None = None
        self._scanned: int | None = None
        self._contended: np.ndarray | None = None
        self._placer: BatchedPlacer | DensePlacer | None = None
        self._dense: DensePlacer | None = None
        self._simple: SimplePlacer | None = None

    @property
    def pairs(self) -> int:
        if self._pairs is None:
            self._pairs = count_overlapping_pairs(self.starts, self.ends)
        return self._pairs

    @property
    def scanned(self) -> int:
        if self._scanned is None:
            self._scanned = scan_length(self.starts, self.ends)
        return self._scanned

    # Costs -----------------------------------------------------------------

    @property
    def dense(self) -> bool:
        """Whether lifetimes overlap a lot (real training steps do)."""
        return self.pairs > _DENSE_PAIRS_PER_BUFFER * self.n

    def dense_cost(self) -> int:
        return (
            _DENSE_PER_BUFFER * self.n
            + _DENSE_PER_SCANNED * self.scanned
            + _DENSE_PER_PAIR * self.pairs
        )

    def batched_cost(self) -> int:
        return _BATCHED_FIXED + _BATCHED_PER_BUFFER * self.n + _BATCHED_PER_PAIR * self.pairs

    def simple_cost(self) -> int:
        return _SIMPLE_PER_BUFFER * self.n + _SIMPLE_PER_PAIR * self.pairs

    def use_dense(self) -> bool:
        """Whether the generic engine is the dense one.

        The batched engine is for sparse instances (its model ignores the
        many small batches a dense one splits into).
        """
        return self.dense or self.dense_cost() <= self.batched_cost()

    def generic_cost(self) -> int:
        """Work of one placement with the generic engine."""
        return self.dense_cost() if self.use_dense() else self.batched_cost()

    def cost(self, name: str) -> int:
        """Work of placing the order called ``name``."""
        if name in SWEEP_ORDERS:
            return (_SWEEP_PER_BUFFER + _ORDER_PER_BUFFER) * self.n
        placing = self.generic_cost()
        if name.startswith("contention") and not self.use_dense():
            placing *= _BATCHED_CONTENTION_FACTOR
        return placing + _ORDER_PER_BUFFER * self.n

    # Engines ---------------------------------------------------------------

    def dense_placer(self) -> DensePlacer:
        if self._dense is None:
            self._dense = DensePlacer(self.sizes, self.starts, self.ends)
        return self._dense

    def simple(self) -> SimplePlacer:
        if self._simple is None:
            self._simple = SimplePlacer(self.sizes, self.starts, self.ends)
        return self._simple

    def placer(self) -> BatchedPlacer | DensePlacer:
        """The generic engine: dense or batched (see :meth:`use_dense`)."""
        if self._placer is None:
            if self.use_dense():
                self._placer = self.dense_placer()
            else:
                self._placer = BatchedPlacer(self.sizes, self.starts, self.ends)
        return self._placer

    def resumable(self) -> tuple[Callable[[], SimplePlacer | DensePlacer], int, int]:
        """An engine that can resume an order (for local search), not built yet.

        Returns:
            ``(build it, cost of building it, cost of placing every buffer)``:
            the simple engine where it is cheaper per placement, else the
            dense one.
        """
        simple = self.simple_cost()
        if simple < self.dense_cost():
            build = _SIMPLE_BUILD_PER_PAIR * self.pairs if self._simple is None else 0
            return self.simple, build, simple
        return self.dense_placer, 0, self.dense_cost()

    # Placing ---------------------------------------------------------------

    def order(self, name: str) -> np.ndarray:
        if name in ("contention", "contention_lifetime") and self._contended is None:
            self._contended = contention(self.sizes, self.starts, self.ends)
        return placement_order(name, self.sizes, self.starts, self.ends, contended=self._contended)

    def place(self, name: str, *, best_fit: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The named order and the core offsets it gives."""
        order = self.order(name)
        if best_fit and name == "start":
            return order, sweep_place(order, self.sizes, self.starts, self.ends)
        if best_fit and name == "end":  # a start sweep with time reversed
            return order, sweep_place(order, self.sizes, -self.ends, -self.starts)
        return order, self.placer().place(order, best_fit=best_fit)

    def arena(self, core_offsets: np.ndarray) -> int:
        return int((core_offsets + self.sizes).max(initial=0))


def placement_cost(sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """Work units of placing the buffers in one order (greedy by size's cost)."""
    return Problem(Instance(sizes, starts, ends)).cost("size")
