"""Replaying the backward of a ``tf.function`` called inside a layer.

Keras runs some ops as a compiled function of their own: on the TensorFlow
backend a grouped convolution (``Conv2D(groups=...)``, ConvNeXt's depthwise
convolutions) is a ``tf.function(jit_compile=True)``, which appears in the
layer's graph as one ``StatefulPartitionedCall`` op. TensorFlow attaches that
op's gradient to the op itself: it rewrites the call to also output the
intermediate values its backward function needs, then calls the backward
function on them.

:func:`prepare_call` does that rewrite while the forward is traced, so the
intermediates are outputs of the forward op that kswap can send to host
memory like any other tensor; :func:`call_gradient` calls TensorFlow's own
backward function with the copies brought back in their place. The gradients
are TensorFlow's, from the same backward function.

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.calls import call_gradient, prepare_call
    >>> square = tf.function(lambda x: x * x)
    >>> @tf.function
    ... def grad_of_square(x):
    ...     with tf.GradientTape() as tape:
    ...         tape.watch(x)
    ...         y = square(x)
    ...     plan = prepare_call(y.op)
    ...     (dx,) = call_gradient(y.op, plan, lambda t, _: t, [tf.ones_like(y)])
    ...     return dx
    >>> float(grad_of_square(tf.constant(3.0)))
    6.0
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow as tf
from tensorflow.python.eager import backprop_util
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.ops import handle_data_util

from kswap.layers import fetch as fetch_lib

__all__ = ["CALL_OPS", "CallPlan", "replayable_call", "prepare_call", "call_gradient"]

#: Op types of function calls.
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


def _owner(op):
    fn = getattr(op, "_gradient_function", None)
    owner = getattr(fn, "__self__", None)
    return owner if hasattr(owner, "forward_backward") else None


def replayable_call(op: tf.Operation) -> bool:
    """Whether ``op`` calls a ``tf.function`` whose backward kswap can replay."""
    return op.type in CALL_OPS and _owner(op) is not None


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """A function call op made ready for replay.

    Attributes:
        outputs: How many outputs the call had before the rewrite (the ones
            that receive gradients).
        reads: Indices of the op's outputs the backward function reads.
        backward: TensorFlow's backward function of the call.
        captures: Per captured input of ``backward``: an output index of the
            op, or None for a tensor captured from elsewhere (kept as is).
    """

    outputs: int
    reads: tuple[int, ...]
    backward: object
    captures: tuple[int | None, ...]
    _external: tuple = ()


def prepare_call(op: tf.Operation) -> CallPlan:
    """Rewrites a call op, as TensorFlow's gradient would, to output what its backward reads."""
    owner = _owner(op)
    if owner is None:
        raise ValueError(f"`op` must call a tf.function. Received: op={op.name} ({op.type})")
    n = len(op.outputs)
    forward, backward = owner.forward_backward(n)
    flat = forward.function_type.flat_outputs
    if backward.outputs and len(flat) > n:
        # pylint: disable=protected-access  (TensorFlow's own rewrite, done early)
        op.graph._add_function_recursive(forward)
        op._set_func_attr("f", forward.name)
        op._set_type_list_attr("Tout", [o.dtype.as_datatype_enum for o in flat])
        op._add_outputs([o.dtype.as_datatype_enum for o in flat[n:]], [o.shape for o in flat[n:]])
        for i in range(len(op.outputs)):
            handle_data = flat[i].dtype._handle_data
            if handle_data:
                handle_data_util.set_handle_data(op.outputs[i], handle_data.shape_inference)
    position = {tf_ops.tensor_id(t): i for i, t in enumerate(owner._func_graph.outputs)}
    captures = tuple(position.get(tf_ops.tensor_id(c)) for c in backward.captured_inputs)
    external = tuple(
        c for c, i in zip(backward.captured_inputs, captures, strict=True) if i is None
    )
    reads = tuple(sorted({i for i in captures if i is not None and i < len(op.outputs)}))
    return CallPlan(n, reads, backward, captures, external)


def call_gradient(
    op,
    plan: CallPlan,
    fetch: fetch_lib.Fetch,
    out_grads: Sequence,
) -> list:
    """Input gradients of a prepared call op, from the tensors ``fetch`` supplies.

    Args:
        op: The call op (or kswap's view of it).
        plan: What :func:`prepare_call` returned for it.
        fetch: ``fetch(tensor, by_value)``: the tensor the backward should use.
        out_grads: Gradients of the op's first ``plan.outputs`` outputs (None:
            no gradient).

    Returns:
        One gradient per input of the op (None where there is none); the
        gradient of a variable's handle is that variable's gradient.
    """
    owner = _owner(op)
    placeholders = owner._func_graph.outputs[: plan.outputs]
    cleaned = []
    for i, (g, placeholder) in enumerate(zip(out_grads, placeholders, strict=True)):
        if backprop_util.IsTrainable(placeholder):
            if isinstance(g, tf.IndexedSlices):
                cleaned.append(tf.convert_to_tensor(g))
            elif g is not None:
                cleaned.append(g)
            else:
                cleaned.append(fetch_lib.zeros(op.outputs[i], fetch))
    if not plan.backward.outputs:
        return [None] * len(op.inputs)
    external = iter(plan._external)
    captures = [next(external) if i is None else fetch(op.outputs[i], True) for i in plan.captures]
    result = plan.backward._call_flat(cleaned, captures)  # pylint: disable=protected-access
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    return (result + [None] * len(op.inputs))[: len(op.inputs)]
