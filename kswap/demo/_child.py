"""One run of the demo, in a fresh process: train with Keras's progress bars, then measure.

``python -m kswap.demo._child JOB.json``: the job names the run
(``baseline``, ``offload`` or ``autotune``), the model, the data's shape, the
steps, the budget and where to write. The run

1. builds the model (seed 0; ``kswap.OffloadingModel`` for ``offload`` and
   ``autotune``);
2. trains it with one ``fit`` (Keras's progress bar) on synthetic batches,
   made by ``tf.data`` as they are needed so that no data set sits in
   memory. For ``autotune``, ``kswap.AutoTune(budget)`` (its logdir: the
   run's) decides first, in at most :data:`TUNE_STEPS` steps. Then one
   untimed step (it may trace the step), ``steps`` steps timed from one
   batch's end to the next, and :data:`PROFILED` profiled steps, whose
   trace stays in the run's logdir for TensorBoard's Profile plugin;
3. writes, as JSON, the device and host peaks of the profiled steps, the
   step times, the device bytes over the profiled step with the highest
   peak and, for ``autotune``, what it decided; with ``packing`` in the job
   it also packs that step and draws the packing.

The process writes ``{"result": {...}}`` or ``{"error": "Type: message"}``
(exit code 1) to the job's ``out``.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time

from kswap.profiler._child import run_job

__all__ = ["PROFILED", "main"]

#: Steps profiled after training, for the peaks and the chart.
PROFILED = 3
#: Steps AutoTune may take to decide, at most (its default windows take 15 for 3 plans).
TUNE_STEPS = 24
#: Points of a step's device timeline kept for the chart (the most bytes of each bin).
POINTS = 1500


def _dataset(shape, classes: int, batch: int, steps: int, seed: int):
    """Random samples made on demand, batched with an unknown batch dimension, as fit's."""
    import tensorflow as tf

    def sample(i):
        key = tf.stack([tf.constant(seed, tf.int64), i])
        x = tf.random.stateless_uniform(shape, seed=key)
        y = tf.random.stateless_uniform((), seed=key + 1, maxval=classes, dtype=tf.int32)
        return x, y

    return tf.data.Dataset.range(steps * batch).map(sample).batch(batch)


def _watch(steps: int, logdir: str, ready):
    """Times ``steps`` steps once ``ready()``, then profiles :data:`PROFILED` steps and stops fit.

    The step at which ``ready()`` is first true is not timed (it may trace
    the step); each timed step lasts from one batch's end to the next (its
    logs read back). The profiled steps run inside kswap's step marker,
    each from its batch's begin to its end, as ``kswap.AutoTune`` profiles.
    """
    import keras
    import numpy as np
    import tensorflow as tf

    from kswap.profiler.profile import ProfilerBusyError, held_before_training
    from kswap.tuning.window import ProfileWindow

    class Watch(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.first: int | None = None
            self.ends: list[float] = []
            self.path: str | None = None
            #: on a CPU, host memory as AutoTune counts it: what the allocator held
            #: beyond the model's variables when the profiled window began
            self.held = 0
            self._window = ProfileWindow(logdir)

        def on_train_batch_begin(self, batch, logs=None):
            if self.first is None:
                if not ready(batch):
                    return
                self.first = batch
                if batch:
                    print(f"\nstep {batch + 1}: timing the next {steps} steps", flush=True)
            k = batch - self.first - steps - 1  # the profiled step's number
            if k == 0:
                if not self._window.start():
                    raise ProfilerBusyError("Another TensorFlow profiler is running.")
                self.held = held_before_training(self.model)
            if k >= 0:
                self._window.mark()  # step k

        def on_train_batch_end(self, batch, logs=None):
            if self.first is None:
                return
            for value in tf.nest.flatten(logs):
                np.asarray(value)  # the step has finished
            self._window.close_marker()
            k = batch - self.first - steps - 1
            if k < 0:
                self.ends.append(time.perf_counter())
            elif k == PROFILED - 1:
                self._stop()
                self.model.stop_training = True

        def on_train_end(self, logs=None):
            self._stop()

        def _stop(self) -> None:
            if self._window.running:
                self.path = self._window.xplane()

        @property
        def seconds(self) -> list[float]:
            return [float(s) for s in np.diff(self.ends)]

    return Watch()


def _decided(tune) -> dict:
    """What AutoTune decided, as JSON."""
    from kswap.tuning.report import plan_markdown

    plan = tune.plan
    out = {
        "done": tune.done,
        "restored": tune.restored,
        "budget_bytes": tune.budget_bytes,
        "autotune_baseline_bytes": tune.baseline_peak_bytes,
        "start_peak_bytes": tune.start_peak_bytes,
        "autotune_measured_bytes": (
            tune.start_peak_bytes if tune.restored else tune.measured_peak_bytes
        ),
        "rounds": [
            {
                "target_bytes": r.target_bytes,
                "predicted_bytes": r.plan.predicted_peak_bytes,
                "measured_bytes": r.measured_peak_bytes,
                "tensor_bytes": r.measured_tensor_bytes,
            }
            for r in tune.rounds
        ],
        "plan": None,
    }
    if plan is not None:
        blocks = tune.workload.blocks
        out["plan"] = {
            "strategy": plan.strategy,
            "counts": plan.counts(),
            "optimizer_state": plan.optimizer_state,
            "predicted_peak_bytes": plan.predicted_peak_bytes,
            "slowdown": plan.slowdown,
            "blocks": [
                [b.name, b.kind, b.saved_bytes, str(a)]
                for b, a in zip(blocks, plan.actions, strict=True)
            ],
            "markdown": plan_markdown(plan, tune.workload),
        }
    return out


def _series(trace, step: int) -> dict:
    """Device bytes over one step: time as a fraction of the step, bytes the most of each bin."""
    lo, hi = trace.steps[step]
    line = trace.timeline("device", step)
    span = max(hi - lo, 1)
    times = [(t - lo) / span for t in line.times_ns]
    live = list(line.live_bytes)
    if len(times) > POINTS:  # keep each bin's highest value, at its bin's start
        bins: dict[int, tuple[float, int]] = {}
        for t, b in zip(times, live, strict=True):
            k = min(int(t * POINTS), POINTS - 1)
            if k not in bins or b > bins[k][1]:
                bins[k] = (k / POINTS, b)
        times, live = zip(*(bins[k] for k in sorted(bins)), strict=True)
        times, live = list(times), list(live)
    return {"fraction": [round(t, 6) for t in times] + [1.0], "bytes": live + live[-1:]}


def _pack(trace, step: int, path: str, model_name: str) -> dict:
    """Packs one step (SmartPool); draws the best packing; the figures that explain it."""
    from kswap.allocator import plot_packing
    from kswap.allocator.report import compare

    one = dataclasses.replace(trace, steps=(trace.steps[step],))
    t0 = time.perf_counter()
    comparison = compare(one, ("greedy_size", "first_fit", "best"))
    seconds = time.perf_counter() - t0
    best = comparison.best
    label = " (emulated on CPU:0)" if trace.emulated else ""
    plot_packing(best.plan, path, title=f"{model_name}, one baseline step, packed{label}")
    return {
        "png": path,
        "buffers": comparison.buffers,
        "lower_bound_bytes": comparison.lower_bound_bytes,
        "arena_bytes": best.arena_bytes,
        "algorithm": best.algorithm,
        "bfc_peak_bytes": comparison.bfc_peak_bytes,
        "requested_peak_bytes": one.peak_bytes("device", 0, requested=True),
        "seconds": seconds,
    }


def _run(job: dict) -> dict:
    import kswap  # noqa: F401  (selects the CPU BFC allocator before TF starts)

    sys.path[:0] = [p for p in job["sys_path"] if p not in sys.path]
    import keras
    import numpy as np

    from kswap import transfer
    from kswap.modelspec import build_model
    from kswap.planning import parse_budget
    from kswap.profiler.profile import _check_allocator, read_trace

    name = job["run"]
    logdir = os.path.join(job["logdir"], name)
    keras.utils.set_random_seed(0)
    shape = tuple(job["input"])
    model = build_model(job["model"], shape, classes=job["classes"], optimizer=job["optimizer"])
    if name != "baseline":
        model = kswap.OffloadingModel(model)  # which builds the optimizer
    else:  # as OffloadingModel does: every run then traces its step once
        model.optimizer.build(model.trainable_variables)
    _check_allocator()
    result: dict = {"run": name, "model": model.name}
    steps, callbacks, ready, tune_steps = job["steps"], [], (lambda batch: True), 0
    if name == "autotune":
        budget = parse_budget(job["budget"])
        tune = kswap.AutoTune(budget, logdir=logdir, verbose=1)
        callbacks.append(tune)
        tune_steps = TUNE_STEPS
        ready = lambda batch: tune.done or batch >= TUNE_STEPS  # noqa: E731
        print(f"AutoTune(budget={job['budget']}) decides first (at most {TUNE_STEPS} steps)")
    print(f"training: 1 untimed step, {steps} timed, {PROFILED} profiled", flush=True)
    os.makedirs(logdir, exist_ok=True)
    watch = _watch(steps, logdir, ready)
    total = tune_steps + 1 + steps + PROFILED
    data = _dataset(shape, job["classes"], job["batch"], total, seed=2)
    model.fit(data, epochs=1, verbose=1, shuffle=False, callbacks=[*callbacks, watch])
    if watch.path is None:
        raise RuntimeError(f"fit ended before the {PROFILED} profiled steps")
    if name == "autotune":
        result.update(_decided(tune))
    device = {"device": transfer.device_name().lstrip("/")}
    held = watch.held
    trace = read_trace(watch.path, model, device, held_bytes=held)
    seconds = watch.seconds
    peaks = [trace.peak_bytes("device", s) for s in range(len(trace.steps))]
    top = int(np.argmax(peaks))
    result.update(
        emulated=bool(trace.emulated),
        held_bytes=held,
        device=trace.metadata.get("device"),
        device_peak_bytes=trace.peak_bytes("device"),
        step_peaks_bytes=peaks,
        host_peak_bytes=trace.peak_bytes("host"),
        step_seconds=statistics.median(seconds),
        step_seconds_all=seconds,
        series=_series(trace, top),
        xplane=watch.path,
    )
    if job.get("packing"):
        result["packing"] = _pack(trace, top, job["packing"], model.name)
    return result


def main(argv: list[str]) -> int:
    return run_job(argv, lambda job: {"result": _run(job)})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
