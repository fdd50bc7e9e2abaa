"""The packing algorithms and their registry.

Every algorithm takes ``(sizes, starts, ends)`` - sizes in units of the
alignment, integer times, half-open lifetimes - and returns one offset per
buffer, in the same units. All of them stack the buffers that live over the
whole horizon at the bottom first (see :mod:`kswap.allocator._instance`),
and all of them are deterministic: the same input gives the same offsets on
any machine, however fast or loaded.

* ``"greedy_size"``: SmartPool / TFLite greedy by size - largest first (ties:
  longer-lived, then earlier), each in the smallest gap left by the placed
  buffers alive with it, or on top.
* ``"first_fit"``: the same order, each in the lowest gap that fits.
* ``"multi_order"``: best fit under several orders (see
  :mod:`kswap.allocator._orders`: size, breadth, lifetime, size class,
  contention, contention then lifetime, and the start and end time sweeps);
  the smallest arena wins.
* ``"local_search"``: the ``"multi_order"`` result, then exact branch and
  bound for up to :data:`EXACT_MAX_BUFFERS` buffers, or else squeaky-wheel
  re-ordering and a local search over orders (see
  :mod:`kswap.allocator._search`), as much of them as
  :data:`LOCAL_SEARCH_WORK` pays for.
* ``"best"``: all of the above, best and first fit, as much of them as a
  work budget decided from the instance pays for (see :func:`best`).

A placement reaching the lower bound (the most bytes alive at one time) is
optimal and ends any search.

Work is counted, not timed, with a cost model in *work units*, about a
nanosecond each on one core of a 2020s x86 machine (the real time scales
with the machine's speed; the work done does not). A placement in a given
order costs about 7.5 us per buffer plus 30 ns per pair of overlapping
lifetimes, ``P``, with the dense engine (:mod:`~kswap.allocator._place_dense`,
for real training steps, whose buffers overlap hundreds of others), or
about 3 us per buffer plus 50 ns per pair with the batched engine
(:mod:`~kswap.allocator._place_batched`, for sparse instances); the time
sweeps cost about 2 us per buffer whatever ``P``.

Example:
    >>> import numpy as np
    >>> sizes, starts, ends = np.array([4, 2, 2]), np.array([0, 1, 3]), np.array([2, 4, 5])
    >>> ALGORITHMS["greedy_size"](sizes, starts, ends).tolist()
    [0, 4, 0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np

from kswap.allocator._exact import EXACT_MAX_BUFFERS, exact_pack
from kswap.allocator._instance import Instance
from kswap.allocator._intervals import count_overlapping_pairs
from kswap.allocator._orders import ORDERS, SWEEP_ORDERS, contention, placement_order
from kswap.allocator._place_batched import BatchedPlacer
from kswap.allocator._place_dense import DensePlacer, scan_length
from kswap.allocator._place_simple import SimplePlacer
from kswap.allocator._place_sweep import sweep_place
from kswap.allocator._search import improve_order, squeaky_wheel
from kswap.allocator._validate import find_conflict

__all__ = [
    "ALGORITHMS",
    "DEFAULT_WORK_BUDGET",
    "EXACT_MAX_BUFFERS",
    "LOCAL_SEARCH_WORK",
    "Algorithm",
    "best",
    "first_fit",
    "greedy_size",
    "local_search",
    "multi_order",
    "placement_cost",
]

#: ``(sizes, starts, ends) -> offsets``, sizes and offsets in alignment units.
Algorithm = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

#: Work units (~ns on the reference machine) ``"best"`` spends at most,
#: its first placement included (which runs even if it costs more).
DEFAULT_WORK_BUDGET = 1_500_000_000

#: Work units the improvement phase of ``"local_search"`` may spend.
LOCAL_SEARCH_WORK = 1_000_000_000

# Cost model, in work units (fitted on random, synthetic and real instances).
_ORDER_PER_BUFFER = 600  # sorting the keys, contention
_SWEEP_PER_BUFFER = 1_700
_DENSE_PER_BUFFER = 7_500
_DENSE_PER_SCANNED = 1
_DENSE_PER_PAIR = 30
_BATCHED_FIXED = 10_000_000  # only for sparse instances: see _Problem.use_dense
_BATCHED_PER_BUFFER = 3_000
_BATCHED_PER_PAIR = 50
_BATCHED_CONTENTION_FACTOR = 2  # those orders make smaller batches
_SIMPLE_PER_BUFFER = 1_500
_SIMPLE_PER_PAIR = 330
_SIMPLE_BUILD_PER_PAIR = 300
_EXACT_PER_NODE_PAIR = 60  # a branch-and-bound node costs this times n ** 2
_EXACT_MAX_NODES = 200_000

_SQUEAKY_ROUNDS = 6  # squeaky-wheel re-orderings at most, before local search
_MIN_SEARCH_PLACEMENTS = 20  # local search is skipped if it cannot pay for these
_DENSE_PAIRS_PER_BUFFER = 64  # denser: the dense engine, and the time sweeps first


class _Problem:
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


class _Best:
    """The placements tried so far, and the best of them."""

    def __init__(self, problem: _Problem) -> None:
        self.problem = problem
        self.arena = -1
        self.offsets: np.ndarray | None = None
        # (arena, offsets, order that produces them or None, best fit?)
        self.seen: list[tuple[int, np.ndarray, np.ndarray | None, bool]] = []

    def offer(
        self, offsets: np.ndarray, order: np.ndarray | None = None, best_fit: bool = True
    ) -> None:
        """Records a placement (and the order it comes from, if any)."""
        arena = self.problem.arena(offsets)
        self.seen.append((arena, offsets, order, best_fit))
        if self.offsets is None or arena < self.arena:
            self.arena, self.offsets = arena, offsets

    @property
    def optimal(self) -> bool:
        return self.offsets is not None and self.arena <= self.problem.lower

    def best_order(self, *, best_fit_only: bool) -> tuple[int, np.ndarray, np.ndarray, bool] | None:
        """The best placement that came from an order: arena, offsets, order, best fit."""
        ordered = [
            item for item in self.seen if item[2] is not None and (item[3] or not best_fit_only)
        ]
        if not ordered:
            return None
        return min(ordered, key=lambda item: item[0])  # the first of the smallest


class _Budget:
    """Work units left to spend."""

    def __init__(self, work: int) -> None:
        self.left = work

    def spend(self, work: int) -> bool:
        """Spends ``work`` if that much is left; False (spending nothing) if not."""
        if work > self.left:
            return False
        self.left -= work
        return True


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
    budget: _Budget | None = None,
) -> None:
    """Tries ``(order, best_fit)`` steps (those the budget pays for).

    Stops as soon as a placement reaches the lower bound.
    """
    for name, best_fit in steps:
        if found.optimal:
            return
        if budget is not None and not budget.spend(problem.cost(name)):
            continue
        order, offsets = problem.place(name, best_fit=best_fit)
        found.offer(offsets, order, best_fit)


_MULTI_ORDER_STEPS = tuple((name, True) for name in (*ORDERS, *SWEEP_ORDERS))
# What "best" tries after greedy by size, most often useful first.
_BEST_GENERIC_STEPS = (
    ("size", False),
    ("contention_lifetime", True),
    ("size_class", True),
    ("contention", True),
    ("contention_lifetime", False),
    ("size_class", False),
    ("contention", False),
    ("breadth", True),
    ("lifetime", True),
    ("breadth", False),
    ("lifetime", False),
)


def _multi_order(problem: _Problem) -> np.ndarray:
    """Best fit under several orders; the smallest arena."""
    found = _Best(problem)
    _orders(problem, found, _MULTI_ORDER_STEPS)
    return found.offsets


def _improve(problem: _Problem, found: _Best, budget: _Budget) -> None:
    """Exact search for a few buffers; else squeaky wheel, then local search.

    Spends what the budget pays for, deterministically: branch-and-bound
    nodes, squeaky-wheel rounds (up to ``_SQUEAKY_ROUNDS``) and local-search
    placements are counted, not timed.
    """
    if found.optimal:
        return
    n = problem.n
    if n <= EXACT_MAX_BUFFERS:
        node_cost = _EXACT_PER_NODE_PAIR * max(n, 1) ** 2
        nodes = min(_EXACT_MAX_NODES, budget.left // node_cost)
        if nodes < 1:
            return
        budget.spend(nodes * node_cost)
        offsets, _ = exact_pack(
            problem.sizes,
            problem.starts,
            problem.ends,
            upper=found.arena,
            lower=problem.lower,
            node_limit=nodes,
        )
        if offsets is not None:
            found.offer(offsets)
        return
    start = found.best_order(best_fit_only=False)
    if start is not None:
        arena, offsets, order, best_fit = start
        rounds = min(_SQUEAKY_ROUNDS, budget.left // max(problem.generic_cost(), 1))
        budget.spend(rounds * problem.generic_cost())
        placer = problem.placer()
        steps = squeaky_wheel(
            lambda o: placer.place(o, best_fit=best_fit),
            problem.sizes,
            order,
            offsets,
            lower=problem.lower,
            rounds=rounds,
        )
        for new_order, new_offsets in steps:
            found.offer(new_offsets, new_order, best_fit)
            if found.optimal:
                return
    start = found.best_order(best_fit_only=True)
    if start is None or found.optimal:
        return
    make_placer, build, full = problem.resumable()
    per_buffer = max(full // n, 1)
    work = (budget.left - build) // per_buffer
    if work < _MIN_SEARCH_PLACEMENTS * n:
        return
    budget.spend(build + work * per_buffer)
    _, offsets, order, _ = start
    order, offsets = improve_order(
        make_placer(), order, offsets, lower=problem.lower, work=int(work)
    )
    found.offer(offsets, order)


def _local_search(problem: _Problem) -> np.ndarray:
    """``multi_order``, then exact search, or squeaky wheel and local search."""
    found = _Best(problem)
    _orders(problem, found, _MULTI_ORDER_STEPS)
    _improve(problem, found, _Budget(LOCAL_SEARCH_WORK))
    return found.offsets


def _best_steps(problem: _Problem, work_budget: int) -> tuple[tuple[str, bool], ...]:
    """The ``(order, best_fit)`` steps of ``"best"``, most useful first.

    Greedy by size comes first - or, when its cost exceeds twice the budget,
    the start-time sweep - and always runs.
    """
    affordable = problem.cost("size") <= 2 * work_budget
    first = ("size", True) if affordable else ("start", True)
    sweeps = tuple((name, True) for name in SWEEP_ORDERS)
    steps = sweeps + _BEST_GENERIC_STEPS if problem.dense else _BEST_GENERIC_STEPS + sweeps
    return (first, *(step for step in steps if step != first))


def placement_cost(sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """Work units of placing the buffers in one order (greedy by size's cost)."""
    return _Problem(Instance(sizes, starts, ends)).cost("size")


def best(
    sizes: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    *,
    work_budget: int = DEFAULT_WORK_BUDGET,
) -> np.ndarray:
    """The smallest valid packing the other algorithms find within a work budget.

    Which steps run depends on the instance alone (its numbers of buffers
    and of overlapping lifetimes, through the cost model of this module),
    never on the clock, so the result is the same on every machine.

    First runs greedy by size - or, when lifetimes overlap so much that it
    would cost more than twice the budget, the start-time sweep
    (``O(n log n)``); that first step always runs, so a huge instance may
    cost more than the budget. Then, in turn, each step whose predicted
    cost fits in what is left of the budget: first fit, the orders of
    ``"multi_order"`` with best and then first fit (contention then
    lifetime, size class and contention first) and the time sweeps (first
    when lifetimes overlap a lot). Then exact search (up to
    :data:`EXACT_MAX_BUFFERS` buffers, as many nodes as the rest of the
    budget pays for), or up to 6 squeaky-wheel re-orderings of the best
    order and a local search, with as many placements as the rest of the
    budget pays for. Stops as soon as a packing reaches the lower bound.
    The result is checked for overlaps, falling back to the next best
    packing.

    With the default budget (about 1.5 s of work on the reference machine)
    real training steps of a few thousand buffers get every order (and,
    if they are not optimal yet, some squeaky-wheel rounds), and 100,000
    random buffers two or three placements.

    Args:
        sizes: Sizes in alignment units.
        starts: Start times.
        ends: End times (exclusive).
        work_budget: Work units (about nanoseconds on the reference machine)
            to spend, the first step included.
    """
    inst = Instance(sizes, starts, ends)
    problem = _Problem(inst)
    if problem.n == 0:
        return inst.full_offsets(np.zeros(0, np.int64))
    found = _Best(problem)
    budget = _Budget(work_budget)
    first, *rest = _best_steps(problem, work_budget)
    budget.spend(min(problem.cost(first[0]), budget.left))
    _orders(problem, found, (first,))
    _orders(problem, found, tuple(rest), budget)
    _improve(problem, found, budget)
    for _, offsets, _, _ in sorted(found.seen, key=lambda item: item[0]):
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
