"""``kswap.profile``: buffer lifetimes of real training steps.

Runs a compiled Keras model's training steps, as ``model.fit`` runs them,
under the TensorFlow profiler and reads the allocator events of the trace into
a :class:`kswap.Trace`. The model is left exactly as it was: weights,
optimizer state, metrics and random states are restored afterwards.

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

import dataclasses
import glob
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from kswap import _env, transfer
from kswap.optimizer_state import host_variables
from kswap.profiler import _data
from kswap.profiler._state import model_variables, preserved_state
from kswap.profiler.attribution import (
    copies_one_tensor,
    layer_from_inputs,
    layer_tree,
    phase_resolver,
    resolver,
    step_op_name,
)
from kswap.trace import STEP_MARKER, Trace, build_trace, read_xspace
from kswap.trace.model import granule_bytes

__all__ = [
    "FitSteps",
    "OPTIMIZER",
    "HELD_BEFORE_TRAINING",
    "OPTIMIZER_UPDATE",
    "ProfilerBusyError",
    "held_before_training",
    "profile",
    "run_steps",
    "variable_bytes",
]

#: ``Trace.by_layer`` key of the optimizer's state (slots, iteration count).
OPTIMIZER = "(optimizer state)"
#: ``Trace.by_layer`` key of the optimizer's temporaries during its update.
OPTIMIZER_UPDATE = "(optimizer update)"
#: ``Trace.by_layer`` key (host tier, emulation only) of what the process held
#: in the allocator beyond the model's variables when the profiled steps began
#: (fit's input data).
HELD_BEFORE_TRAINING = "(held before training)"


class ProfilerBusyError(RuntimeError):
    """Another TensorFlow profiler is running; kswap will not stop it."""


def _check_allocator() -> None:
    if not transfer.has_gpu() and not _env.cpu_allocator_is_bfc():
        raise RuntimeError(_env.bfc_help())


class FitSteps:
    """Training steps run the way ``model.fit`` runs them.

    ``fit`` calls the model's ``train_function`` with an iterator over a
    ``tf.data`` dataset, whose batch dimension is unknown (for arrays with a
    partial last batch, and for datasets batched without
    ``drop_remainder``); Keras traces that call, with the training step
    nested in it, as a graph of its own. ``train_on_batch`` traces another
    graph, for the static shape of its first batch, and neither ever runs
    the other's. So each step here is one call of ``train_function`` with an
    iterator over a dataset of one batch whose batch dimension is unknown
    (or known, ``static_batch=True``, as fit traces a dataset batched with
    ``drop_remainder=True``); the other dimensions are the batch's own.

    Args:
        model: A compiled ``keras.Model``.
        batches: ``(x, y)`` batches (``y`` may be None).
        static_batch: Give the traced graph the batches' own batch size.

    Example:
        >>> import keras, numpy as np
        >>> from kswap.profiler.profile import FitSteps
        >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        >>> model.compile("sgd", "mse")
        >>> steps = FitSteps(model, [(np.ones((8, 4)), np.ones((8, 2)))] * 2)
        >>> steps.dataset(0).element_spec[0]
        TensorSpec(shape=(None, 4), dtype=tf.float64, name=None)
        >>> seconds = steps.warm_up(0)    # through model.fit: traces the step
        >>> seconds = steps.run(1)        # model.train_function, fit's graph
    """

    def __init__(self, model, batches: Sequence[tuple], *, static_batch: bool = False):
        self.model = model
        self.batches = list(batches)
        self.static_batch = bool(static_batch)

    def __len__(self) -> int:
        return len(self.batches)

    def dataset(self, i: int) -> tf.data.Dataset:
        """A dataset of batch ``i`` alone, as fit's dataset would yield it."""
        x, y = self.batches[i]
        element = (x,) if y is None else (x, y)
        element = keras.tree.lists_to_tuples(element)
        dataset = tf.data.Dataset.from_tensor_slices(element).batch(
            keras_batch_size(self.batches[i]), drop_remainder=self.static_batch
        )
        # fit counts the batches of a dataset whose cardinality it knows,
        # and warns at the end of one it cannot count
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(1))
        options = tf.data.Options()
        # no prefetch: the batch is made when its step asks for it, not before
        options.experimental_optimization.inject_prefetch = False
        return dataset.with_options(options)

    def _iterator(self, i: int):
        strategy = self.model.distribute_strategy
        return iter(strategy.experimental_distribute_dataset(self.dataset(i)))

    def warm_up(self, i: int = 0) -> float:
        """Runs batch ``i`` through ``model.fit`` (one step); returns its wall time (s).

        ``fit`` builds what the first step needs (loss and metric state) and
        traces its training function; its ``History`` is not left on the model.
        """
        model = self.model
        had_history = "history" in vars(model)
        history = vars(model).get("history")
        dataset = self.dataset(i)
        t0 = time.perf_counter()
        model.fit(dataset, epochs=1, verbose=0, shuffle=False)
        seconds = time.perf_counter() - t0
        if had_history:
            model.history = history
        elif "history" in vars(model):
            del model.history
        return seconds

    def run(self, i: int, marker: int | None = None) -> float:
        """Runs batch ``i`` as one call of ``train_function``; returns its wall time (s).

        The iterator is made first, outside the time and the marker. With
        ``marker``, the step runs inside kswap's profiler step marker of that
        number. A model without a training function yet is warmed up instead
        (:meth:`warm_up`).
        """
        model = self.model
        if model.train_function is None:
            return self.warm_up(i)
        iterator = self._iterator(i)
        t0 = time.perf_counter()
        if marker is None:
            _finish(model.train_function(iterator))
        else:
            with tf.profiler.experimental.Trace(STEP_MARKER, step_num=marker, _r=1):
                _finish(model.train_function(iterator))
        return time.perf_counter() - t0


def _finish(logs) -> None:
    """Waits for the step: reads its logs (a few scalars) back."""
    for value in tf.nest.flatten(logs):
        np.asarray(value)


def run_steps(model, batches: Sequence[tuple], *, static_batch: bool = False) -> list[float]:
    """Runs one training step per batch, as ``model.fit`` runs them (:class:`FitSteps`).

    A model that has no training function yet gets its first step through
    ``model.fit``, which builds and traces it.

    Returns:
        Each step's wall time (s).
    """
    steps = FitSteps(model, batches, static_batch=static_batch)
    return [steps.run(i) for i in range(len(steps))]


def xplane_files(logdir: str) -> dict[str, int]:
    """The profiler's ``.xplane.pb`` files under ``logdir``, each with its mtime (ns).

    The mtime matters: the profiler names a run's folder after the second it
    started, so two runs within one second write the same path.
    """
    paths = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
    return {path: os.stat(path).st_mtime_ns for path in paths}


def new_xplane(logdir: str, before: Mapping[str, int]) -> str:
    """The newest ``.xplane.pb`` file under ``logdir`` written since ``before``.

    Args:
        logdir: The profiler's log directory.
        before: :func:`xplane_files` of ``logdir`` before the profiler started.
            A file is new if its path is not in it or its mtime changed.

    Raises:
        RuntimeError: If the profiler wrote none.
    """
    now = xplane_files(logdir)
    new = sorted((t, p) for p, t in now.items() if before.get(p) != t)
    if not new:
        raise RuntimeError(f"The TensorFlow profiler wrote no trace under {logdir!r}.")
    return new[-1][1]


def profile_steps(steps: FitSteps, indices: Sequence[int], logdir: str) -> str:
    """Runs batches ``indices`` of ``steps`` under a profiler kswap starts and stops.

    Each step runs inside kswap's step marker, numbered from 0. A model
    without a training function gets a warm-up step (batch ``indices[0]``,
    through ``fit``) first, outside the profiler.

    Returns:
        The path of the ``.xplane.pb`` file written under ``logdir``.
    """
    if steps.model.train_function is None:
        steps.warm_up(indices[0])
    before = xplane_files(logdir)
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
        for number, i in enumerate(indices):
            steps.run(i, marker=number)
    finally:
        tf.profiler.experimental.stop()
    return new_xplane(logdir, before)


def variable_bytes(v) -> int:
    """Bytes a variable holds, from its shape and dtype (no copy of its value)."""
    return math.prod(v.shape) * tf.as_dtype(v.dtype).size


def step_graphs(names: set[str], wanted: set[str]) -> list[dict[str, tuple[str, ...]]]:
    """The data inputs of the ops of the profiled step's graph, by op name.

    TensorFlow keeps every traced function in the eager context. The step's
    are those holding the most of the trace's op names ``names`` (its
    retraces are identical, so all of them count); of those, the ones
    holding an op of ``wanted`` are returned, each as ``op -> input op
    names`` (control inputs left out). Empty if TensorFlow does not list its
    functions.
    """
    from tensorflow.python.eager import context

    ctx = context.context()
    try:
        functions = ctx.list_function_names()
    except AttributeError:  # not in this version of TensorFlow
        return []
    best, graphs = 0, []
    for fname in functions:
        if fname.startswith("__wrapped__"):  # single eager ops
            continue
        nodes = ctx.get_function_def(fname).node_def
        score = sum(1 for n in nodes if n.name in names)
        if score < best or score == 0 or not any(n.name in wanted for n in nodes):
            continue
        graph = {
            n.name: tuple(i.split(":")[0] for i in n.input if not i.startswith("^")) for n in nodes
        }
        if score > best:
            best, graphs = score, []
        graphs.append(graph)
    return graphs


def held_before_training(model) -> int:
    """Bytes the emulated device holds beyond the model's variables (0 with a GPU).

    Without a GPU the device is emulated by the CPU's allocator, which also
    holds what ``fit`` keeps in host memory on a GPU: its input arrays (a
    ``tf.data`` copy of ``x`` and ``y``, made before the first step) and the
    batches its pipeline has prefetched (their number varies over ``fit``).
    Read between two steps, right where a profiled window begins, this is
    everything in that allocator but the variables of ``model``, its metrics
    and its optimizer, in the allocator's own blocks; pass it to
    :func:`read_trace` as ``held_bytes``.
    """
    if transfer.has_gpu():
        return 0
    try:
        current = int(tf.config.experimental.get_memory_info("CPU:0")["current"])
    except ValueError:  # the default CPU allocator keeps no statistics
        return 0
    variables = sum(granule_bytes(variable_bytes(v)) for v in model_variables(model))
    return max(current - variables, 0)


def read_trace(path: str, model, metadata: dict | None = None, held_bytes: int = 0) -> Trace:
    """Builds kswap's :class:`Trace` of a profiler file written for ``model``.

    ``held_bytes`` (see :func:`held_before_training`) are moved to the host
    tier when device memory is emulated, as :data:`HELD_BEFORE_TRAINING`.
    """
    space = read_xspace(path)
    # the ops' names in the step's graph, without fit's call of it in front
    events = [
        dataclasses.replace(e, tf_op=step_op_name(e.tf_op)) if e.tf_op else e
        for e in space.memory_events
    ]
    ops = [dataclasses.replace(o, op=step_op_name(o.op)) for o in space.op_events]
    emulated = not transfer.has_gpu()
    tree = layer_tree(model)
    layer_of = resolver(tree)
    optimizer_scope = model.optimizer.name if model.optimizer is not None else None
    updates = (optimizer_scope,) if optimizer_scope else ()
    transfers = (transfer.HOST_SCOPE, transfer.DEVICE_SCOPE)

    def in_update(op: str) -> bool:
        return bool(optimizer_scope) and op.startswith(f"{optimizer_scope}/")

    # ops that copy or mirror a layer's tensor outside its scope get its layer
    names = {e.tf_op for e in events if e.tf_op} | {o.op for o in ops}
    wanted = {
        op
        for op in names
        if layer_of(op) is None and not in_update(op) and copies_one_tensor(op, transfers)
    }
    graphs = step_graphs(names, wanted) if wanted else []
    derived = {op: layer_from_inputs(op, graphs, layer_of) for op in wanted}

    def attribute(op: str) -> str | None:
        if in_update(op):
            return OPTIMIZER_UPDATE
        return layer_of(op) or derived.get(op)

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
    if emulated and held_bytes > 0:
        host_residents[HELD_BEFORE_TRAINING] = [int(held_bytes)]
    trace = build_trace(
        events,
        emulated=emulated,
        host_scope=transfer.HOST_SCOPE,
        steps=space.steps,
        layer_of=attribute,
        phase_of=phase_resolver(tree, transfers, updates),
        residents=residents,
        host_residents=host_residents,
        metadata=metadata,
        ops=ops,
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


def keras_batch_size(batch: tuple) -> int:
    """The number of samples in one ``(x, y)`` batch."""
    return int(keras.tree.flatten(batch[0])[0].shape[0])
