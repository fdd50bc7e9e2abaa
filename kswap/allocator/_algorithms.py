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

Work is counted, not timed, with a cost model in *work units* (see
:mod:`kswap.allocator._problem`), about a
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

from kswap.allocator._exact import EXACT_MAX_BUFFERS
from kswap.allocator._improve import Best, Budget, improve, try_orders
from kswap.allocator._instance import Instance
from kswap.allocator._orders import ORDERS, SWEEP_ORDERS
from kswap.allocator._problem import Problem, placement_cost
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


def _run(algorithm: Callable[[Problem], np.ndarray]) -> Algorithm:
    """Wraps a core algorithm as a registry entry."""

    def run(sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        inst = Instance(sizes, starts, ends)
        problem = Problem(inst)
        core = algorithm(problem) if problem.n else np.zeros(0, np.int64)
        return inst.full_offsets(core)

    run.__name__ = algorithm.__name__.lstrip("_")
    run.__qualname__ = run.__name__
    run.__doc__ = algorithm.__doc__
    return run


def _greedy_size(problem: Problem) -> np.ndarray:
    """Greedy by size with best fit (SmartPool, TFLite)."""
    return problem.place("size")[1]


def _first_fit(problem: Problem) -> np.ndarray:
    """Greedy by size with first fit."""
    return problem.place("size", best_fit=False)[1]


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


def _multi_order(problem: Problem) -> np.ndarray:
    """Best fit under several orders; the smallest arena."""
    found = Best(problem)
    try_orders(problem, found, _MULTI_ORDER_STEPS)
    return found.offsets


def _local_search(problem: Problem) -> np.ndarray:
    """``multi_order``, then exact search, or squeaky wheel and local search."""
    found = Best(problem)
    try_orders(problem, found, _MULTI_ORDER_STEPS)
    improve(problem, found, Budget(LOCAL_SEARCH_WORK))
    return found.offsets


def _best_steps(problem: Problem, work_budget: int) -> tuple[tuple[str, bool], ...]:
    """The ``(order, best_fit)`` steps of ``"best"``, most useful first.

    Greedy by size comes first - or, when its cost exceeds twice the budget,
    the start-time sweep - and always runs.
    """
    affordable = problem.cost("size") <= 2 * work_budget
    first = ("size", True) if affordable else ("start", True)
    sweeps = tuple((name, True) for name in SWEEP_ORDERS)
    steps = sweeps + _BEST_GENERIC_STEPS if problem.dense else _BEST_GENERIC_STEPS + sweeps
    return (first, *(step for step in steps if step != first))


def best(
    sizes: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    *,
    work_budget: int = DEFAULT_WORK_BUDGET,
) -> np.ndarray:
    """The smallest valid packing the other algorithms find within a work budget.

    Which steps run depends on the instance alone (its numbers of buffers
    and of overlapping lifetimes, through the cost model of
    :mod:`kswap.allocator._problem`), never on the clock, so the result is
    the same on every machine.

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
    problem = Problem(inst)
    if problem.n == 0:
        return inst.full_offsets(np.zeros(0, np.int64))
    found = Best(problem)
    budget = Budget(work_budget)
    first, *rest = _best_steps(problem, work_budget)
    budget.spend(min(problem.cost(first[0]), budget.left))
    try_orders(problem, found, (first,))
    try_orders(problem, found, tuple(rest), budget)
    improve(problem, found, budget)
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
