"""Backward of a recorded block of graph ops, from tensors kswap supplies.

Inside ``tf.function`` a layer's forward is a list of graph operations. Its
backward is what TensorFlow's registered gradient functions build from those
operations' inputs and outputs. :func:`replay_gradients` calls the very same
gradient functions, op by op in reverse order, but hands each one a view of
its operation whose input and output tensors come from a callback: kswap's
copies brought back from the host. The gradients are TensorFlow's own
(exact, no recomputation of the forward), and the backward graph holds no
reference to the forward's device tensors.

The ops come from :func:`kswap.layers.recording.record_ops` (a block's
forward, with each op's name scope) and
:func:`kswap.layers.replay_plan.plan_replay` (those on a differentiable path,
and whether they can be replayed); both, and the plan's helpers, are
importable from here too.

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.replay import record_ops, replay_gradients
    >>> @tf.function
    ... def grad_of_square(x):
    ...     (y,), ops, _ = record_ops(lambda: [x * x])
    ...     grads, _ = replay_gradients(ops, [x], [y], [tf.ones_like(y)], lambda t, _: t)
    ...     return grads[0]
    >>> float(grad_of_square(tf.constant(3.0)))
    6.0
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

import tensorflow as tf
from tensorflow.python.eager import backprop_util

from kswap.layers import calls as calls_lib
from kswap.layers import custom as custom_lib
from kswap.layers import fetch as fetch_lib
from kswap.layers import loops as loops_lib
from kswap.layers.recording import _tape_scope, record_ops
from kswap.layers.replay_plan import (
    CONTROL_FLOW_OPS,
    ReplayPlan,
    _carries_gradient,
    _differentiable,
    _gradient_fn,
    plan_replay,
    source_uses,
    takes_variable_handles,
    variable_reads,
)

__all__ = [
    "record_ops",
    "ReplayPlan",
    "plan_replay",
    "replay_gradients",
    "ValueReads",
    "variable_reads",
    "CONTROL_FLOW_OPS",
    "takes_variable_handles",
    "source_uses",
    "aggregate",
]


class _Tensors(Sequence):
    """An op's inputs or outputs, each fetched from the callback on first use."""

    def __init__(self, tensors, fetch, values: tuple[int, ...] | None):
        self._tensors = list(tensors)
        self._fetch = fetch
        self._values = values
        self._cache: dict[int, tf.Tensor] = {}
        self.stand_ins: list[tf.Tensor] = []  # fetched for their shape, not the originals

    def __len__(self) -> int:
        return len(self._tensors)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if i not in self._cache:
            by_value = self._values is None or i in self._values
            self._cache[i] = self._fetch(self._tensors[i], by_value)
            if not by_value and self._cache[i] is not self._tensors[i]:
                self.stand_ins.append(self._cache[i])
        return self._cache[i]


class _ReplayOp:
    """An op as its gradient function sees it, with substituted tensors."""

    def __init__(self, op: tf.Operation, fetch, values=None):
        self._op = op
        ins, outs = values if values is not None else (None, None)
        self.inputs = _Tensors(op.inputs, fetch, ins)
        self.outputs = _Tensors(op.outputs, fetch, outs)

    def __getattr__(self, name):
        return getattr(self._op, name)

    def misread(self) -> bool:
        """Whether the gradient used a shape-only stand-in for more than its shape."""
        stand_ins = self.inputs.stand_ins + self.outputs.stand_ins
        return any(c.type not in _SHAPE_OPS for t in stand_ins for c in t.consumers())


_SHAPE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})


def aggregate(grads: list):
    """Sums gradients as TensorFlow's tape does (``AddN`` in arrival order)."""
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    # the tape sums in the scope tape.gradient() runs in: the root in Keras
    with tf.compat.v1.get_default_graph().name_scope(""):
        if all(isinstance(g, tf.Tensor) for g in grads):
            return tf.raw_ops.AddN(inputs=grads)
        # an embedding's gradients (IndexedSlices) are concatenated, as the tape does
        return backprop_util.AggregateIndexedSlicesGradients(grads)


# TensorFlow's tape sums a tensor's gradients early once more than this many
# have arrived and they hold over _EARLY_BYTES; doing the same keeps sums equal.
_EARLY_COUNT = 4
_EARLY_BYTES = 128 * 1024 * 1024


def _call_gradient(fn, op, fetch, values, skipped, out_grads, scope):
    """Calls ``op``'s gradient function on a view of it; returns its result and the view."""
    view = _ReplayOp(op, fetch, values)
    view.skip_input_indices = skipped or None
    with tf.name_scope(scope):
        return fn(view, *out_grads), view


_MISREAD: set[str] = set()


def _warn_misread(op: tf.Operation) -> None:
    if op.type not in _MISREAD:
        _MISREAD.add(op.type)
        warnings.warn(
            f"The gradient of {op.type} reads a value kswap expected it to read only the "
            f"shape of (op {op.name}); kswap reads it by value instead. Declare what it "
            "reads with kswap.layers.saved.register_gradient_reads.",
            stacklevel=2,
        )


#: ``(op, skipped inputs) -> (input indices, output indices)`` read by value.
ValueReads = Callable[[tf.Operation, frozenset], tuple[tuple[int, ...], tuple[int, ...]]]


def replay_gradients(
    ops: Sequence[tf.Operation],
    sources: Sequence[tf.Tensor],
    outputs: Sequence[tf.Tensor],
    upstream: Sequence[tf.Tensor | None],
    fetch: fetch_lib.Fetch,
    variable_reads: Sequence[Sequence[tf.Tensor]] = (),
    scopes: Mapping[str, str] | None = None,
    value_reads: ValueReads | None = None,
    calls: Mapping[tf.Operation, calls_lib.CallPlan] | None = None,
    custom: Mapping[tf.Operation, custom_lib.CustomGradient] | None = None,
    loops: Mapping[tf.Operation, loops_lib.LoopPlan] | None = None,
    per_use: bool = False,
) -> tuple[list, list]:
    """Builds the backward of recorded ops with TensorFlow's gradient functions.

    The ops are visited, and each tensor's gradients summed, in the order
    TensorFlow's gradient tape uses (a stack of ops whose outputs' gradients
    are complete), so the result equals the tape's bit for bit.

    Args:
        ops: The recorded ops (from :func:`plan_replay`), in creation order.
        sources: Tensors to return gradients for (the block's inputs).
        outputs: The block's outputs.
        upstream: Gradient of the loss for each output (None: no gradient).
        fetch: ``fetch(tensor, by_value)`` maps a forward tensor to the
            tensor the backward should use; ``by_value`` is False when the
            gradient function reads at most its shape.
        variable_reads: Per variable, the ``ReadVariableOp`` outputs of it.
        scopes: Forward name scope per op name (from :func:`record_ops`); each
            op's backward is built in ``gradient_tape/<scope>/`` like the tape's.
        value_reads: ``value_reads(op, skipped)``: the input and output
            indices whose values ``op``'s gradient reads when the inputs
            ``skipped`` need no gradient (see :func:`kswap.layers.saved.op_reads`).
            None: every value.
        calls: The plans of the ``tf.function`` calls among ``ops``, from
            :func:`kswap.layers.calls.prepare_call` (made while tracing the
            forward); their backward is TensorFlow's backward function.
        custom: The ``tf.custom_gradient`` ops among ``ops``, from
            :func:`kswap.layers.custom.custom_gradient_of`; their backward is
            the user's gradient function, given ``fetch``'s tensors.
        loops: The plans of the ``tf.while_loop`` ops among ``ops``, from
            :func:`kswap.layers.loops.prepare_loop`; their backward is
            TensorFlow's gradient loop, reading ``fetch``'s copies of the
            per-step values.
        per_use: Return each source's gradients unsummed, as the list of one
            gradient per use in arrival order (at most :func:`source_uses`
            of them), so that the caller's tape sums them in one ``AddN``
            with the source's gradients from outside the block, as it would
            without kswap.

    Returns:
        ``(source_grads, variable_grads)``, None where there is no gradient
        (with ``per_use``, each source's entry is a list, maybe empty).
    """
    # the tape records no op without a gradient function (StopGradient...)
    ops = [op for op in ops if _gradient_fn(op) is not None]
    producer = {t.ref(): op for op in ops for t in op.outputs}
    keep = {t.ref() for t in sources}
    keep.update(r.ref() for reads in variable_reads for r in reads)
    usage: dict = {}
    for op in ops:
        for t in op.inputs:
            usage[t.ref()] = usage.get(t.ref(), 0) + 1
    missing: dict = {}
    for ref in usage:
        if ref in producer:
            missing[producer[ref]] = missing.get(producer[ref], 0) + 1
    grads: dict = {}
    for t, g in zip(outputs, upstream, strict=True):
        if g is not None:
            grads.setdefault(t.ref(), []).append(g)
    stack = [op for op in ops if op not in missing]
    sources_refs = {t.ref() for t in sources}
    done: set = set()
    reached = {t.ref() for t in sources} | keep
    while stack:
        op = stack.pop()
        if op in done:
            continue
        done.add(op)
        inputs = list(op.inputs)  # a loop's gradient adds inputs to the op
        out_grads, any_grad = [], False
        for t in op.outputs:
            gs = grads.get(t.ref())
            if gs:
                any_grad = True
                out_grads.append(aggregate(gs))
                if t.ref() not in keep:
                    del grads[t.ref()]
            else:
                out_grads.append(None)
        in_grads = [None] * len(inputs)
        fn = _gradient_fn(op) if any_grad else None
        if fn is not None:
            skipped = tuple(
                i
                for i, t in enumerate(inputs)
                if t.ref() not in reached and t.ref() not in producer
            )
            values = value_reads(op, frozenset(skipped)) if value_reads else None
            scope = _tape_scope(op, scopes or {})
            call = (calls or {}).get(op)
            spec = (custom or {}).get(op)
            loop = (loops or {}).get(op)
            if loop is not None:
                out_grads = [
                    g if g is not None or not _differentiable(t) else fetch_lib.zeros(t, fetch)
                    for g, t in zip(out_grads, op.outputs, strict=True)
                ]
                with tf.name_scope(scope):
                    in_grads = loops_lib.loop_gradient(op, loop, fetch, out_grads, skipped)
            elif call is not None:
                with tf.name_scope(scope):
                    in_grads = calls_lib.call_gradient(op, call, fetch, out_grads[: call.outputs])
            elif spec is not None:
                with tf.name_scope(scope):
                    in_grads = custom_lib.call_custom_gradient(op, spec, fetch, out_grads)
            else:
                out_grads = [
                    g if g is not None or not _differentiable(t) else fetch_lib.zeros(t, fetch)
                    for g, t in zip(out_grads, op.outputs, strict=True)
                ]
                result, view = _call_gradient(fn, op, fetch, values, skipped, out_grads, scope)
                if view.misread():  # ``value_reads`` is wrong for this op: build it again
                    _warn_misread(op)
                    result, _ = _call_gradient(fn, op, fetch, None, skipped, out_grads, scope)
                result = list(result) if isinstance(result, (list, tuple)) else [result]
                in_grads = (result + [None] * len(inputs))[: len(inputs)]
        for t, g in zip(inputs, in_grads, strict=True):
            ref = t.ref()
            # a variable's handle (``ref in keep``) gets a called function's gradient
            if g is not None and (_carries_gradient(t) or ref in keep):
                pending = grads.setdefault(ref, [])
                pending.append(g)
                size = t.shape.num_elements() or 0
                if per_use and ref in sources_refs:
                    pass  # the caller's tape sums these early, if it must
                elif len(pending) > _EARLY_COUNT and len(pending) * size * 4 > _EARLY_BYTES:
                    grads[ref] = [aggregate(pending)]
            usage[ref] -= 1
            if usage[ref] == 0 and ref in producer:
                src = producer[ref]
                missing[src] -= 1
                if missing[src] == 0:
                    stack.insert(0, src)  # the tape queues ready ops first in, first out
    if per_use:
        source_grads = [list(grads.get(t.ref(), [])) for t in sources]
    else:
        source_grads = [aggregate(grads.get(t.ref(), [])) for t in sources]
    variable_grads = [
        aggregate([g for r in reads for g in grads.get(r.ref(), [])]) for reads in variable_reads
    ]
    return source_grads, variable_grads
