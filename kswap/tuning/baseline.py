"""AutoTune's baseline (every block kept, measured) and the model's own actions put back.

A fractional budget (``kswap.AutoTune(budget=0.5)``) is of the device peak
the step needs with every block kept. After the first profiled window (of
the model's own actions) :class:`kswap.AutoTune` keeps every block, with the
optimizer's slots on the device, for one more profiled window and measures
that peak (:attr:`AutoTune.baseline_peak_bytes`), where the workload's
estimate of it fits the device; else the estimate is the baseline. Where
those steps' allocator held more beyond their tensors than the workload's
step did, the plans are made for that extra.

The model's own actions (and its optimizer's tier) are recorded at the first
window, and put back where no plan did better (:attr:`AutoTune.restored`) or
``fit`` ended before the baseline was measured.

Example:
    >>> import keras
    >>> from kswap.tuning.baseline import optimizer_tier
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    >>> optimizer_tier(model) is None   # not compiled: no optimizer
    True
    >>> model.compile("adam", "mse")
    >>> optimizer_tier(model)
    'device'
"""

from __future__ import annotations

import dataclasses

from kswap import transfer
from kswap.optimizer_state import host_variables, place_optimizer_state
from kswap.planning import simulate, smallest_budget
from kswap.planning.budget import format_bytes
from kswap.trace import PhaseExtra, Trace, extra_by_phase
from kswap.tuning.apply import apply_plan
from kswap.tuning.device import device_capacity

__all__ = ["BaselineMixin", "optimizer_tier"]


class BaselineMixin:
    """:class:`kswap.AutoTune`'s baseline window, and the model's own actions put back.

    Mixed into :class:`kswap.AutoTune`: uses its ``model``, ``_budget``,
    ``workload``, ``link``, ``allocator_overhead``, ``start_peak_bytes``,
    ``_start`` (the model's own actions and optimizer tier), ``_step``,
    ``held_bytes`` and ``verbose``; sets ``baseline_peak_bytes``,
    ``restored``, ``_baseline_window`` and ``_next_start``.
    """

    def _measure_baseline(self) -> bool:
        """Starts a window with every block kept, where that is safe; whether it did.

        A fractional budget is of the device peak with every block kept. The
        workload of an offloaded step estimates it (on CPU 9-16% high), so
        where the estimate fits the device, the next profiled step measures
        it instead.
        """
        if self._budget is None or self._budget.fraction is None:
            return False
        if all(a.kind == "keep" for a in self._start[0].values()) and self._start[1] != "host":
            self.baseline_peak_bytes = self.start_peak_bytes
            return False
        capacity = device_capacity()
        estimate = simulate(self.workload, "keep", self.link, optimizer_state="device")
        if smallest_budget(self.workload, self.link) > self._budget.resolve(estimate.peak_bytes):
            return False  # no plan meets even the estimate's fraction: say so now
        if capacity is not None and estimate.peak_bytes * (
            1 + self.allocator_overhead
        ) > capacity.resolve(0):
            return False
        apply_plan(self.model, "keep")
        if self._start[1] == "host":
            place_optimizer_state(self.model.optimizer, "device", self.model.trainable_variables)
        self.model.make_train_function(force=True)
        self._baseline_window = True
        self._next_start = self._step  # this step traces it; the next is profiled
        return True

    def _learn_baseline(self, trace: Trace) -> None:
        """The baseline's device peak, and its allocator's extra where that is the larger.

        The steps with every block kept are more profiled steps of the
        model: where their allocator held more beyond their tensors (the
        most of any of them) than the steps the workload came from, the
        plans (which keep most blocks) are made for that extra. On CPU
        with oneDNN, AutoTune's plans held 11-20% more in the allocator's
        blocks than in tensors where the offloaded steps they were planned
        from held 3-12% (docs/benchmarks.md, "The simulator against
        measurement").
        """
        self.baseline_peak_bytes = trace.peak_bytes("device")
        steps = range(len(trace.steps)) if trace.steps else [None]
        extra = max(trace.allocator_extra("device", step) for step in steps)
        if self.workload is None:
            return
        metadata = dict(self.workload.metadata)
        if extra > self.allocator_overhead:
            metadata["allocator_overhead"] = extra
        # the same, phase by phase (the simulator's allocated_peak_bytes)
        by_phase = [extra_by_phase(trace, "device", step) for step in steps]
        if "allocator_extra_by_phase" in metadata:
            by_phase.append(PhaseExtra.from_dict(metadata["allocator_extra_by_phase"]))
        metadata["allocator_extra_by_phase"] = PhaseExtra.most(by_phase).to_dict()
        self.workload = dataclasses.replace(self.workload, metadata=metadata)

    def _say_baseline(self) -> None:
        """Prints the measured baseline (with ``verbose``)."""
        if not self.verbose:
            return
        where = ""
        if not transfer.has_gpu():
            held = (
                f"; {format_bytes(self.held_bytes)} held when the window began (fit's "
                "input data) counted as host memory"
                if self.held_bytes
                else ""
            )
            where = f" (emulated on CPU{held})"
        print(
            "AutoTune: with every block kept the device peak is "
            f"{format_bytes(self.baseline_peak_bytes)} (the baseline){where}"
        )

    def _restore_start(self) -> None:
        """Puts the model's own actions, and its optimizer's tier, back."""
        actions, tier = self._start
        apply_plan(self.model, actions)
        if tier is not None:
            place_optimizer_state(self.model.optimizer, tier, self.model.trainable_variables)
        self.model.make_train_function(force=True)
        self.restored = True


def optimizer_tier(model) -> str | None:
    """Where ``model``'s optimizer keeps its slots: ``"host"`` or ``"device"`` (None: none)."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return None
    return "host" if host_variables(optimizer) else "device"
