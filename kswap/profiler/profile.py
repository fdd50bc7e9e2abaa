"""``kswap.profile``: buffer lifetimes of real training steps.

Runs a compiled Keras model's training steps, as ``model.fit`` runs them,
under the TensorFlow profiler and reads the allocator events of the trace into
a :class:`kswap.Trace`. The model is left exactly as it was: weights,
optimizer state, metrics and random states are restored afterwards.

The steps run as fit runs them (:mod:`kswap.profiler.fit_steps`), under a
profiler session kswap starts and stops (:mod:`kswap.profiler.session`), and
the trace is read back from the file it writes
(:mod:`kswap.profiler.trace_reading`); their names are importable from here too.

Example:
    >>> import kswap, keras, numpy as np
    >>> model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(10)])
    >>> model.compile("adam", "mse")
    >>> x, y = np.ones((64, 64), "float32"), np.ones((64, 10), "float32")
    >>> trace = kswap.profile(model, x, y, steps=2)
    >>> trace.peak_bytes("device") > 0
    True
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence

import tensorflow as tf

from kswap import _env, transfer
from kswap.profiler import _data
from kswap.profiler._state import preserved_state
from kswap.profiler.fit_steps import FitSteps, keras_batch_size
from kswap.profiler.session import ProfilerBusyError, profile_steps
from kswap.profiler.trace_reading import (
    HELD_BEFORE_TRAINING,
    OPTIMIZER,
    OPTIMIZER_UPDATE,
    held_before_training,
    read_trace,
    variable_bytes,
)
from kswap.trace import Trace

__all__ = [
    "OPTIMIZER",
    "HELD_BEFORE_TRAINING",
    "OPTIMIZER_UPDATE",
    "ProfilerBusyError",
    "held_before_training",
    "profile",
    "variable_bytes",
]


def _check_allocator() -> None:
    if not transfer.has_gpu() and not _env.cpu_allocator_is_bfc():
        raise RuntimeError(_env.bfc_help())


def profile(
    model,
    x=None,
    y=None,
    *,
    steps: int = 2,
    batch_size: int | None = None,
    logdir: str | os.PathLike | None = None,
) -> Trace:
    """Profiles training steps of a compiled Keras model.

    One unrecorded warm-up step runs first, through ``model.fit`` (it traces
    the training function), then ``steps`` steps run under the TensorFlow
    profiler, each as ``fit`` runs its steps: one call of the model's
    ``train_function`` with an iterator over a dataset whose batch dimension
    is unknown (see :class:`FitSteps`), so the profiled graph is the one
    ``model.fit`` runs. The model's weights, optimizer state, metrics and
    random states are restored afterwards.

    Args:
        model: A compiled ``keras.Model``.
        x: Inputs (arrays, a list or dict of arrays) or a ``tf.data.Dataset``
            yielding ``(x, y)`` batches (one batched with
            ``drop_remainder=True`` keeps its static batch size, as in fit).
        y: Targets, or None with a dataset.
        steps: Number of profiled steps (>= 1).
        batch_size: Samples per step; ``min(32, len(x))`` if None. Only full
            batches are used.
        logdir: If given, the raw trace stays in
            ``LOGDIR/plugins/profile/<run>/<host>.xplane.pb``, where
            ``tensorboard --logdir LOGDIR`` shows it in the Profile plugin
            (``memory_profile`` tool). Otherwise it is deleted.

    Returns:
        A :class:`kswap.Trace` of the profiled steps.

    Raises:
        ValueError: Bad arguments (uncompiled model, empty or mismatched data,
            ``steps < 1``...).
        ProfilerBusyError: Another profiler is running.
        RuntimeError: TensorFlow's CPU allocator records no events (the
            message says how to enable it).
    """
    _data.check_model(model, "profile")
    steps = _data.check_steps(steps)
    batches = _data.make_batches(x, y, batch_size, steps + 1)
    _check_allocator()
    with preserved_state(model, batches[0]):
        fit = FitSteps(model, batches, static_batch=_data.static_batch(x))
        fit.warm_up(0)
        return _profile(fit, range(1, len(batches)), logdir)


def _profile(steps: FitSteps, indices: Sequence[int], logdir) -> Trace:
    """Profiles batches ``indices`` of ``steps`` (a warmed-up model's)."""
    model = steps.model
    tmp = None
    if logdir is None:
        tmp = tempfile.mkdtemp(prefix="kswap-trace-")
    try:
        device = "GPU:0" if transfer.has_gpu() else "CPU:0"
        tf.config.experimental.reset_memory_stats(device)
        path = profile_steps(steps, indices, os.fspath(logdir or tmp))
        allocator_peak = tf.config.experimental.get_memory_info(device)["peak"]
        metadata = {
            "model": model.name,
            "batch_size": int(keras_batch_size(steps.batches[indices[0]])),
            "steps": len(indices),
            "device": device,
            "allocator_peak_bytes": int(allocator_peak),
            "tensorflow": tf.__version__,
        }
        if logdir is not None:
            metadata["xplane"] = path
        return read_trace(path, model, metadata)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
