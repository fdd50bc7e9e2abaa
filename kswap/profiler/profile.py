"""``kswap.profile``: buffer lifetimes of real training steps.

Runs a compiled Keras model's training steps under the TensorFlow profiler and
reads the allocator events of the trace into a :class:`kswap.Trace`. The model
is left exactly as it was: weights, optimizer state, metrics and random
states are restored afterwards.

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

import glob
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence

import tensorflow as tf

from kswap import _env, transfer
from kswap.optimizer_state import host_variables
from kswap.profiler import _data
from kswap.profiler._state import preserved_state
from kswap.profiler.attribution import layer_tree, resolver
from kswap.trace import STEP_MARKER, Trace, build_trace, read_xspace

__all__ = ["profile", "ProfilerBusyError", "OPTIMIZER", "OPTIMIZER_UPDATE", "variable_bytes"]

#: ``Trace.by_layer`` key of the optimizer's state (slots, iteration count).
OPTIMIZER = "(optimizer state)"
#: ``Trace.by_layer`` key of the optimizer's temporaries during its update.
OPTIMIZER_UPDATE = "(optimizer update)"


class ProfilerBusyError(RuntimeError):
    """Another TensorFlow profiler is running; kswap will not stop it."""


def _check_allocator() -> None:
    if not transfer.has_gpu() and not _env.cpu_allocator_is_bfc():
        raise RuntimeError(_env.bfc_help())


def run_steps(model, batches: Sequence[tuple]) -> list[float]:
    """Runs one training step per batch; returns each step's wall time (s)."""
    times = []
    for xb, yb in batches:
        t0 = time.perf_counter()
        model.train_on_batch(xb, yb)  # returns numpy: the step has finished
        times.append(time.perf_counter() - t0)
    return times


def profile_steps(model, batches: Sequence[tuple], logdir: str) -> str:
    """Runs ``batches`` as steps under a profiler kswap starts and stops.

    Returns:
        The path of the ``.xplane.pb`` file written under ``logdir``.
    """
    before = set(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))
    try:
        # Default options: TensorFlow 2.21 ignores the integer ones given from
        # Python (and warns), and its defaults record the allocator events.
        tf.profiler.experimental.start(logdir)
    except tf.errors.AlreadyExistsError:
        raise ProfilerBusyError(
            "A TensorFlow profiler is already running, started outside kswap "
            "(for example by keras.callbacks.TensorBoard(profile_batch=...)). kswap "
            "never stops a profiler it did not start: stop it first "
            "(tf.profiler.experimental.stop()) or profile outside its window."
        ) from None
    try:
        for i, (xb, yb) in enumerate(batches):
            with tf.profiler.experimental.Trace(STEP_MARKER, step_num=i, _r=1):
                model.train_on_batch(xb, yb)
    finally:
        tf.profiler.experimental.stop()
    after = set(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))
    new = sorted(after - before, key=os.path.getmtime)
    if not new:
        raise RuntimeError(f"The TensorFlow profiler wrote no trace under {logdir!r}.")
    return new[-1]


def variable_bytes(v) -> int:
    """Bytes a variable holds, from its shape and dtype (no copy of its value)."""
    return math.prod(v.shape) * tf.as_dtype(v.dtype).size


def read_trace(path: str, model, metadata: dict | None = None) -> Trace:
    """Builds kswap's :class:`Trace` of a profiler file written for ``model``."""
    space = read_xspace(path)
    emulated = not transfer.has_gpu()
    layer_of = resolver(layer_tree(model))
    optimizer_scope = f"{model.optimizer.name}/" if model.optimizer is not None else None

    def attribute(op: str) -> str | None:
        if optimizer_scope and op.startswith(optimizer_scope):
            return OPTIMIZER_UPDATE
        return layer_of(op)

    residents: dict[str, list[int]] = {}
    for layer in model.layers:
        sizes = [variable_bytes(v) for v in layer.weights]
        if sizes:
            residents[layer.name] = sizes
    host_residents: dict[str, list[int]] = {}
    if model.optimizer is not None:
        on_host = {id(v) for v in host_variables(model.optimizer)}
        for v in model.optimizer.variables:
            tier = host_residents if id(v) in on_host else residents
            tier.setdefault(OPTIMIZER, []).append(variable_bytes(v))
    trace = build_trace(
        space.memory_events,
        emulated=emulated,
        host_scope=transfer.HOST_SCOPE,
        steps=space.steps,
        layer_of=attribute,
        residents=residents,
        host_residents=host_residents,
        metadata=metadata,
    )
    if not trace.tier("device") or trace.peak_bytes("device") == 0:
        raise RuntimeError(
            "The profiler recorded no device allocations for these steps. "
            + (_env.bfc_help() if emulated else "Is the model running on the GPU?")
        )
    return trace


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

    One unrecorded warm-up step runs first (it traces the training function),
    then ``steps`` steps run under the TensorFlow profiler. The model's weights,
    optimizer state, metrics and random states are restored afterwards.

    Args:
        model: A compiled ``keras.Model``.
        x: Inputs (arrays, a list or dict of arrays) or a ``tf.data.Dataset``
            yielding ``(x, y)`` batches.
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
        return _profile(model, batches, logdir)


def _profile(model, batches, logdir) -> Trace:
    run_steps(model, batches[:1])
    tmp = None
    if logdir is None:
        tmp = tempfile.mkdtemp(prefix="kswap-trace-")
    try:
        device = "GPU:0" if transfer.has_gpu() else "CPU:0"
        tf.config.experimental.reset_memory_stats(device)
        path = profile_steps(model, batches[1:], os.fspath(logdir or tmp))
        allocator_peak = tf.config.experimental.get_memory_info(device)["peak"]
        metadata = {
            "model": model.name,
            "batch_size": int(keras_batch_size(batches[0])),
            "steps": len(batches) - 1,
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


def keras_batch_size(batch: tuple) -> int:
    """The number of samples in one ``(x, y)`` batch."""
    import keras

    return int(keras.tree.flatten(batch[0])[0].shape[0])
