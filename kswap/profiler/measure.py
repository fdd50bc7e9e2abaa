"""``kswap.measure``: device memory and step time of training, in one number each.

Example:
    >>> import kswap, keras, numpy as np
    >>> model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(10)])
    >>> model.compile("adam", "mse")
    >>> x, y = np.ones((64, 64), "float32"), np.ones((64, 10), "float32")
    >>> m = kswap.measure(model, x, y, steps=2)
    >>> m.device_peak_bytes >= m.step_peak_bytes > 0
    True
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import keras
import numpy as np

from kswap.optimizer_state import host_variables
from kswap.profiler import _data
from kswap.profiler._isolate import modules_to_import, one_line
from kswap.profiler._state import preserved_state
from kswap.profiler.fit_steps import FitSteps
from kswap.profiler.profile import _check_allocator, _profile
from kswap.trace import Trace

__all__ = ["Measurement", "measure"]


@dataclasses.dataclass(frozen=True)
class Measurement:
    """Memory and time of training steps.

    Attributes:
        device_peak_bytes: Most bytes in use on the device at any moment of the
            profiled steps: weights, gradients, optimizer slots and activations
            together. This decides whether training fits.
        step_peak_bytes: That peak minus what was in use when the step began:
            the part a step adds, which offloading changes.
        host_peak_bytes: Most bytes in use in the host tier.
        step_seconds: Median wall time of the timed (unprofiled) steps.
        emulated: True when device memory is emulated on the CPU.
        batch_size: Samples per step.
        steps: Number of profiled and of timed steps.
        trace: The profiled steps' trace (None when measured in a subprocess).
    """

    device_peak_bytes: int
    step_peak_bytes: int
    host_peak_bytes: int
    step_seconds: float
    emulated: bool
    batch_size: int
    steps: int
    trace: Trace | None = dataclasses.field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        """The figures as a JSON-friendly dict (without the trace)."""
        d = dataclasses.asdict(self)
        d.pop("trace")
        return d


def measure(
    model,
    x=None,
    y=None,
    *,
    steps: int = 3,
    batch_size: int | None = None,
    isolate: bool = False,
    verbose: int = 1,
) -> Measurement:
    """Measures device memory and step time of a compiled model's training.

    A warm-up step (through ``model.fit``, which traces the training
    function), ``steps`` timed steps (no profiler), then ``steps`` profiled
    steps, each run as ``fit`` runs its steps: see
    :class:`kswap.profiler.fit_steps.FitSteps`. The model's state is restored
    afterwards.

    The allocator counts every live tensor of the process, another model's
    weights included, so compare configurations with ``isolate=True``: the
    model (saved as ``.keras``) and the data are measured in a fresh Python
    process, which imports the modules that define the model's custom
    classes (they must be registered with
    ``keras.saving.register_keras_serializable``) with this process's
    ``sys.path``.

    Args:
        model: A compiled ``keras.Model``.
        x: Inputs (arrays, list or dict of arrays) or a ``tf.data.Dataset``.
        y: Targets.
        steps: Timed steps and profiled steps (>= 1 each).
        batch_size: Samples per step; ``min(32, len(x))`` if None.
        isolate: Measure in a fresh process.
        verbose: 1 (default) prints a line on stderr as each stage starts
            (saving, the fresh process, warm-up, timed and profiled steps) and
            the time it all took; 0 prints nothing.

    Returns:
        A :class:`Measurement`.

    Raises:
        ValueError: Bad arguments; with ``isolate=True``, a custom class or
            function defined where a fresh process cannot import it (in
            ``__main__``, a notebook) or not registered for loading.
        RuntimeError: With ``isolate=True``, the model cannot be saved, or
            the fresh process failed (its last lines are in the message).
    """
    _data.check_model(model, "measure")
    steps = _data.check_steps(steps)
    if not isinstance(isolate, bool):
        raise ValueError(f"`isolate` must be True or False. Received: isolate={isolate!r}")
    if verbose not in (0, 1) or isinstance(verbose, float):
        raise ValueError(f"`verbose` must be 0 or 1. Received: verbose={verbose!r}")
    batches = _data.make_batches(x, y, batch_size, 2 * steps + 1)
    static_batch = _data.static_batch(x)
    progress = _Progress(bool(verbose))
    if isolate:
        result = _measure_in_subprocess(model, batches, steps, static_batch, progress)
    else:
        _check_allocator()
        with preserved_state(model, batches[0]):
            result = measure_batches(
                model, batches, steps, static_batch=static_batch, progress=progress
            )
    progress.done()
    return result


class _Progress:
    """``kswap.measure``'s progress lines on stderr: one per stage, then the total time."""

    PREFIX = "[kswap] measure: "

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"{self.PREFIX}{message}", file=sys.stderr, flush=True)

    def done(self) -> None:
        self(f"done in {time.perf_counter() - self.start:.1f} s")


def measure_batches(
    model,
    batches,
    steps: int,
    logdir=None,
    *,
    static_batch: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Measurement:
    """Measures with ready batches: warm-up, ``steps`` timed, ``steps`` profiled.

    ``batches`` holds ``2 * steps + 1`` batches: the warm-up's, the timed
    steps', the profiled steps'. ``progress`` gets a line as each stage starts.
    """
    say = progress or (lambda message: None)
    fit = FitSteps(model, batches, static_batch=static_batch)
    say("warm-up step (traces the training step)")
    fit.warm_up(0)
    say(f"{steps} timed step{'s' * (steps > 1)}")
    seconds = [fit.run(i) for i in range(1, steps + 1)]
    say(f"{steps} profiled step{'s' * (steps > 1)}")
    # tensors only garbage holds (functions traced before, a model no longer used)
    # would count in the device peak, by as much as the collector has left behind
    gc.collect()
    trace = _profile(fit, range(steps + 1, 2 * steps + 1), logdir)
    return Measurement(
        device_peak_bytes=trace.peak_bytes("device"),
        step_peak_bytes=trace.step_peak_bytes("device"),
        host_peak_bytes=trace.peak_bytes("host"),
        step_seconds=statistics.median(seconds),
        emulated=trace.emulated,
        batch_size=int(trace.metadata["batch_size"]),
        steps=steps,
        trace=trace,
    )


def _to_numpy(batches):
    return [
        keras.tree.map_structure(lambda t: None if t is None else np.asarray(t), b) for b in batches
    ]


def _save(model, path: str) -> None:
    try:
        model.save(path)
    except Exception as error:
        raise RuntimeError(
            "`model` cannot be saved as .keras, which isolate=True needs to rebuild it in "
            f"a fresh process ({one_line(error)}). Make its custom objects serializable "
            "(get_config, keras.saving.register_keras_serializable), or use isolate=False."
        ) from error


def _child_failure(proc: subprocess.CompletedProcess, out_path: str) -> str:
    """One line on why the fresh process failed: its own, or its last words."""
    try:
        with open(out_path) as f:
            error = json.load(f).get("error")
        if error:
            return error
    except (OSError, ValueError):
        pass
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    fatal = [line for line in lines if "Check failed" in line or "Error" in line]
    last = fatal[-1:] or lines[-3:]
    code = proc.returncode
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    return f"{how}: {' | '.join(last)}" if last else how


def _run_child(cmd: list[str], progress: _Progress) -> subprocess.CompletedProcess:
    """Runs the fresh process; passes its progress lines on as they come."""
    lines = []
    with subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as child:
        for line in child.stderr:
            if line.startswith(_Progress.PREFIX):
                progress(line[len(_Progress.PREFIX) :].rstrip("\n"))
            else:
                lines.append(line)
    return subprocess.CompletedProcess(cmd, child.returncode, "", "".join(lines))


def _measure_in_subprocess(
    model, batches, steps: int, static_batch: bool, progress: _Progress
) -> Measurement:
    with tempfile.TemporaryDirectory(prefix="kswap-measure-") as tmp:
        progress("saving the model and the data for a fresh process")
        model_path = os.path.join(tmp, "model.keras")
        data_path = os.path.join(tmp, "batches.pkl")
        out_path = os.path.join(tmp, "out.json")
        job_path = os.path.join(tmp, "job.json")
        _save(model, model_path)
        modules = modules_to_import(model, model_path)
        with open(data_path, "wb") as f:
            pickle.dump(_to_numpy(batches), f)
        job = {
            "model": model_path,
            "batches": data_path,
            "steps": steps,
            "out": out_path,
            # where the optimizer's slots live is not saved with the model
            "optimizer_state": (
                "host"
                if model.optimizer is not None and host_variables(model.optimizer)
                else "device"
            ),
            "modules": modules,
            "sys_path": list(sys.path),
            "static_batch": static_batch,
            "verbose": progress.enabled,
        }
        with open(job_path, "w") as f:
            json.dump(job, f)
        cmd = [sys.executable, "-m", "kswap.profiler._child", job_path]
        progress("starting a fresh process (imports TensorFlow, loads the model)")
        proc = _run_child(cmd, progress)
        if proc.returncode != 0:
            why = _child_failure(proc, out_path)
            raise RuntimeError(f"Measuring in a fresh process failed: {why}")
        with open(out_path) as f:
            return Measurement(**json.load(f)["measurement"])
