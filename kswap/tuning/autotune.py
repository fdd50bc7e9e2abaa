"""``kswap.AutoTune``: a callback that plans what to swap, recompute or keep, from the step itself.

``model.fit(x, y, callbacks=[kswap.AutoTune(budget=0.5)])`` on a model made by
:func:`kswap.OffloadingModel`:

1. after ``warmup_steps`` steps it profiles ``profile_steps`` steps with
   TensorFlow's profiler (allocator events and op times), and reads them
   into a :class:`~kswap.Trace`, then times ``timed_steps`` steps without
   it (a profiled step does not take the time an unprofiled one takes; the
   workload's times are scaled to these);
2. with a fractional budget, it measures the baseline the fraction is of:
   it keeps every block for one profiled step (where the estimate of that
   step's peak fits the device; else the estimate is the baseline);
3. it builds the planner's :class:`~kswap.planning.Workload` from the
   profiled steps (:func:`window_workload`: the last one's, each block's
   working sets the most any step held; the allocator's extra the most of
   these steps' and the baseline's), makes
   a plan within the budget (:func:`kswap.planning.make_plan`, strategy
   ``"auto"`` by default) and applies it (:func:`kswap.tuning.apply_plan`):
   ``fit`` goes on with a training step traced again;
4. it profiles the next step (after one step that traces it) and compares
   the measured device peak with the budget. Over the budget, it widens the
   workload by what the measured step held (:func:`kswap.tuning.rounds.widen`)
   and plans again for a lower target (:meth:`AutoTune._tighter`: by the
   excess, by at least :data:`TIGHTEN_STEP` of the budget, by the round's
   predicted-to-measured ratio, and until the plan changes; the most
   memory-saving plan where no lower target has one), at most
   ``max_rounds`` plans in all.
   The plan, the measured peak and every round are kept on the callback
   (:attr:`AutoTune.plan`, :attr:`AutoTune.rounds`) and printed with ``verbose``.

Only batch-begin hooks (and train begin/end) are used, so Keras keeps
dispatching steps asynchronously. AutoTune starts and stops only a profiler it
started: if another one is running (``keras.callbacks.TensorBoard(profile_batch=...)``)
it waits for a step where none is.

Example:
    >>> import keras, numpy as np, kswap
    >>> model = keras.Sequential([keras.Input((256,))] + [
    ...     keras.layers.Dense(256, activation="tanh", name=f"d{i}") for i in range(6)])
    >>> model.compile("adam", "mse")
    >>> tune = kswap.AutoTune(budget=0.9, profile_steps=1, link="pcie4", verbose=0)
    >>> x, y = np.ones((4096, 256), "float32"), np.zeros((4096, 256), "float32")
    >>> _ = kswap.OffloadingModel(model).fit(x, y, batch_size=1024, callbacks=[tune], verbose=0)
    >>> tune.start_peak_bytes > 0   # profiled inside fit (then planned, see tune.rounds)
    True
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import statistics
import sys
import time
import warnings

import keras

from kswap import transfer
from kswap.optimizer_state import host_variables, place_optimizer_state
from kswap.planning import (
    STRATEGIES,
    Link,
    Plan,
    Workload,
    make_plan,
    parse_budget,
    simulate,
    smallest_budget,
)
from kswap.planning.budget import Budget, format_bytes
from kswap.planning.devices import Device, as_device
from kswap.planning.link import as_link
from kswap.profiler.profile import held_before_training
from kswap.profiler.workload import workload_from_trace
from kswap.trace import Trace
from kswap.trace.replicas import busiest_replica
from kswap.tuning import report
from kswap.tuning.apply import apply_plan, current_actions, wrappers
from kswap.tuning.device import device_capacity, device_preset
from kswap.tuning.rounds import TIGHTEN_STEP, Round, first_plan, tighter_plan, widen
from kswap.tuning.window import ProfileWindow

__all__ = ["AutoTune", "Round", "TIGHTEN_STEP", "window_workload"]


def _count(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}. Received: {name}={value!r}")
    return int(value)


class AutoTune(keras.callbacks.Callback):
    """Tunes an offloaded model's blocks under a device memory budget, from profiled steps.

    Args:
        budget: A fraction in (0, 1] of the device peak the step needs with
            every block kept (0.5; measured, see :attr:`baseline_peak_bytes`,
            where the estimate of it fits the device), a byte count, or a size such as
            ``"12GiB"``. None: the device's capacity (a GPU's memory, or the
            limit set by :func:`kswap.allocator.configure`); where none is
            known AutoTune leaves the model as it is and says so. Under
            ``tf.distribute.MirroredStrategy`` the budget is per replica: of
            each replica's device, held against the busiest replica's peak
            (:mod:`kswap.trace.replicas`).
        strategy: The planner's strategy (:data:`kswap.planning.STRATEGIES`).
        link: The device-host link the planner assumes: a
            :class:`~kswap.planning.Link` or a preset name (``"pcie4"``).
            None measures it (:func:`kswap.transfer.measure_link`).
        warmup_steps: Steps before profiling (the first traces the step).
        timed_steps: Steps timed without the profiler right after the first
            profiled window, before the first plan. A profiled step does
            not take the time an unprofiled one takes (on a CPU with oneDNN
            the unprofiled steps took 0.72x to 1.19x the profiled one,
            docs/benchmarks.md), so the workload's times are scaled to
            these steps' median
            (:attr:`unprofiled_step_seconds`) before planning. 0: plan from
            the profiled times.
        profile_steps: Steps profiled for the plan.
        max_rounds: Plans applied at most (the first and its tightenings).
        headroom: The share of the budget the first plan leaves free. The
            executor runs ready ops in any order, which moves a step's
            device peak by several percent from run to run, so a plan
            predicted right at the budget misses it about half the time.
            The measured peak is always held against the whole budget; 0
            plans to the budget itself. Where no plan meets the budget less
            the headroom, the first plan is made for the whole budget.
            Plans are made for the bytes the tensors ask for; the budget is
            of the allocator's bytes, so the first plan's target is also
            divided by one plus the allocator's extra at the profiled
            step's peak (``workload.metadata["allocator_overhead"]``; in
            ``fit`` on CPU the measured peaks held 3-17% more in blocks than
            in tensors, docs/benchmarks.md).
        logdir: Where the profiler writes its traces (kept, for
            TensorBoard's Profile plugin) and, under ``logdir/kswap``, each
            round's scalars, plan and device memory image
            (:mod:`kswap.tuning.report`); None: a temporary directory, no report.
        verbose: 0 silent, 1 one line per round, 2 also the plan's table.
        batch_size: The samples per step ``fit`` runs (the callback does not
            see them). With it, before the first step, the static estimate
            (:func:`kswap.plan`) refuses a budget no plan meets, naming the
            smallest feasible one, and a model made with
            ``OffloadingModel(model, policy="auto")`` starts from the static
            plan. Without it, a budget is checked against the weights and
            their gradients only, and ``policy="auto"`` starts with every
            block swapped.
        device: The device preset the static estimate times ops with
            (:class:`~kswap.planning.Device` or ``"k40"``, ``"v100"``,
            ``"a100"``, ``"h100"``, ``"h200"``, ``"cpu"``). None: ``"cpu"``
            without a GPU; the preset the GPU's name contains; else ``"a100"``.
    """

    def __init__(
        self,
        budget: float | int | str | Budget | None = None,
        *,
        strategy: str = "auto",
        link: Link | str | None = None,
        warmup_steps: int = 1,
        timed_steps: int = 3,
        profile_steps: int = 2,
        max_rounds: int = 3,
        headroom: float = 0.05,
        logdir: str | None = None,
        verbose: int = 1,
        batch_size: int | None = None,
        device: Device | str | None = None,
    ):
        super().__init__()
        self.budget = None if budget is None else parse_budget(budget)
        if strategy not in STRATEGIES:
            raise ValueError(
                f"`strategy` must be one of {STRATEGIES}. Received: strategy={strategy!r}"
            )
        self.strategy = strategy
        self.link = None if link is None else as_link(link)
        self.warmup_steps = _count("warmup_steps", warmup_steps, 0)
        self.timed_steps = _count("timed_steps", timed_steps, 0)
        self.profile_steps = _count("profile_steps", profile_steps, 1)
        self.max_rounds = _count("max_rounds", max_rounds, 1)
        if (
            isinstance(headroom, bool)
            or not isinstance(headroom, numbers.Real)
            or not 0 <= headroom < 1
        ):
            raise ValueError(
                f"`headroom` must be a fraction in [0, 1). Received: headroom={headroom!r}"
            )
        self.headroom = float(headroom)
        if logdir is not None and not isinstance(logdir, (str, os.PathLike)):
            raise ValueError(f"`logdir` must be a path or None. Received: logdir={logdir!r}")
        self.logdir = None if logdir is None else os.fspath(logdir)
        if verbose not in (0, 1, 2):
            raise ValueError(f"`verbose` must be 0, 1 or 2. Received: verbose={verbose!r}")
        self.verbose = verbose
        self.batch_size = None if batch_size is None else _count("batch_size", batch_size, 1)
        self.device = None if device is None else as_device(device)
        #: The static plan ``fit`` started from (``policy="auto"`` with ``batch_size``).
        self.static_plan: Plan | None = None
        self.rounds: list[Round] = []
        self.workload = None
        self.done = False
        #: The device peak of the first profiled step, with the model's own actions.
        self.start_peak_bytes: int | None = None
        #: Whether the model's own actions were put back (no plan did better).
        self.restored = False
        #: The device peak measured with every block kept (None if not measured).
        self.baseline_peak_bytes: int | None = None
        #: The budget in bytes, once the first plan resolved it (a fraction of the
        #: measured baseline, or of its estimate); measured peaks are held against it.
        self.budget_bytes: int | None = None
        #: Without a GPU: what the emulating CPU allocator held beyond the model's
        #: variables when the last profiled window began (``fit``'s input arrays
        #: and the batches its ``tf.data`` pipeline had prefetched, which a GPU
        #: keeps in host memory). That window's steps count it as host memory.
        self.held_bytes = 0
        #: The median wall time of the timed steps (unprofiled; ``timed_steps``),
        #: which the workload's times were scaled to; None if none was timed.
        self.unprofiled_step_seconds: float | None = None
        #: Replicas in the profiled steps (MirroredStrategy): the budget and every
        #: figure are per replica, of the busiest one.
        self.replicas = 1
        self._reset()

    # ------------------------------------------------------------------ results

    @property
    def plan(self) -> Plan | None:
        """The plan applied last (None before the first)."""
        return self.rounds[-1].plan if self.rounds else None

    @property
    def allocator_overhead(self) -> float:
        """How much higher the profiled steps' device peak was than their tensors' (a fraction).

        The planner's workload counts the bytes tensors ask for; the
        allocator's blocks hold more (0 before a step was profiled, and for a
        workload estimated from the model). The larger of the workload's
        step's and the baseline's (every block kept) where both were
        profiled, and raised by each round measured over the budget.
        """
        if self.workload is None:
            return 0.0
        return float(self.workload.metadata.get("allocator_overhead", 0.0))

    @property
    def measured_peak_bytes(self) -> int | None:
        """The device peak measured after the last plan (None if not measured)."""
        return self.rounds[-1].measured_peak_bytes if self.rounds else None

    # ------------------------------------------------------------------ Keras hooks

    def on_train_begin(self, logs=None):
        if not wrappers(self.model):
            raise ValueError(
                "kswap.AutoTune tunes an offloaded model: wrap the model first, "
                "`model = kswap.OffloadingModel(model)`, and fit that. Received: "
                f"model={self.model.name!r} with no kswap wrappers"
            )
        self._reset()
        if self.done:
            return
        self._budget = self.budget or device_capacity()
        if self._budget is None:
            self.done = True
            warnings.warn(
                "kswap.AutoTune has no budget and knows no device capacity (no GPU, "
                "no limit set by kswap.allocator.configure): it leaves the model's "
                "blocks as they are. Pass budget=0.5 or budget='12GiB'.",
                stacklevel=2,
            )
            return
        floor = _floor_bytes(self.model)
        if self._budget.bytes is not None and self._budget.bytes < floor:
            raise ValueError(
                f"No plan meets `budget`={format_bytes(self._budget.bytes)}: the model's "
                f"weights and their gradients alone take {format_bytes(floor)} of device "
                "memory, whatever is swapped or recomputed. The smallest feasible budget is "
                f"above that. Received: budget={self.budget}"
            )
        if self.batch_size is not None:
            self._static_start()
        elif getattr(self.model, "_kswap_policy", None) == "auto" and self.verbose:
            print(
                "AutoTune: policy='auto' starts with every block swapped until the first "
                "plan (pass batch_size= to start from the static plan)"
            )
        self._next_start = self.warmup_steps

    def _static_start(self) -> None:
        """Before the first step: the static plan, or the refusal of a budget none meets."""
        from kswap.estimate.plan import static_plan

        device = self.device or device_preset()
        try:
            result = static_plan(
                self.model,
                self.batch_size,
                self._budget,
                link=self.link,
                device=device,
                strategy=self.strategy,
            )
        except ValueError as error:
            message = " ".join(str(error).split())
            raise ValueError(
                f"kswap.AutoTune: by the static estimate at batch_size={self.batch_size}, "
                f"{message[0].lower()}{message[1:]} Received: budget={self.budget}"
            ) from None
        if getattr(self.model, "_kswap_policy", None) != "auto":
            return
        try:
            apply_plan(self.model, result.plan)
        except ValueError as error:  # a block the estimate names that is not wrapped
            warnings.warn(
                f"kswap.AutoTune cannot start from the static plan ({error}); every block "
                "stays swapped until the first plan.",
                stacklevel=2,
            )
            return
        self.model.make_train_function(force=True)
        self.static_plan = result.plan
        if self.verbose:
            print(
                f"AutoTune: starts from the static plan for batch {self.batch_size} on "
                f"{device.name}: {_counts(result.plan)}; estimated peak "
                f"{format_bytes(result.plan.predicted_peak_bytes)} of "
                f"{format_bytes(result.plan.budget_bytes or 0)}"
            )

    def on_epoch_begin(self, epoch, logs=None):
        if self._untimed is not None:  # the last epoch's end and validation are no step
            self._stamps.append(None)

    def on_train_batch_begin(self, batch, logs=None):
        step, self._step = self._step, self._step + 1
        if self.done:
            return
        window = self._window
        window.close_marker()
        if self._untimed is not None:  # the timed steps, begin to begin (as markers time)
            self._stamps.append(time.perf_counter())
            if sum(t is not None for t in self._stamps) <= self.timed_steps:
                return
            self._first_window(self._untimed)
            if self.done:
                return
        if window.running and window.steps == self.profile_steps:
            self._finish_window()
            if self.done:
                return
        if not window.running and step >= self._next_start:
            if not window.start():
                self._next_start += 1  # someone else's profiler: try the next step
            else:  # read between steps: the prefetch buffer's fill varies over fit
                self.held_bytes = held_before_training(self.model)
        if window.running:
            window.mark()

    def on_train_end(self, logs=None):
        window = self._window
        window.close_marker()
        if window.running and window.steps == self.profile_steps and not self.done:
            self._finish_window()
        if self._untimed is not None and not self.done:  # fit ended within the timed steps
            self._first_window(self._untimed)
        window.close()  # stops a profiler left inside its window when fit ended
        if self._baseline_window:  # fit ended before the baseline was measured
            self._baseline_window = False
            self._restore_start()
            self.restored = False

    # ------------------------------------------------------------------ profiling

    def _reset(self) -> None:
        self._step = 0
        self._next_start = 0
        self._stamps: list[float | None] = []
        self._untimed: Trace | None = None  # the first window's, while its steps are timed
        self._window = ProfileWindow(self.logdir)
        self._baseline_window = False
        self._budget: Budget | None = None

    def _finish_window(self) -> None:
        # under MirroredStrategy the budget is per replica (each has its own
        # device): the busiest replica's buffers and ops are the step's
        trace = busiest_replica(self._window.read(self.model, self.held_bytes))
        if trace.metadata.get("replicas", 1) != self.replicas:
            self.replicas = trace.metadata.get("replicas", 1)
            if self.verbose and self.replicas > 1:
                print(
                    f"AutoTune: {self.replicas} replicas; the budget is of each one's device, "
                    f"and the figures are the busiest replica's (replica "
                    f"{trace.metadata['replica']})"
                )
        if self._baseline_window:  # every block kept: the baseline, measured
            self._baseline_window = False
            self._learn_baseline(trace)
            if self.verbose:
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
            self._plan()
        elif self.rounds and self.rounds[-1].measured_peak_bytes is None:
            self._measured(trace)
        elif self.start_peak_bytes is None and self.timed_steps:
            # the next steps run unprofiled and timed; then the plan (_first_window)
            self._untimed, self._stamps = trace, [time.perf_counter()]
            self._next_start = sys.maxsize
        else:
            self._first_window(trace)

    def _first_window(self, trace: Trace) -> None:
        """The workload of the model's own actions; the baseline's window, or the first plan."""
        self._untimed = None
        first = self.start_peak_bytes is None
        self._learn(trace)
        if not (first and self._measure_baseline()):
            self._plan()

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

    # ------------------------------------------------------------------ planning

    def _learn(self, trace: Trace) -> None:
        """The workload (and link) from a profiled window of the model's own actions or a plan."""
        first_window = self.start_peak_bytes is None
        if first_window:  # the model as it came: the fallback
            self.start_peak_bytes = trace.peak_bytes("device")
            self._start = (current_actions(self.model), _optimizer_tier(self.model))
            self._first_trace = trace
            self.unprofiled_step_seconds = _median_interval(self._stamps)
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
        if self.workload is not None and extra > self.allocator_overhead:
            metadata = {**self.workload.metadata, "allocator_overhead": extra}
            self.workload = dataclasses.replace(self.workload, metadata=metadata)

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
            print(
                f"AutoTune: plan {len(self.rounds)} for {target} "
                f"({baseline}): {_counts(plan)}; optimizer "
                f"state on the {plan.optimizer_state}; predicted peak "
                f"{format_bytes(plan.predicted_peak_bytes)} of tensors, step x{plan.slowdown:.2f}"
            )
            if self.verbose > 1:
                print(plan.table(self.workload))

    def _make_plan(self, target: int | None) -> Plan:
        """The plan for ``target`` bytes of tensors, or (None) the first plan.

        The first plan resolves the budget (:attr:`budget_bytes`), and is
        made for the budget less the headroom and less the allocator's extra
        (:attr:`allocator_overhead`); where no plan meets that, for the budget
        less the allocator's extra, then for the whole budget; where none
        meets the whole budget either, the planner's ``ValueError`` (naming
        the smallest feasible budget) is raised.
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

    def _restore_start(self) -> None:
        actions, tier = self._start
        apply_plan(self.model, actions)
        if tier is not None:
            place_optimizer_state(self.model.optimizer, tier, self.model.trainable_variables)
        self.model.make_train_function(force=True)
        self.restored = True


def window_workload(trace: Trace, model, step_seconds: float | None = None) -> Workload:
    """The workload of a profiled window: its last step's, with the most any step held.

    Its times are the last step's (scaled to ``step_seconds``, see
    :func:`~kswap.profiler.workload.workload_from_trace`). Each block's
    working sets, and the allocator's extra, are the most any of the
    window's steps held (:func:`~kswap.tuning.rounds.widen` with
    ``working_sets_only``): fit's graph runs each weight's update as soon as
    its gradient exists, and which block's backward its temporaries land in
    changes from step to step.
    """
    last = len(trace.steps) - 1
    workload = workload_from_trace(trace, model, step_seconds=step_seconds)
    for step in range(last):
        # widen takes no Block.shared from it: skip tracing the model's graph again
        other = workload_from_trace(trace, model, step=step, shared=False)
        workload = widen(workload, other, working_sets_only=True)
    return workload


def _median_interval(stamps: list[float | None]) -> float | None:
    """The median time between consecutive stamps (None breaks the sequence)."""
    pairs = zip(stamps, stamps[1:], strict=False)
    gaps = [b - a for a, b in pairs if a is not None and b is not None]
    return statistics.median(gaps) if gaps else None


def _optimizer_tier(model) -> str | None:
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return None
    return "host" if host_variables(optimizer) else "device"


def _floor_bytes(model) -> int:
    """Device bytes no plan removes: every weight, and the trainable ones' gradients."""
    from kswap.estimate.state import state_bytes

    state = state_bytes(model)
    return state.weight_bytes + state.gradient_bytes


def _counts(plan: Plan) -> str:
    """``"12 keep, 40 swap, 3 recompute"``: a plan's actions, counted."""
    return ", ".join(f"{n} {k}" for k, n in plan.counts().items())
