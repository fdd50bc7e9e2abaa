"""``kswap.AutoTune``: a callback that plans what to swap, recompute or keep, from the step itself.

``model.fit(x, y, callbacks=[kswap.AutoTune(budget=0.5)])`` on a model made by
:func:`kswap.OffloadingModel`:

1. after ``warmup_steps`` steps it profiles ``profile_steps`` steps with
   TensorFlow's profiler (allocator events and op times), and reads them
   into a :class:`~kswap.Trace`, then times ``timed_steps`` steps without
   it (a profiled step does not take the time an unprofiled one takes; the
   workload's times are scaled to these);
2. with a fractional budget, it measures the baseline the fraction is of:
   it keeps every block for one profiled step, where the estimate of that
   step's peak fits the device (:mod:`kswap.tuning.baseline`);
3. it builds the planner's :class:`~kswap.planning.Workload` from the
   profiled steps (:func:`window_workload`), makes a plan within the budget
   and applies it: ``fit`` goes on with a training step traced again;
4. it profiles the next step and compares the measured device peak with the
   budget; over it, it plans again for a lower target, at most
   ``max_rounds`` plans in all (3 and 4: :mod:`kswap.tuning.closed_loop`).
   The plan, the measured peak and every round are kept on the callback
   (:attr:`AutoTune.plan`, :attr:`AutoTune.rounds`) and printed with ``verbose``.

With ``batch_size``, the static estimate checks the budget before the first
step (:mod:`kswap.tuning.static_start`).

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

import numbers
import os
import sys
import time
import warnings

import keras

from kswap.planning import STRATEGIES, Link, Plan, parse_budget
from kswap.planning.budget import Budget
from kswap.planning.devices import Device, as_device
from kswap.planning.link import as_link
from kswap.profiler.profile import held_before_training
from kswap.trace import Trace
from kswap.trace.replicas import busiest_replica
from kswap.tuning.apply import wrappers
from kswap.tuning.baseline import BaselineMixin
from kswap.tuning.closed_loop import ClosedLoopMixin
from kswap.tuning.device import device_capacity
from kswap.tuning.rounds import TIGHTEN_STEP, Round
from kswap.tuning.static_start import StaticStartMixin
from kswap.tuning.window import ProfileWindow, window_workload

# Round, TIGHTEN_STEP (kswap.tuning.rounds), window_workload (.window): re-exported
__all__ = ["AutoTune", "Round", "TIGHTEN_STEP", "window_workload"]


def _count(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}. Received: {name}={value!r}")
    return int(value)


class AutoTune(StaticStartMixin, BaselineMixin, ClosedLoopMixin, keras.callbacks.Callback):
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
            the headroom, the first plan is made for the budget less the
            allocator's extra, then (out of reach too) it is the plan of
            the least predicted peak.
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
        self._check_floor()
        if self.batch_size is not None:
            self._static_start()
        elif getattr(self.model, "_kswap_policy", None) == "auto" and self.verbose:
            print(
                "AutoTune: policy='auto' starts with every block swapped until the first "
                "plan (pass batch_size= to start from the static plan)"
            )
        self._next_start = self.warmup_steps

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
            self._say_baseline()
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
