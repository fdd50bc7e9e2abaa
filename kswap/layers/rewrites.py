"""Which ops a control edge may touch without changing Grappler's rewrites.

kswap orders ops with control edges (:mod:`kswap.layers.chain`,
:mod:`kswap.layers.schedule`), which must leave values as they were. Grappler
rewrites some ops only where no node involved has a control input or output:
it reassociates a product or sum with a constant, folds the reductions of a
broadcast gradient and the shapes they read, and merges a power with another.
With a control edge these are rounded differently from the tape's own graph,
so :func:`chainable` says which ops to leave out.

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.rewrites import chainable
    >>> with tf.Graph().as_default():
    ...     dy, x = tf.ones([2, 2]), tf.ones([2, 2])
    ...     scaled, product = (dy * x) / 6.0, tf.matmul(dy, x)
    ...     print(chainable(scaled.op), chainable(product.op))
    False True
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["chainable"]


def chainable(op: tf.Operation, *, arithmetic: bool = True) -> bool:
    """Whether a control edge into or out of ``op`` leaves Grappler's rewrites as they were.

    Not for a product or sum with a constant that Grappler may reassociate, a
    reduction it may fold, or an op that reads only a shape (see
    :func:`_reassociable`, :func:`_foldable` and :data:`_SHAPES`): with a
    control edge they are rewritten differently from the tape's own graph.
    With ``arithmetic=False``, no product, quotient or sum at all: a control
    edge out of MobileNetV3Small's BatchNormalization scale gradient (a
    ``Mul`` of no constant) changed its rounding. Nor a power
    (:func:`_merged_power`).
    """
    if not arithmetic and op.type in _ASSOCIATIVE:
        return False
    return not (_reassociable(op) or _foldable(op) or op.type in _SHAPES or _merged_power(op))


def _merged_power(op: tf.Operation) -> bool:
    """Whether ``op`` is a power, which Grappler may merge with another.

    Grappler rewrites the forward's ``x ** 3`` (tanh GELU's) into
    ``x * square(x)`` and merges that square with the gradient's
    ``x ** (3 - 1)`` (its exponent folded to a constant) where both read the
    same ``x`` and neither has a control input; the merged node's name then
    decides the order of the forward's product
    (:func:`kswap.layers.saved.inputs_read_in_place`). A control edge into the
    gradient's power keeps the two apart: a layer with tanh GELU between two
    projections on a sequence, whose backward kswap orders, was 1.5e-8 apart
    after 5 Adam steps with one.
    """
    return op.type == "Pow"


# Grappler reassociates a product or sum with a constant (``(dy * x) / 6`` into
# ``(x / 6) * dy`` or ``(dy / 6) * x``, ConstantFolding then ArithmeticOptimizer)
# only where no node of it has a control input or output; with one, it is rounded
# differently from the tape's.
_ASSOCIATIVE = {
    "Mul": "mul", "RealDiv": "mul", "Div": "mul",
    "Add": "add", "AddV2": "add", "Sub": "add",
}  # fmt: skip


def _with_constant(op: tf.Operation) -> bool:
    return op.type in _ASSOCIATIVE and any(t.op.type == "Const" for t in op.inputs)


def _reassociable(op: tf.Operation) -> bool:
    """Whether ``op`` is in a product or sum with a constant that Grappler may reassociate.

    That is ``c * child`` with ``child`` an op of the same kind, that child, or
    an op of the same kind that reads ``c * child``: a power's gradient
    ``((c * dy) * 3) * x ** 2`` is regrouped as a whole (tanh GELU's ``x ** 3``
    on a sequence from ``tf.data``: with a control edge into the outer product,
    the constants were multiplied into ``dy`` instead of into ``x ** 2``, and the
    weights were 9.6e-11 apart after 5 Adam steps).
    Consumers are counted before Grappler prunes the gradients nobody needs
    (TensorFlow's ``RealDiv`` gradient makes both), so more are taken than
    Grappler will reassociate.
    """
    kind = _ASSOCIATIVE.get(op.type)
    if kind is None:
        return False
    children = [_unfolded(t).op for t in op.inputs]
    if _with_constant(op) and any(_ASSOCIATIVE.get(c.type) == kind for c in children):
        return True
    if any(_ASSOCIATIVE.get(c.type) == kind and _with_constant(c) for c in children):
        return True
    return any(_ASSOCIATIVE.get(c.type) == kind and _with_constant(c) for c in _consumers(op))


def _unfolded(t: tf.Tensor) -> tf.Tensor:
    """``t`` before the reductions Grappler drops (:func:`_foldable`)."""
    while _foldable(t.op):
        t = t.op.inputs[0]
    return t


def _consumers(op: tf.Operation) -> list[tf.Operation]:
    """The ops that read ``op``'s outputs, seen through the reductions Grappler drops."""
    found, stack, seen = [], [c for t in op.outputs for c in t.consumers()], set()
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        if _foldable(c):
            stack.extend(d for t in c.outputs for d in t.consumers())
        else:
            found.append(c)
    return found


#: Ops that read only their input's shape. Where Grappler folds the shape into a
#: constant it moves the op's control inputs to the readers of the constant (the
#: reductions of :func:`_foldable`, and after those are dropped, the product
#: they were part of), which then is not reassociated as without kswap.
_SHAPES = frozenset({"Shape", "ShapeN", "Size", "Rank"})


def _foldable(op: tf.Operation) -> bool:
    """Whether ``op`` reduces a broadcast gradient back to its input's shape.

    A binary op's gradient sums over the dimensions ``BroadcastGradientArgs``
    finds and reshapes the sum to ``tf.shape`` of the input. Where Grappler
    proves the shapes equal (an unknown batch dimension from one source) it
    drops both, and then reorders the sum of the gradients by their names as
    without kswap, but it keeps a ``Reshape`` that has a control input.
    """
    if op.type == "Reshape":
        return op.inputs[1].op.type in ("Shape", "ShapeN")
    if op.type == "Sum":
        return op.inputs[1].op.type == "BroadcastGradientArgs"
    return False
