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

from kswap.planning import Link, Plan, Workload, make_plan, simulate, smallest_budget
from kswap.planning.budget import Budget
from kswap.trace import PhaseExtra

__all__ = ["TIGHTEN_STEP", "Round", "first_plan", "tighter_plan", "widen"]

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
    that, for the budget less the allocator's extra. Where no plan meets that
    either, it is the plan of the least predicted peak (for the smallest
    feasible budget): the fastest plan within the whole budget would leave the
    allocator's extra no room, and its blocks would go over. Its
    ``budget_bytes`` is the target it was made for.

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
    else:  # both out of reach: the plan that comes closest to them
        lowest = smallest_budget(workload, link)
        if lowest < whole.predicted_peak_bytes:
            try:
                return make_plan(workload, lowest, link, strategy=strategy), budget_bytes
            except ValueError:  # a strategy that does not reach the least peak
                pass
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

    ``last`` measured ``over`` bytes over ``budget_bytes``. The target goes down
    by the excess, by at least :data:`TIGHTEN_STEP` of the budget (the measured
    peak moves by a few percent from step to step, so a plan for a target a few
    bytes lower would be the same plan), and to where the last round's
    predicted-to-measured ratio (the last plan predicted by ``workload``) puts
    the budget less the headroom, if that is lower: in ``fit`` a plan's device
    peak ran up to 7% over its prediction of tensors and a further 5-10% over in
    the allocator's blocks (ResNet50, 96x96, batch 32), steadily enough within a
    run. Where the plan is still the same, the target goes down by the step
    again, down to the smallest feasible budget. Where that is not under the
    last target, the plan is the most memory-saving one, if it differs.
    """
    lowest = smallest_budget(workload, link)
    if lowest >= last.target_bytes:
        # no lower target has a plan: the most memory-saving one, if it is another
        # (the workload may predict more than the last step's tensors held, and
        # the allocator's blocks may be what went over)
        try:
            plan = make_plan(workload, lowest, link, strategy=strategy)
        except ValueError:
            return None
        return None if _same(plan, last.plan) else plan
    step = max(int(TIGHTEN_STEP * budget_bytes), 1)
    # the last plan as this workload predicts it (it may have learned from that round)
    predicted = simulate(workload, last.plan, link).peak_bytes
    ratio = predicted / (budget_bytes + over)
    target = min(
        last.target_bytes - max(over, step),
        int(budget_bytes * (1 - headroom) * ratio),
    )
    while True:
        target = max(target, lowest)
        plan = make_plan(workload, target, link, strategy=strategy)
        if not _same(plan, last.plan):
            return plan
        if target == lowest:
            return None
        target -= step


def _same(a: Plan, b: Plan) -> bool:
    return (a.actions, a.optimizer_state) == (b.actions, b.optimizer_state)


_BLOCK_BYTES = ("saved_bytes", "input_bytes", "forward_bytes", "backward_bytes", "gradient_bytes")
_WORKING_SETS = ("forward_bytes", "backward_bytes")
_WORKLOAD_BYTES = ("weight_bytes", "gradient_bytes", "optimizer_bytes", "other_bytes")


def widen(workload: Workload, measured: Workload, *, working_sets_only: bool = False) -> Workload:
    """``workload`` with each of its bytes raised to ``measured``'s where that is larger.

    Two profiled steps of the same model differ where TensorFlow's executor
    runs things side by side as it pleases: a weight's update, with
    temporaries of the weight's size, may overlap the backward of the next
    block in one step and not in another (VGG16's 72 MiB ``fc1`` kernel at
    96x96 made ``fc1``'s backward 286 MiB in one step and far less in
    another). A round over the budget thus teaches the workload what its
    first step did not show. Blocks are matched by name; times, and blocks
    ``measured`` lacks, stay as they are.

    A tensor the backward reads may count in one block in one step and in
    its neighbour in the other (its last reader), so ``saved_bytes`` are not
    raised block by block, which would count it twice: their total becomes
    the larger of the two steps' totals, and each block's raise towards
    ``measured`` is scaled down to that. With ``working_sets_only``, only
    what a block holds while it runs (``forward_bytes``, ``backward_bytes``,
    ``keep_backward_bytes``) and the allocator's extra are raised: the
    envelope of two steps of the same plan.
    """
    fields = _WORKING_SETS if working_sets_only else _BLOCK_BYTES
    others = {b.name: b for b in measured.blocks}
    blocks = []
    for b in workload.blocks:
        o = others.get(b.name)
        if o is not None:
            changes = {f: max(getattr(b, f), getattr(o, f)) for f in fields}
            if b.keep_backward_bytes is not None or o.keep_backward_bytes is not None:
                changes["keep_backward_bytes"] = max(
                    b.keep_backward_bytes or 0, o.keep_backward_bytes or 0
                )
            b = dataclasses.replace(b, **changes)
        blocks.append(b)
    if "saved_bytes" in fields:
        blocks = _saved_in_total(workload, measured, blocks)
    changes = {
        f: max(getattr(workload, f), getattr(measured, f))
        for f in (() if working_sets_only else _WORKLOAD_BYTES)
    }
    overhead = max(
        workload.metadata.get("allocator_overhead", 0.0),
        measured.metadata.get("allocator_overhead", 0.0),
    )
    metadata = {**workload.metadata, "allocator_overhead": overhead}
    by_phase = [
        PhaseExtra.from_dict(w.metadata["allocator_extra_by_phase"])
        for w in (workload, measured)
        if "allocator_extra_by_phase" in w.metadata
    ]
    if by_phase:
        metadata["allocator_extra_by_phase"] = PhaseExtra.most(by_phase).to_dict()
    return dataclasses.replace(workload, blocks=tuple(blocks), metadata=metadata, **changes)


def _saved_in_total(workload: Workload, measured: Workload, raised: list) -> list:
    """``raised`` with its saved bytes scaled back to the larger of the two totals.

    Each block keeps ``workload``'s saved bytes plus the same share of its
    raise towards ``measured``'s, so that the total is the larger of
    ``workload``'s and ``measured``'s own totals.
    """
    before = workload.saved_bytes
    raised_total = sum(b.saved_bytes for b in raised)
    if raised_total <= before:
        return raised
    share = (max(before, measured.saved_bytes) - before) / (raised_total - before)
    return [
        dataclasses.replace(
            b, saved_bytes=w.saved_bytes + round((b.saved_bytes - w.saved_bytes) * share)
        )
        for b, w in zip(raised, workload.blocks, strict=True)
    ]
