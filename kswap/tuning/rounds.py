"""AutoTune's rounds: the first plan's target, and tighter plans after a round over the budget.

Pure planning (no TensorFlow): a :class:`~kswap.planning.Workload`, a budget
in bytes and what the last round measured in, a :class:`~kswap.planning.Plan`
out. :class:`kswap.AutoTune` calls these between profiled steps.

Example:
    >>> from kswap.planning import Block, Workload
    >>> from kswap.planning.link import as_link
    >>> from kswap.tuning.rounds import Round, first_plan, tighter_plan
    >>> blocks = tuple(Block(f"b{i}", saved_bytes=8 << 20, forward_seconds=0.01,
    ...                      backward_seconds=0.02) for i in range(4))
    >>> workload, link = Workload(blocks=blocks, weight_bytes=1 << 20), as_link("pcie4")
    >>> plan, budget = first_plan(workload, 34 << 20, link, headroom=0.05)
    >>> plan.budget_bytes == int(budget * 0.95)
    True
    >>> # measured 1 MiB over: the next plan swaps more
    >>> tighter = tighter_plan(workload, Round(plan, plan.budget_bytes), budget, 1 << 20, link)
    >>> tighter.predicted_peak_bytes < plan.predicted_peak_bytes
    True
"""

from __future__ import annotations

import dataclasses

from kswap.planning import Link, Plan, Workload, make_plan, smallest_budget
from kswap.planning.budget import Budget

__all__ = ["TIGHTEN_STEP", "Round", "first_plan", "tighter_plan"]

#: The least a round over the budget lowers the next plan's target by, as a
#: fraction of the budget: the measured peak moves by a few percent from step
#: to step (the executor's order, the allocator's blocks), so a target lowered
#: by a small excess alone would give the same plan.
TIGHTEN_STEP = 0.02


@dataclasses.dataclass(frozen=True)
class Round:
    """One plan AutoTune applied, and what the step then measured.

    Attributes:
        plan: The plan applied.
        target_bytes: The budget the plan was made for (the user's, or
            lowered after a round over it).
        measured_peak_bytes: The device peak of the profiled step after it
            (None if ``fit`` ended first).
        measured_tensor_bytes: The same step's peak of the bytes its tensors
            asked for. The difference is what the allocator lost at that
            moment to rounding and to free blocks it handed out whole
            (TensorFlow's BFC allocator splits a free block only when it is
            at least twice the request): it varies from step to step, and
            the planner's workload carries only the profiled step's share.
    """

    plan: Plan
    target_bytes: int
    measured_peak_bytes: int | None = None
    measured_tensor_bytes: int | None = None


def first_plan(
    workload: Workload,
    budget: int | float | str | Budget,
    link: Link,
    *,
    strategy: str = "auto",
    headroom: float = 0.0,
    allocator_overhead: float = 0.0,
) -> tuple[Plan, int]:
    """The first plan under ``budget`` of device memory, and the budget in bytes.

    A fractional budget is of the workload's estimated baseline peak. The
    plan is made for the budget less the headroom and less the allocator's extra
    (the workload counts tensors; the allocator's blocks hold
    ``allocator_overhead`` more at the profiled peak); where no plan meets
    that, for the budget less the allocator's extra, then for the whole
    budget. Its ``budget_bytes`` is the target it was made for.

    Returns:
        The plan, and the whole budget in bytes (what measured peaks are held
        against).

    Raises:
        ValueError: No plan meets even the whole budget (the message names
            the smallest feasible budget).
    """
    whole = make_plan(workload, budget, link, strategy=strategy)
    budget_bytes = whole.budget_bytes
    extra = 1 + allocator_overhead
    for tighter in (int(budget_bytes * (1 - headroom) / extra), int(budget_bytes / extra)):
        if tighter >= budget_bytes or whole.predicted_peak_bytes <= tighter:
            break
        try:
            return make_plan(workload, tighter, link, strategy=strategy), budget_bytes
        except ValueError:  # out of reach: a looser target, then
            continue
    return whole, budget_bytes


def tighter_plan(
    workload: Workload,
    last: Round,
    budget_bytes: int,
    over: int,
    link: Link,
    *,
    strategy: str = "auto",
    headroom: float = 0.0,
) -> Plan | None:
    """A plan for a lower target than ``last``'s, and different from it; None if none.

    ``last`` measured ``over`` bytes over ``budget_bytes``. The target goes
    down by the excess, by at least :data:`TIGHTEN_STEP` of the budget (the
    measured peak moves by a few percent from step to step, so a plan for a
    target a few bytes lower would be the same plan), and to where the last
    round's predicted-to-measured ratio puts the budget less the headroom, if
    that is lower: in ``fit`` a plan's device peak ran up to 7% over its
    prediction of tensors and a further 5-10% over in the allocator's blocks
    (ResNet50, 96x96, batch 32), steadily enough within a run. Where the plan
    is still the same, the target goes down by the step again, down to the
    smallest feasible budget.
    """
    lowest = smallest_budget(workload, link)
    if lowest >= last.target_bytes:
        return None
    step = max(int(TIGHTEN_STEP * budget_bytes), 1)
    ratio = last.plan.predicted_peak_bytes / (budget_bytes + over)
    target = min(
        last.target_bytes - max(over, step),
        int(budget_bytes * (1 - headroom) * ratio),
    )
    while True:
        target = max(target, lowest)
        plan = make_plan(workload, target, link, strategy=strategy)
        if (plan.actions, plan.optimizer_state) != (last.plan.actions, last.plan.optimizer_state):
            return plan
        if target == lowest:
            return None
        target -= step
