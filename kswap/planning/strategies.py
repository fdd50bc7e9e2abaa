"""The strategies, ``auto``, and :func:`make_plan`, which turns a budget into a plan.

Every strategy is a function ``(workload, budget_bytes, link) -> Plan``; the
plan may miss the budget (``plan.fits`` is False) when the strategy cannot
reach it. :func:`make_plan` parses the budget, runs one strategy and refuses
a budget no plan meets, naming the smallest one that can be met.

- ``all``, ``conv``, ``dyn``: vDNN's policies (:mod:`kswap.planning.vdnn`).
- ``doa``, ``aoa``, ``wdoa``, ``vote``: AutoSwap's greedy swap selection by
  each score, and by their vote (:mod:`kswap.planning.autoswap`).
- ``hybrid``: Capuchin-like swap-or-recompute (:mod:`kswap.planning.hybrid`).
- ``auto``: for each tier of the optimizer's slots, every strategy above on
  one simulator and the fastest plan that fits (or the lowest peak if none
  does), then an iterated local search over per-block actions (keep, swap at
  prefetch 0-2, recompute with inputs kept or swapped): single changes, then
  an evicted block kept again while a kept one is evicted, then random kicks
  of two or three blocks from a fixed seed, each accepted only if the plan
  gets faster within the budget; last, evictions that buy no time are taken
  back. The search spends a fixed amount of simulation
  (:data:`~kswap.planning._search.LOCAL_WORK` block-simulations), never a
  clock, so the same problem always gets the same plan.
- ``exhaustive``: every combination of keep, swap and recompute, for small
  workloads (:mod:`kswap.planning.exhaustive`).

Example:
    >>> from kswap.planning import Block, Link, Workload, make_plan
    >>> w = Workload(tuple(Block(f"b{i}", 100, 1.0, 2.0) for i in range(4)), weight_bytes=100)
    >>> plan = make_plan(w, 0.75, Link(100.0, 100.0))
    >>> plan.baseline_peak_bytes, plan.budget_bytes, plan.predicted_peak_bytes <= 375
    (500, 375, True)
    >>> make_plan(w, 0.1, Link(100.0, 100.0))
    Traceback (most recent call last):
    ValueError: No plan meets budget=0.1 (50 B). The smallest feasible budget is 200 B \
(0.4 of the baseline peak, 500 B), from the most memory-saving plan found.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kswap.planning import autoswap, hybrid, vdnn
from kswap.planning._engine import RECOMPUTE, RECOMPUTE_HOST, SWAP
from kswap.planning._search import LOCAL_WORK, Candidate, Context
from kswap.planning.budget import Budget, format_bytes, parse_budget
from kswap.planning.link import Link, as_link
from kswap.planning.plan import Plan
from kswap.planning.workload import Workload

__all__ = ["STRATEGIES", "auto", "make_plan", "smallest_budget"]


def _auto_candidate(ctx: Context) -> Candidate:
    tiers, found = ctx.tiers, []
    try:
        for tier in tiers:  # the slots' tier is one big change: search from each
            ctx.tiers = (tier,)
            best = ctx.best([f(ctx) for f in _SEEDS])
            if not ctx.fits(*best):
                best = ctx.best([best, _lowest(ctx, LOCAL_WORK // (2 * len(tiers)))])
            found.append(ctx.search(best, ctx.menus(), LOCAL_WORK // len(tiers)))
    finally:
        ctx.tiers = tiers
    return ctx.best(found)


def _lowest(ctx: Context, work: int) -> Candidate:
    """The lowest-peak candidate found: uniform evictions, then a descent on the peak."""
    n = ctx.n

    def uniform(code):
        return tuple(
            code if (ctx.swappable[i] if code[0] == SWAP else ctx.recomputable[i]) else (0, 1)
            for i in range(n)
        )

    seeds = [uniform((SWAP, 0)), uniform((RECOMPUTE_HOST, 0)), uniform((RECOMPUTE, 1))]
    mixed = tuple(  # per block, the eviction that leaves the fewest bytes on the device
        (SWAP, 0) if ctx.swappable[i] else ((RECOMPUTE_HOST, 0) if ctx.recomputable[i] else (0, 1))
        for i in range(n)
    )
    seeds.append(mixed)
    budget, ctx.budget = ctx.budget, -1  # nothing fits: `better` compares peaks
    try:
        start = ctx.best([(codes, host) for codes in seeds for host in ctx.tiers])
        return ctx.improve(start, ctx.menus((0,)), work) if work else start
    finally:
        ctx.budget = budget


_SEEDS: list[Callable[[Context], Candidate]] = [
    vdnn.all_candidate,
    vdnn.conv_candidate,
    vdnn.dyn_candidate,
    *(lambda ctx, s=score: autoswap.candidate(ctx, s) for score in autoswap.SCORES),
    hybrid.candidate,
]

_CANDIDATES: dict[str, Callable[[Context], Candidate]] = {
    "all": vdnn.all_candidate,
    "conv": vdnn.conv_candidate,
    "dyn": vdnn.dyn_candidate,
    **{s: (lambda ctx, s=s: autoswap.candidate(ctx, s)) for s in autoswap.SCORES},
    "hybrid": hybrid.candidate,
    "auto": _auto_candidate,
}


def _strategy(name: str) -> Callable[[Workload, int, Link], Plan]:
    def run(workload: Workload, budget_bytes: int, link: Link) -> Plan:
        ctx = Context(workload, budget_bytes, as_link(link))
        return ctx.plan(_CANDIDATES[name](ctx), name)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"The {name!r} strategy: ``(workload, budget_bytes, link) -> Plan``."
    return run


def _exhaustive(workload: Workload, budget_bytes: int, link: Link) -> Plan:
    from kswap.planning.exhaustive import exhaustive

    return exhaustive(workload, budget_bytes, link)


#: Every strategy by name: ``(workload, budget_bytes, link) -> Plan``.
STRATEGIES: dict[str, Callable[[Workload, int, Link], Plan]] = {
    **{name: _strategy(name) for name in _CANDIDATES},
    "exhaustive": _exhaustive,
}
auto = STRATEGIES["auto"]


def smallest_budget(workload: Workload, link: Link | str) -> int:
    """The lowest device peak of any plan the strategies find: the smallest feasible budget."""
    ctx = Context(workload, 0, as_link(link))
    return ctx.cost(*_lowest(ctx, LOCAL_WORK))[1]


def make_plan(
    workload: Workload,
    budget: Budget | float | int | str,
    link: Link | str,
    *,
    strategy: str = "auto",
) -> Plan:
    """The plan of ``strategy`` for ``workload`` within ``budget``.

    Args:
        workload: The step to plan.
        budget: A fraction in (0, 1] of the baseline's device peak, a byte
            count or a size such as ``"12GiB"`` (see :func:`parse_budget`).
        link: A :class:`Link` or a preset's name (``"pcie3"``...).
        strategy: One of :data:`STRATEGIES`.

    Raises:
        ValueError: for a budget that cannot be parsed or that no plan meets
            (naming the smallest feasible budget), an unknown strategy or link.
    """
    if strategy not in STRATEGIES:
        known = ", ".join(repr(s) for s in STRATEGIES)
        raise ValueError(
            f"Unknown `strategy`. Expected one of {known}. Received: strategy={strategy!r}"
        )
    link = as_link(link)
    parsed = parse_budget(budget)
    ctx = Context(workload, 0, link)
    ctx.budget = budget_bytes = parsed.resolve(ctx.baseline.peak_bytes)
    if strategy == "exhaustive":
        plan = _exhaustive(workload, budget_bytes, link)
    else:
        plan = ctx.plan(_CANDIDATES[strategy](ctx), strategy)
    if plan.fits:
        return plan
    lowest = _lowest(ctx, LOCAL_WORK)
    lowest_bytes, base = ctx.cost(*lowest)[1], ctx.baseline.peak_bytes
    shown = f"{budget!r}" if not isinstance(budget, Budget) else str(budget)
    head = f"No plan meets budget={shown} ({format_bytes(budget_bytes)})."
    if lowest_bytes <= budget_bytes:
        if strategy == "auto":
            return ctx.plan(ctx.improve(lowest, ctx.menus(), LOCAL_WORK), strategy)
        raise ValueError(
            f"Strategy {strategy!r} cannot meet budget={shown} ({format_bytes(budget_bytes)}): "
            f"its plan peaks at {format_bytes(plan.predicted_peak_bytes)}; strategy='auto' "
            "can meet it."
        )
    fraction = math.ceil(lowest_bytes / base * 100) / 100 if base else 1.0
    raise ValueError(
        f"{head} The smallest feasible budget is {format_bytes(lowest_bytes)} "
        f"({fraction:g} of the baseline peak, {format_bytes(base)}), "
        "from the most memory-saving plan found."
    )
