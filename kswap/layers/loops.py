"""Replaying the backward of a ``tf.while_loop`` from host copies of its per-step values.

Keras's recurrent layers (``LSTM``, ``GRU``, ``SimpleRNN``, ``Bidirectional``,
``ConvLSTM2D``) run on the TensorFlow backend as one functional ``While`` op.
TensorFlow's gradient of that op (``while_v2._WhileGrad``) builds a gradient
loop that reads, step by step in reverse, the values the forward steps made:
it rewrites the forward op to also output one ``TensorList`` accumulator per
value it needs (the gates and states of every step: the bulk of a recurrent
layer's activations) and passes those lists, and the loop's invariants (the
input sequence as a list), to the gradient loop as inputs.

:func:`loop_gradient` calls that very gradient function, then points the
gradient loop's inputs at copies brought back from the host:

- each accumulator and invariant list whose elements are floats is stacked
  into one dense tensor in host memory (:func:`kswap.transfer.list_to_host`,
  a stateless op that runs as soon as the forward loop has ended), and
  rebuilt in backward with ``TensorListFromTensor`` from its copy brought
  back. The elements are the same values in the same order, so the gradient
  loop computes the same gradients bit for bit;
- accumulators of variable reads are left alone: their elements share the
  variable's buffer and cost no device memory;
- dense invariants (a dropout mask the loop captures) are offloaded in
  forward by :func:`prepare_loop`, like any other tensor.

The accumulators exist only once the gradient is built, so their host copies
are made then; they are stateless and depend only on the forward loop, so
TensorFlow's executor runs them in forward. Limits: the loop's per-step
values must keep one shape across steps (``TensorListStack`` stacks equal
shapes; Keras's recurrent layers do; a loop with shape invariants looser
than its initial values is recomputed instead), and the loop must run at
least once when a per-step shape is not static.

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.loops import replayable_loop
    >>> @tf.function
    ... def f(x):
    ...     y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), (0, x))[1]
    ...     return replayable_loop(y.op)
    >>> bool(f(tf.constant(2.0)))
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.ops import gen_list_ops, handle_data_util, while_v2

from kswap import transfer
from kswap.layers.schedule import GraphState

__all__ = [
    "LOOP_OPS",
    "REPLAY_LOOPS",
    "replayable_loop",
    "not_replayable",
    "LoopPlan",
    "prepare_loop",
    "loop_gradient",
]

#: Op types of functional loops (``tf.while_loop`` in TensorFlow 2).
LOOP_OPS = frozenset({"While", "StatelessWhile"})
#: Whether loops are replayed (False: their layers are recomputed, as before
#: kswap could replay them; for comparisons). Read when a step is traced.
REPLAY_LOOPS = True

#: Ops whose output is their input's buffer.
_ALIASES = frozenset({"Identity", "Snapshot"})


def replayable_loop(op: tf.Operation) -> bool:
    """Whether ``op`` is a ``tf.while_loop`` whose backward kswap replays."""
    return not_replayable(op) is None


def not_replayable(op: tf.Operation) -> str | None:
    """Why the backward of loop op ``op`` is not replayed (None: it is).

    A loop whose loop variables may change shape from step to step (shape
    invariants looser than the initial values) is not: its per-step values
    could not be stacked into one host tensor.
    """
    if not REPLAY_LOOPS or op.type not in LOOP_OPS or getattr(op, "_body_graph", None) is None:
        return "is control flow"
    try:
        grad_fn = tf_ops._gradient_registry.lookup(op.type)
    except LookupError:
        grad_fn = None
    if grad_fn is None or grad_fn is not getattr(while_v2, "_WhileGrad", None):
        return "is control flow"
    for t_in, t_out in zip(op.inputs, op.outputs, strict=False):
        if t_in.dtype not in (tf.variant, tf.resource) and t_in.shape != t_out.shape:
            return f"is a loop whose variable {t_out.name} may change shape from step to step"
    return None


@dataclasses.dataclass(frozen=True)
class LoopPlan:
    """A loop op made ready for replay (in forward).

    Attributes:
        state: The graph's offloading state; the lists' host copies are
            registered there when the backward is built.
        invariants: Per output index of a loop variable the body passes
            through unchanged, the loop's input of it (the same value).
    """

    state: GraphState
    invariants: Mapping[int, tf.Tensor]


def _source(t: tf.Tensor) -> tf.Tensor:
    while t.op.type in _ALIASES:
        t = t.op.inputs[0]
    return t


def _dense_float(t: tf.Tensor) -> bool:
    return t.dtype.is_floating or t.dtype.is_complex


def prepare_loop(
    op: tf.Operation, state: GraphState, worth: Callable[[tf.Tensor], bool]
) -> LoopPlan:
    """Offloads what a loop's gradient reads that exists in forward.

    Dense float invariants worth a copy (``worth``) go to the host; the
    dynamic shapes of dense float outputs are taken, for the zeros the
    gradient gets for outputs nothing reads.
    """
    body = op._body_graph  # pylint: disable=protected-access
    invariants = {
        i: op.inputs[i]
        for i, (inp, out) in enumerate(zip(body.inputs, body.outputs, strict=False))
        if i < len(op.inputs) and _source(out) is inp
    }
    for i, t in enumerate(op.outputs):
        if not _dense_float(t) or not worth(t):
            continue
        if i in invariants:
            state.offload(invariants[i])
        if not t.shape.is_fully_defined():
            state.remember_shape(t)
    return LoopPlan(state, dict(invariants))


class _View:
    """The loop op as its gradient function sees it (with ``skip_input_indices``)."""

    def __init__(self, op: tf.Operation, skipped: Sequence[int]):
        self._op = op
        self.inputs = list(op.inputs)
        self.outputs = list(op.outputs)
        self.skip_input_indices = list(skipped) or None

    def __getattr__(self, name):
        return getattr(self._op, name)


def _list_elements(op: tf.Operation, index: int) -> tf.DType | None:
    """The element dtype of loop output ``index`` if it is a list worth a host copy.

    That is an accumulator (the body pushes a value onto its own input list,
    the pattern TensorFlow's gradient makes) whose values are not variable
    reads, or an invariant list; None for anything else.
    """
    body = op._body_graph  # pylint: disable=protected-access
    if index >= len(body.outputs) or index >= len(body.inputs):
        return None
    out, inp = _source(body.outputs[index]), body.inputs[index]
    if out.op.type == "TensorListPushBack" and out.op.inputs[0] is inp:
        pushed = _source(out.op.inputs[1])
        if pushed.op.type == "ReadVariableOp":  # shares the variable's buffer
            return None
        return pushed.dtype
    if out is inp:
        data = handle_data_util.get_resource_handle_data(op.outputs[index])
        if data.is_set and data.shape_and_type:
            return tf.as_dtype(data.shape_and_type[0].dtype)
    return None


def _restored_list(
    op: tf.Operation,
    plan: LoopPlan,
    t: tf.Tensor,
    dtype: tf.DType,
    fetch: Callable[[tf.Tensor, bool], tf.Tensor],
) -> tf.Tensor:
    """``t``, a list output of the loop, rebuilt from its host copy brought back."""
    graph = op.graph
    scope = op.name.rpartition("/")[0]
    # made while the backward is built, they read only the forward: clear the
    # control inputs so that they run right after the loop, in forward
    with tf.control_dependencies(None), graph.name_scope(scope + "/" if scope else ""):
        shape = gen_list_ops.tensor_list_element_shape(t, shape_type=tf.int32)
        host = transfer.list_to_host(t, shape, dtype)
    restore = lambda x, device: transfer.list_to_device(x, shape, device)  # noqa: E731
    plan.state.add_host_copy(t, host, restore)
    rebuilt = fetch(t, True)
    handle_data_util.copy_handle_data(t, rebuilt)
    return rebuilt


def loop_gradient(
    op: tf.Operation,
    plan: LoopPlan,
    fetch: Callable[[tf.Tensor, bool], tf.Tensor],
    out_grads: Sequence,
    skipped: Sequence[int] = (),
) -> list:
    """Input gradients of a loop op, computed by TensorFlow's own gradient of it.

    Args:
        op: The forward ``While`` op.
        plan: What :func:`prepare_loop` returned for it.
        fetch: ``fetch(tensor, by_value)``: the tensor the backward should use
            (see :func:`kswap.layers.replay.replay_gradients`).
        out_grads: One gradient per output (None: no gradient; dense float
            outputs get zeros, as from TensorFlow's tape).
        skipped: Inputs whose gradient nobody needs.

    Returns:
        One gradient per input the op had before the call (the gradient
        rewrites the op to take more); a variable's handle gets that
        variable's gradient.
    """
    count = len(op.inputs)
    graph = op.graph
    start = len(graph.get_operations())
    grad_fn = tf_ops._gradient_registry.lookup(op.type)
    result = grad_fn(_View(op, skipped), *out_grads)
    lists: dict[int, tf.Tensor | None] = {}
    for new in graph.get_operations()[start:]:
        for j, t in enumerate(new.inputs):
            if t.op is not op:
                continue
            k = t.value_index
            if t.dtype == tf.variant:
                if k not in lists:
                    dtype = _list_elements(op, k)
                    floats = dtype is not None and (dtype.is_floating or dtype.is_complex)
                    lists[k] = _restored_list(op, plan, t, dtype, fetch) if floats else None
                replacement = lists[k]
            elif _dense_float(t):
                by_value = new.type != "ZerosLike"
                replacement = fetch(plan.invariants.get(k, t), by_value)
            else:
                replacement = None
            if replacement is not None and replacement is not t:
                new._update_input(j, replacement)  # pylint: disable=protected-access
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    return (result + [None] * count)[:count]
