"""Which recorded ops a block's backward replays, and whether it can.

:func:`plan_replay` selects, among the ops recorded in a block's forward
(:func:`kswap.layers.recording.record_ops`), those on a differentiable path
from the block's inputs and the variables it reads to its outputs, and says
whether :func:`kswap.layers.replay.replay_gradients` can build their backward
(if not, why: control flow, an op without a gradient, a variable read no
recorded op shows), in which case kswap recomputes the block. The helpers
say which tensors carry a variable's gradient (:func:`variable_reads`) and
how many gradients each block input can get (:func:`source_uses`).

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.recording import record_ops
    >>> from kswap.layers.replay_plan import plan_replay
    >>> @tf.function
    ... def replayable(x):
    ...     (y,), ops, _ = record_ops(lambda: [tf.nn.relu(x * x)])
    ...     return plan_replay(ops, [x], [y]).replayable
    >>> bool(replayable(tf.constant(3.0)))
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from kswap.layers import calls as calls_lib
from kswap.layers import custom as custom_lib
from kswap.layers import loops as loops_lib

__all__ = [
    "ReplayPlan",
    "plan_replay",
    "variable_reads",
    "unread_variables",
    "CONTROL_FLOW_OPS",
    "takes_variable_handles",
    "source_uses",
]

#: Ops whose gradients need TensorFlow's own machinery (control flow, calls).
CONTROL_FLOW_OPS = frozenset(
    {
        "While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
        "PartitionedCall", "StatefulPartitionedCall", "Enter", "Exit", "Merge",
        "Switch", "NextIteration", "LoopCond", "SymbolicGradient",
    }
)  # fmt: skip


def _gradient_fn(op: tf.Operation):
    """The registered gradient function of ``op``, None if not differentiable.

    Raises:
        LookupError: No gradient is registered for the op's type.
    """
    if calls_lib.replayable_call(op):
        return op._gradient_function  # the tf.function's own (see kswap.layers.calls)
    try:  # a tf.custom_gradient's IdentityN names its gradient (see kswap.layers.custom)
        op_type = op.get_attr("_gradient_op_type")
        op_type = op_type.decode() if isinstance(op_type, bytes) else op_type
    except ValueError:
        op_type = op.type
    try:
        return tf_ops._gradient_registry.lookup(op_type)
    except LookupError:
        if op.type in ("ReadVariableOp", "Const", "Placeholder"):
            return None
        raise


@dataclasses.dataclass(frozen=True)
class ReplayPlan:
    """Which recorded ops the backward visits.

    Attributes:
        ops: The ops between the sources and the outputs, in creation order.
        replayable: False when one of them has no usable gradient function
            (control flow, function calls, unregistered ops).
        reason: Why not replayable.
    """

    ops: tuple[tf.Operation, ...]
    replayable: bool
    reason: str = ""


def plan_replay(
    ops: Sequence[tf.Operation],
    sources: Sequence[tf.Tensor],
    outputs: Sequence[tf.Tensor],
    variables: Sequence = (),
) -> ReplayPlan:
    """Selects the recorded ops on a differentiable path from sources to outputs.

    Sources are the block's inputs and every variable read inside it. A path
    may run through non-float values that carry gradients (``TensorList``
    variants, as recurrent layers make). The plan is not replayable when an
    op on it is control flow or a function call (its body may read variables
    and tensors no recorded op shows), has no gradient, or reads a variable
    other than through ``ReadVariableOp`` (``ResourceGather``...): replay
    would drop those gradients. ``tf.function`` calls and ``tf.while_loop``
    loops are the exceptions: their backward is TensorFlow's own gradient of
    the whole call or loop (:mod:`kswap.layers.calls`, :mod:`kswap.layers.loops`),
    which returns the gradients of the variables whose handles they take.

    Args:
        ops: The recorded ops, in creation order.
        sources: The block's inputs.
        outputs: The block's outputs.
        variables: The trainable variables the forward read (as
            ``tf.custom_gradient`` sees them). One that no recorded
            ``ReadVariableOp`` reads makes the plan not replayable.
    """
    op_set = set(ops)
    reached = {t.ref() for t in sources if _carries_gradient(t)}
    forward = []
    for op in ops:
        if op.type == "ReadVariableOp":
            if _differentiable(op.outputs[0]):
                reached.add(op.outputs[0].ref())
                forward.append(op)
        elif any(t.ref() in reached for t in op.inputs) or _reads_resource(op):
            forward.append(op)
            reached.update(t.ref() for t in op.outputs if _carries_gradient(t))
    needed = {t.ref() for t in outputs}
    path: list[tf.Operation] = []
    for op in reversed(forward):
        if any(t.ref() in needed for t in op.outputs):
            path.append(op)
            inputs = op.inputs
            spec = custom_lib.custom_gradient_of(op)
            if spec is not None:  # its forward ops get no backward: only its arguments do
                inputs = inputs[spec.results :]
            needed.update(t.ref() for t in inputs if t.op in op_set or t.ref() in reached)
    path.reverse()
    for op in path:
        if takes_variable_handles(op):
            continue  # a tf.function's or a loop's backward is replayed whole
        if op.type in CONTROL_FLOW_OPS:
            why = loops_lib.not_replayable(op) if op.type in loops_lib.LOOP_OPS else None
            why = why or "is control flow"
            return ReplayPlan(tuple(path), False, f"op {op.name} ({op.type}) {why}")
        if _reads_resource(op):
            return ReplayPlan(
                tuple(path), False, f"op {op.name} ({op.type}) reads a variable directly"
            )
        try:
            _gradient_fn(op)
        except LookupError:
            return ReplayPlan(tuple(path), False, f"op {op.name} ({op.type}) has no gradient")
    unread = unread_variables(ops, variables)
    if unread:
        return ReplayPlan(
            tuple(path), False, f"variable {unread[0]} is read where no recorded op shows it"
        )
    return ReplayPlan(tuple(path), True)


#: Ops that touch a variable without reading its value into the graph.
_VARIABLE_OPS = frozenset(
    {
        "ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
        "VarIsInitializedOp", "VariableShape", "DestroyResourceOp",
    }
)  # fmt: skip


def takes_variable_handles(op: tf.Operation) -> bool:
    """Whether ``op``'s replayed gradient returns gradients for the variable handles it takes.

    A ``tf.function`` call or a ``tf.while_loop`` whose body reads variables
    takes their handles as inputs; TensorFlow's gradient of it returns each
    variable's gradient as the gradient of its handle.
    """
    return calls_lib.replayable_call(op) or loops_lib.replayable_loop(op)


def _reads_resource(op: tf.Operation) -> bool:
    """Whether ``op`` takes a resource (a variable's handle) other than to read or assign it."""
    return op.type not in _VARIABLE_OPS and any(t.dtype == tf.resource for t in op.inputs)


def variable_reads(ops: Sequence[tf.Operation], variables: Sequence) -> list[list[tf.Tensor]]:
    """Per variable, the tensors of ``ops`` whose gradients are its gradient.

    Its ``ReadVariableOp`` outputs, and its handle where a replayable called
    ``tf.function`` or loop takes it (that function's or loop's backward
    returns the gradient for the handle). Variables are matched through the
    current graph's captures, as a ``tf.function`` sees the handles of
    outside variables.
    """
    graph = tf.compat.v1.get_default_graph()
    internal = {id(ext): intl for ext, intl in getattr(graph, "captures", ())}
    reads: dict = {}
    for op in ops:
        if op.type == "ReadVariableOp":
            reads.setdefault(op.inputs[0].ref(), []).append(op.outputs[0])
    for op in ops:
        if takes_variable_handles(op):
            for t in (t for t in op.inputs if t.dtype == tf.resource):
                found = reads.setdefault(t.ref(), [])
                if not any(r is t for r in found):
                    found.append(t)
    out = []
    for v in variables:
        handle = internal.get(id(v.handle), v.handle)
        out.append(list(reads.get(handle.ref(), [])))
    return out


def unread_variables(ops: Sequence[tf.Operation], variables: Sequence) -> list[str]:
    """Names of the trainable ``variables`` none of ``ops`` reads in a way replay sees
    (see :func:`variable_reads`)."""
    trainable = [v for v in variables if getattr(v, "trainable", True)]
    return [
        v.name.split(":")[0]
        for v, reads in zip(trainable, variable_reads(ops, trainable), strict=True)
        if not reads
    ]


def source_uses(ops: Sequence[tf.Operation], sources: Sequence[tf.Tensor]) -> list[int]:
    """Per source, the most gradients :func:`kswap.layers.replay.replay_gradients` can give it.

    One per input slot of a recorded op with a gradient function that takes
    the source (``Multiply()([h, h])`` takes ``h`` twice).
    """
    counts: dict = {}
    for op in ops:
        if _gradient_fn(op) is None:
            continue
        for t in op.inputs:
            counts[t.ref()] = counts.get(t.ref(), 0) + 1
    return [counts.get(t.ref(), 0) for t in sources]


def _differentiable(t: tf.Tensor) -> bool:
    return t.dtype.is_floating or t.dtype.is_complex


def _carries_gradient(t: tf.Tensor) -> bool:
    """Float values, and variants (``TensorList``), whose gradients TensorFlow tracks."""
    return _differentiable(t) or t.dtype == tf.variant
