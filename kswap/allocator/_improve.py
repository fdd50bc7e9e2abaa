"""Searching for a smaller arena within a work budget.

The steps the algorithms of :mod:`kswap.allocator._algorithms` share:
:class:`Best` records every placement tried and the best of them,
:class:`Budget` counts the work units left, :func:`try_orders` places the
buffers in a series of orders (those the budget pays for), and
:func:`improve` spends what is left on exact branch and bound (for up to
:data:`~kswap.allocator._exact.EXACT_MAX_BUFFERS` buffers) or on
squeaky-wheel re-ordering and a local search over orders
(:mod:`kswap.allocator._search`). Work is counted, not timed, so the search
is deterministic.

Example:
    >>> import numpy as np
    >>> from kswap.allocator._instance import Instance
    >>> from kswap.allocator._problem import Problem
    >>> sizes, starts, ends = np.array([4, 2, 2]), np.array([0, 1, 3]), np.array([2, 4, 5])
    >>> problem = Problem(Instance(sizes, starts, ends))
    >>> found = Best(problem)
    >>> try_orders(problem, found, (("size", False), ("start", True)))
    >>> found.offsets.tolist(), found.arena, found.optimal, len(found.seen)
    ([0, 4, 0], 6, True, 1)
"""

from __future__ import annotations

import numpy as np

from kswap.allocator._exact import EXACT_MAX_BUFFERS, exact_pack
from kswap.allocator._problem import Problem
from kswap.allocator._search import improve_order, squeaky_wheel

__all__ = ["Best", "Budget", "improve", "try_orders"]

# Cost model of the search, in work units (see kswap.allocator._problem).
_EXACT_PER_NODE_PAIR = 60  # a branch-and-bound node costs this times n ** 2
_EXACT_MAX_NODES = 200_000

_SQUEAKY_ROUNDS = 6  # squeaky-wheel re-orderings at most, before local search
_MIN_SEARCH_PLACEMENTS = 20  # local search is skipped if it cannot pay for these


class Best:
    """The placements tried so far, and the best of them."""

    def __init__(self, problem: Problem) -> None:
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


class Budget:
    """Work units left to spend."""

    def __init__(self, work: int) -> None:
        self.left = work

    def spend(self, work: int) -> bool:
        """Spends ``work`` if that much is left; False (spending nothing) if not."""
        if work > self.left:
            return False
        self.left -= work
        return True


def try_orders(
    problem: Problem,
    found: Best,
    steps: tuple[tuple[str, bool], ...],
    budget: Budget | None = None,
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


def improve(problem: Problem, found: Best, budget: Budget) -> None:
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
