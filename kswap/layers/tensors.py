"""What the offloading wrappers read off a graph tensor, shared by the schedule and chains.

The tensor behind ops that hand their input on as it is (:func:`canonical`:
one host copy per buffer, whatever ``Identity`` ops sit in between), the
tensors of a gradient of any kind (:func:`dense_parts`) and a tensor's bytes
with the unknown batch dimension counted as 1 (:func:`nominal_bytes`).

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.tensors import canonical, dense_parts, nominal_bytes
    >>> g = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([0, 2]), tf.constant([4, 3]))
    >>> [tuple(t.shape) for t in dense_parts([tf.ones([3]), g, None])]
    [(3,), (2, 3), (2,)]
    >>> nominal_bytes(tf.ones([2, 3]))
    24
    >>> with tf.Graph().as_default():
    ...     x = tf.ones([2], name="x")
    ...     canonical(tf.identity(tf.identity(x))).name
    'x:0'
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["PASS_THROUGH", "canonical", "dense_parts", "nominal_bytes"]


#: Ops that hand their input on as it is.
PASS_THROUGH = frozenset({"Identity", "IdentityN"})


def canonical(t: tf.Tensor) -> tf.Tensor:
    """Sees through Identity ops, which share their input's buffer."""
    while t.op.type in PASS_THROUGH:
        index = t.value_index if t.op.type == "IdentityN" else 0
        t = t.op.inputs[index]
    return t


def dense_parts(grads) -> list[tf.Tensor]:
    """The tensors of gradients of any kind: dense, ``tf.IndexedSlices`` or None."""
    parts = []
    for g in grads:
        if isinstance(g, tf.IndexedSlices):
            parts += [g.values, g.indices]
        elif g is not None:
            parts.append(g)
    return parts


def nominal_bytes(t: tf.Tensor) -> int:
    """``t``'s bytes, counting unknown dimensions (the batch) as 1."""
    if t.shape.rank is None:
        return 0
    n = 1
    for d in t.shape:
        n *= d if d is not None else 1
    return n * t.dtype.size
