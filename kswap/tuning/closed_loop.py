"""AutoTune's closed loop: a plan from the profiled window, its step measured, tighter plans.

:class:`kswap.AutoTune` builds the planner's :class:`~kswap.planning.Workload`
from the profiled steps (:func:`kswap.tuning.window.window_workload`: the
last one's, each block's working sets the most any step held; the
allocator's extra the most of these steps' and the baseline's), its times
scaled to the steps timed without the profiler (:func:`median_interval`),
makes a plan within the budget (:func:`kswap.planning.make_plan`, strategy
``"auto"`` by default; the first plan's target:
:func:`kswap.tuning.rounds.first_plan`) and applies it
(:func:`kswap.tuning.apply_plan`): ``fit`` goes on with a training step
traced again.

It profiles the next step (after one step that traces it) and compares the
measured device peak with the budget. Over the budget, it widens the
workload by what the measured step held (:func:`kswap.tuning.rounds.widen`)
and plans again for a lower target (:meth:`AutoTune._tighter`: by the
excess, by at least :data:`~kswap.tuning.rounds.TIGHTEN_STEP` of the
budget, by the round's predicted-to-measured ratio, and until the plan
changes; the most memory-saving plan where no lower target has one), at
most ``max_rounds`` plans in all. The plan, the measured peak and every
round are kept on the callback (:attr:`AutoTune.plan`,
:attr:`AutoTune.rounds`), printed with ``verbose`` and, with a ``logdir``,
written for TensorBoard (:mod:`kswap.tuning.report`).

Example:
    >>> from kswap.tuning.closed_loop import median_interval
    >>> median_interval([0.0, 1.0, None, 9.0, 9.5, 10.5])   # None: an epoch's end
    1.0
"""

from __future__ import annotations

import dataclasses
import statistics
import warnings

from kswap import transfer
from kswap.planning import Plan, make_plan, simulate
from kswap.planning.budget import format_bytes
from kswap.profiler.workload import workload_from_trace
from kswap.trace import Trace
from kswap.tuning import report
from kswap.tuning.apply import apply_plan, current_actions
from kswap.tuning.baseline import optimizer_tier
from kswap.tuning.rounds import Round, first_plan, tighter_plan, widen
from kswap.tuning.window import window_workload

__all__ = ["ClosedLoopMixin", "median_interval", "plan_counts"]


class ClosedLoopMixin:
    """:class:`kswap.AutoTune`'s rounds: learning a window's workload, planning, measuring.

    Mixed into :class:`kswap.AutoTune` (with
    :class:`~kswap.tuning.baseline.BaselineMixin`, whose ``_restore_start``
    it calls): uses its ``model``, ``_budget``, ``strategy``, ``headroom``,
    ``max_rounds``, ``logdir``, ``verbose``, ``baseline_peak_bytes``,
    ``allocator_overhead``, ``_stamps`` and ``_step``; sets ``workload``,
    ``link``, ``rounds``, ``budget_bytes``, ``done``, ``start_peak_bytes``,
    ``unprofiled_step_seconds``, ``_start``, ``_first_trace`` and
    ``_next_start``.
    """

    def _learn(self, trace: Trace) -> None:
        """The workload (and link) from a profiled window of the model's own actions or a plan."""
        first_window = self.start_peak_bytes is None
        if first_window:  # the model as it came: the fallback
            self.start_peak_bytes = trace.peak_bytes("device")
            self._start = (current_actions(self.model), optimizer_tier(self.model))
            self._first_trace = trace
            self.unprofiled_step_seconds = median_interval(self._stamps)
        self.workload = window_workload(trace, self.model, self.unprofiled_step_seconds)
        meta = self.workload.metadata
        if self.verbose and self.unprofiled_step_seconds and first_window:
            print(
                f"AutoTune: a step takes {1e3 * self.unprofiled_step_seconds:.1f} ms "
                f"unprofiled, {1e3 * meta['profiled_step_seconds']:.1f} ms profiled: the "
                f"plan's times are scaled x{meta['time_scale']:.2f}"
            )
        if self.link is None:
            self.link = transfer.measure_link()

    def _plan(self, target: int | None = None, plan: Plan | None = None) -> None:
        try:
            plan = plan or self._make_plan(target)
        except ValueError as e:  # no plan meets the budget: the model stays as it is
            if target is not None:
                raise
            self.done = True
            warnings.warn(f"kswap.AutoTune leaves the model as it is: {e}", stacklevel=2)
            return
        apply_plan(self.model, plan)
        self.model.make_train_function(force=True)
        self.rounds.append(Round(plan, plan.budget_bytes or 0))
        if self.logdir is not None:
            report.write_plan(self.logdir, len(self.rounds), plan, self.workload, self.budget_bytes)
        self._next_start = self._step  # this step traces the new one; the next is profiled
        if self.verbose:
            baseline = (
                f"measured baseline {format_bytes(self.baseline_peak_bytes)}"
                if self.baseline_peak_bytes
                else f"estimated baseline {format_bytes(plan.baseline_peak_bytes)}"
            )
            target = format_bytes(plan.budget_bytes or 0) + " of tensors"
            if len(self.rounds) == 1 and plan.budget_bytes != self.budget_bytes:
                target += (
                    f" (the budget {format_bytes(self.budget_bytes)}, {self.headroom:.0%} "
                    f"headroom, the allocator's blocks +{self.allocator_overhead:.0%} "
                    "at the profiled peak)"
                )
            # the allocator's blocks: each phase's bytes with its extra (kswap.trace.extra)
            blocks = simulate(self.workload, plan, self.link).allocated_peak_bytes
            print(
                f"AutoTune: plan {len(self.rounds)} for {target} "
                f"({baseline}): {plan_counts(plan)}; optimizer "
                f"state on the {plan.optimizer_state}; predicted peak "
                f"{format_bytes(plan.predicted_peak_bytes)} of tensors "
                f"({format_bytes(blocks)} of the allocator's blocks), step x{plan.slowdown:.2f}"
            )
            if self.verbose > 1:
                print(plan.table(self.workload))

    def _make_plan(self, target: int | None) -> Plan:
        """The plan for ``target`` bytes of tensors, or (None) the first plan.

        The first plan resolves the budget (:attr:`budget_bytes`), and is
        made for the budget less the headroom and less the allocator's extra
        (:attr:`allocator_overhead`); where no plan meets that, for the budget
        less the allocator's extra, then the plan of the least predicted peak
        (:func:`kswap.tuning.rounds.first_plan`); where no plan meets the whole
        budget, the planner's ``ValueError`` (naming the smallest feasible
        budget) is raised.
        """
        if target is not None:
            return make_plan(self.workload, target, self.link, strategy=self.strategy)
        budget = self._budget
        if self.baseline_peak_bytes and budget.fraction is not None:
            budget = int(budget.fraction * self.baseline_peak_bytes)
        plan, self.budget_bytes = first_plan(
            self.workload,
            budget,
            self.link,
            strategy=self.strategy,
            headroom=self.headroom,
            allocator_overhead=self.allocator_overhead,
        )
        return plan

    def _measured(self, trace: Trace) -> None:
        peak = trace.peak_bytes("device")
        tensors = trace.peak_bytes("device", requested=True)
        last = self.rounds[-1]
        self.rounds[-1] = dataclasses.replace(
            last, measured_peak_bytes=peak, measured_tensor_bytes=tensors
        )
        budget_bytes = self.budget_bytes
        if self.logdir is not None:
            report.write_measurement(
                self.logdir,
                len(self.rounds),
                last.plan,
                self.workload,
                budget_bytes,
                self._first_trace,
                trace,
            )
        over = peak - budget_bytes
        if self.verbose:
            verdict = "within" if over <= 0 else "over"
            print(
                f"AutoTune: measured device peak {format_bytes(peak)}, {verdict} the budget "
                f"{format_bytes(budget_bytes)}"
                + (" (emulated on CPU)" if not transfer.has_gpu() else "")
                + f"; tensors {format_bytes(tensors)}, the allocator's blocks "
                f"{format_bytes(max(peak - tensors, 0))} more"
            )
        if over <= 0:
            self.done = True
            return
        if len(self.rounds) < self.max_rounds:
            # what this step did that the profiled one did not show
            measured = workload_from_trace(trace, self.model, shared=False)  # widen keeps ours
            self.workload = widen(self.workload, measured)
            tighter = self._tighter(last, over)
            if tighter is not None:
                self._plan(tighter.budget_bytes, tighter)
                return
        self.done = True
        best = min(r.measured_peak_bytes or peak for r in self.rounds)
        if self.start_peak_bytes is not None and self.start_peak_bytes < best:
            self._restore_start()
            kept = f"the model's own actions (measured peak {format_bytes(self.start_peak_bytes)})"
        else:
            kept = "its last plan"
        warnings.warn(
            f"kswap.AutoTune: after {len(self.rounds)} plan(s) the measured device peak "
            f"({format_bytes(peak)}) is still over the budget ({format_bytes(budget_bytes)}); "
            f"it keeps {kept}.",
            stacklevel=2,
        )

    def _tighter(self, last: Round, over: int) -> Plan | None:
        """A plan for a lower target that differs from ``last``'s (see :func:`tighter_plan`)."""
        return tighter_plan(
            self.workload,
            last,
            self.budget_bytes,
            over,
            self.link,
            strategy=self.strategy,
            headroom=self.headroom,
        )


def median_interval(stamps: list[float | None]) -> float | None:
    """The median time between consecutive stamps (None breaks the sequence)."""
    pairs = zip(stamps, stamps[1:], strict=False)
    gaps = [b - a for a, b in pairs if a is not None and b is not None]
    return statistics.median(gaps) if gaps else None


def plan_counts(plan: Plan) -> str:
    """``"12 keep, 40 swap, 3 recompute"``: a plan's actions, counted."""
    return ", ".join(f"{n} {k}" for k, n in plan.counts().items())
