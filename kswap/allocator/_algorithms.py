"""The packing algorithms and their registry.

Every algorithm takes ``(sizes, starts, ends)`` - sizes in units of the
alignment, integer times, half-open lifetimes - and returns one offset per
buffer, in the same units. All of them stack the buffers that live over the
whole horizon at the bottom first (see :mod:`kswap.allocator._instance`).

* ``"greedy_size"``: SmartPool / TFLite greedy by size - largest first (ties:
  longer-lived, then earlier), each in the smallest gap left by the placed
  buffers alive with it, or on top.
* ``"first_fit"``: the same order, each in the lowest gap that fits.
* ``"multi_order"``: best fit under several orders (size, breadth,
  contention, lifetime, start and end time sweeps); the smallest arena wins.
* ``"local_search"``: the ``"multi_order"`` result, then exact branch and
  bound for up to :data:`EXACT_MAX_BUFFERS` buffers, or else (up to 5,000
  buffers) a local search over orders for :data:`DEFAULT_TIME_BUDGET` seconds.
* ``"best"``: all of the above within a time budget (see :func:`best`).

A placement reaching the lower bound (the most bytes alive at one time) is
optimal and ends any search.

Cost: the generic placement is proportional to the number of pairs of
overlapping lifetimes, ``P``, about 150 ns per pair plus a few microseconds
per buffer; the time sweeps are ``O(n log n)`` whatever ``P``.

Example:
    >>> import numpy as np
    >>> sizes, starts, ends = np.array([4, 2, 2]), np.array([0, 1, 3]), np.array([2, 4, 5])
    >>> ALGORITHMS["greedy_size"](sizes, starts, ends).tolist()
    [0, 4, 0]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np

from kswap.allocator._exact import EXACT_MAX_BUFFERS, exact_pack
from kswap.allocator._instance import Instance
from kswap.allocator._intervals import count_overlapping_pairs
from kswap.allocator._orders import ORDERS, SWEEP_ORDERS, placement_order
from kswap.allocator._place_batched import BatchedPlacer
from kswap.allocator._place_simple import SimplePlacer
from kswap.allocator._place_sweep import sweep_place
from kswap.allocator._search import improve_order
from kswap.allocator._validate import find_conflict

__all__ = [
    "ALGORITHMS",
    "DEFAULT_TIME_BUDGET",
    "EXACT_MAX_BUFFERS",
    "Algorithm",
    "best",
    "first_fit",
    "greedy_size",
    "local_search",
    "multi_order",
]

#: ``(sizes, starts, ends) -> offsets``, sizes and offsets in alignment units.
Algorithm = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

#: Seconds ``"best"`` (and the local search of ``"local_search"``) may spend.
DEFAULT_TIME_BUDGET = 1.25

_SIMPLE_MAX_BUFFERS = 3_000  # below these, one-at-a-time placement is faster
_SIMPLE_MAX_PAIRS = 1_000_000
_SEARCH_MAX_BUFFERS = 5_000  # local search re-places one buffer at a time...
_SEARCH_MAX_PAIRS = 300_000  # ...looking at each overlapping pair in Python
_SECONDS_PER_PAIR = 150e-9  # cost model of the generic placement
_SECONDS_PER_BUFFER = 5e-6
_SECONDS_PER_SWEEP_BUFFER = 3e-6
_DENSE_PAIRS_PER_BUFFER = 16  # denser: "best" tries the time sweeps early


class _Problem:
    """The core of an instance with its placers, built on first use."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.sizes, self.starts, self.ends = inst.core_arrays
        self.n = self.sizes.size
        self.lower = inst.core_lower_bound
        self._pairs: int | None = None
        self._placer: BatchedPlacer | SimplePlacer | None = None
        self._simple: SimplePlacer | None = None
        self.speed = 1.0  # measured / modelled cost of the generic placement

    @property
    def pairs(self) -> int:
        if self._pairs is None:
            self._pairs = count_overlapping_pairs(self.starts, self.ends)
        return self._pairs

    def simple(self) -> SimplePlacer:
        if self._simple is None:
            self._simple = SimplePlacer(self.sizes, self.starts, self.ends)
        return self._simple

    def placer(self) -> BatchedPlacer | SimplePlacer:
        if self._placer is None:
            if self.n <= _SIMPLE_MAX_BUFFERS and self.pairs <= _SIMPLE_MAX_PAIRS:
                self._placer = self.simple()
            else:
                self._placer = BatchedPlacer(self.sizes, self.starts, self.ends)
        return self._placer

    def order(self, name: str) -> np.ndarray:
        return placement_order(name, self.sizes, self.starts, self.ends)

    def place(self, name: str, *, best_fit: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The named order and the core offsets it gives."""
        order = self.order(name)
        if best_fit and name == "start":
            return order, sweep_place(order, self.sizes, self.starts, self.ends)
        if best_fit and name == "end":  # a start sweep with time reversed
            return order, sweep_place(order, self.sizes, -self.ends, -self.starts)
        began = time.perf_counter()
        offsets = self.placer().place(order, best_fit=best_fit)
        self.speed = max(time.perf_counter() - began, 1e-4) / self.generic_cost(calibrated=False)
        return order, offsets

    def generic_cost(self, *, calibrated: bool = True) -> float:
        """Predicted seconds of one generic placement."""
        model = _SECONDS_PER_PAIR * self.pairs + _SECONDS_PER_BUFFER * self.n
        return model * (self.speed if calibrated else 1.0)

    def cost(self, name: str) -> float:
        if name in SWEEP_ORDERS:
            return _SECONDS_PER_SWEEP_BUFFER * self.n
        return self.generic_cost()

    def arena(self, core_offsets: np.ndarray) -> int:
        return int((core_offsets + self.sizes).max(initial=0))


class _Best:
    """The placements tried so far, and the best of them."""

    def __init__(self, problem: _Problem) -> None:
        self.problem = problem
        self.arena = -1
        self.offsets: np.ndarray | None = None
        # (arena, offsets, best-fit order that produces them, if any)
        self.seen: list[tuple[int, np.ndarray, np.ndarray | None]] = []

    def offer(self, offsets: np.ndarray, order: np.ndarray | None = None) -> None:
        """Records a placement (and the best-fit order it comes from, if any)."""
        arena = self.problem.arena(offsets)
        self.seen.append((arena, offsets, order))
        if self.offsets is None or arena < self.arena:
            self.arena, self.offsets = arena, offsets

    @property
    def optimal(self) -> bool:
        return self.offsets is not None and self.arena <= self.problem.lower

    def best_order(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The best placement that came from a best-fit order, with that order."""
        ordered = [(a, o, order) for a, o, order in self.seen if order is not None]
        if not ordered:
            return None
        _, offsets, order = min(ordered, key=lambda item: item[0])
        return order, offsets


def _run(algorithm: Callable[[_Problem], np.ndarray]) -> Algorithm:
    """Wraps a core algorithm as a registry entry."""

    def run(sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        inst = Instance(sizes, starts, ends)
        problem = _Problem(inst)
        core = algorithm(problem) if problem.n else np.zeros(0, np.int64)
        return inst.full_offsets(core)

    run.__name__ = algorithm.__name__.lstrip("_")
    run.__qualname__ = run.__name__
    run.__doc__ = algorithm.__doc__
    return run


def _greedy_size(problem: _Problem) -> np.ndarray:
    """Greedy by size with best fit (SmartPool, TFLite)."""
    return problem.place("size")[1]


def _first_fit(problem: _Problem) -> np.ndarray:
    """Greedy by size with first fit."""
    return problem.place("size", best_fit=False)[1]


def _orders(
    problem: _Problem,
    found: _Best,
    steps: tuple[tuple[str, bool], ...],
    deadline: float | None = None,
) -> None:
    """Tries ``(order, best_fit)`` steps (those that fit before the deadline).

    Stops as soon as a placement reaches the lower bound.
    """
    for name, best_fit in steps:
        if found.optimal:
            return
        if deadline is not None and time.perf_counter() + problem.cost(name) > deadline:
            continue
        order, offsets = problem.place(name, best_fit=best_fit)
        found.offer(offsets, order if best_fit else None)


_MULTI_ORDER_STEPS = tuple((name, True) for name in (*ORDERS, *SWEEP_ORDERS))
# What "best" tries after greedy by size, most often useful first.
_BEST_GENERIC_STEPS = (("size", False), ("contention", True), ("lifetime", True), ("breadth", True))


def _multi_order(problem: _Problem) -> np.ndarray:
    """Best fit under several orders; the smallest arena."""
    found = _Best(problem)
    _orders(problem, found, _MULTI_ORDER_STEPS)
    return found.offsets


def _improve(problem: _Problem, found: _Best, deadline: float) -> None:
    """Exact search for a few buffers, else local search from the best order."""
    if found.optimal:
        return
    if problem.n <= EXACT_MAX_BUFFERS:
        offsets, _ = exact_pack(
            problem.sizes,
            problem.starts,
            problem.ends,
            upper=found.arena,
            lower=problem.lower,
            deadline=deadline,
        )
        if offsets is not None:
            found.offer(offsets)
        return
    if problem.n > _SEARCH_MAX_BUFFERS or problem.pairs > _SEARCH_MAX_PAIRS:
        return
    start = found.best_order()
    if start is None:
        return
    order, offsets = improve_order(problem.simple(), *start, lower=problem.lower, deadline=deadline)
    found.offer(offsets, order)


def _local_search(problem: _Problem) -> np.ndarray:
    """``multi_order``, then exact or local search."""
    found = _Best(problem)
    _orders(problem, found, _MULTI_ORDER_STEPS)
    _improve(problem, found, time.perf_counter() + DEFAULT_TIME_BUDGET)
    return found.offsets


def best(
    sizes: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    *,
    time_budget: float = DEFAULT_TIME_BUDGET,
) -> np.ndarray:
    """The smallest valid packing the other algorithms find in ``time_budget``.

    First runs greedy by size - or, when lifetimes overlap so much that it
    is predicted to take more than twice the budget, the start-time sweep
    (``O(n log n)``). Then, while the predicted cost of the next step fits
    in what is left of the budget: first fit, the other orders and the time
    sweeps (the sweeps first when lifetimes overlap a lot), then exact
    search (up to :data:`EXACT_MAX_BUFFERS` buffers) or local search (up to
    5,000 buffers and 300,000 overlapping pairs). The first step always
    runs, so a huge instance may take longer than the budget. Stops as soon
    as a packing reaches the lower bound. The result is checked for
    overlaps, falling back to the next best packing. Predictions use a cost
    model (~150 ns per pair of overlapping lifetimes) scaled by the measured
    speed of the previous generic placement.

    Args:
        sizes: Sizes in alignment units.
        starts: Start times.
        ends: End times (exclusive).
        time_budget: Seconds to spend (a guide, not a hard limit).
    """
    began = time.perf_counter()
    deadline = began + time_budget
    inst = Instance(sizes, starts, ends)
    problem = _Problem(inst)
    if problem.n == 0:
        return inst.full_offsets(np.zeros(0, np.int64))
    found = _Best(problem)
    affordable = problem.generic_cost() <= 2 * time_budget
    first = ("size", True) if affordable else ("start", True)
    _orders(problem, found, (first,))
    sweeps = tuple((name, True) for name in SWEEP_ORDERS)
    dense = problem.pairs > _DENSE_PAIRS_PER_BUFFER * problem.n
    steps = sweeps + _BEST_GENERIC_STEPS if dense else _BEST_GENERIC_STEPS + sweeps
    rest = tuple(step for step in steps if step != first)
    _orders(problem, found, rest, deadline)
    _improve(problem, found, deadline)
    for _, offsets, _ in sorted(found.seen, key=lambda item: item[0]):
        full = inst.full_offsets(offsets)
        if find_conflict(inst.sizes, inst.starts, inst.ends, full) is None:
            return full
    raise RuntimeError("No valid packing found; this is a bug in kswap.allocator.")


greedy_size = _run(_greedy_size)
first_fit = _run(_first_fit)
multi_order = _run(_multi_order)
local_search = _run(_local_search)

#: Algorithm name -> ``(sizes, starts, ends) -> offsets`` (alignment units).
ALGORITHMS: Mapping[str, Algorithm] = MappingProxyType(
    {
        "greedy_size": greedy_size,
        "first_fit": first_fit,
        "multi_order": multi_order,
        "local_search": local_search,
        "best": best,
    }
)
