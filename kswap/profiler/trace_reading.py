"""Reading a profiler file back into a :class:`kswap.Trace` of a Keras model.

:func:`read_trace` builds the trace from the allocator events of a
``.xplane.pb`` file, attributing each buffer to a layer and a phase of
``model`` (and the optimizer's to :data:`OPTIMIZER` and
:data:`OPTIMIZER_UPDATE`), with the model's variables as residents.
:func:`held_before_training` measures what an emulated device held before the
profiled steps, :func:`variable_bytes` a variable's size, and
:func:`step_graphs` the traced step's graph that attribution reads.
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf

from kswap import _env, transfer
from kswap.optimizer_state import host_variables
from kswap.profiler._state import model_variables
from kswap.profiler.attribution import (
    copies_one_tensor,
    layer_from_inputs,
    layer_tree,
    phase_resolver,
    resolver,
    step_op_name,
)
from kswap.trace import Trace, build_trace, read_xspace
from kswap.trace.model import granule_bytes

__all__ = [
    "HELD_BEFORE_TRAINING",
    "OPTIMIZER",
    "OPTIMIZER_UPDATE",
    "held_before_training",
    "read_trace",
    "step_graphs",
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
