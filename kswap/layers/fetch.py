"""The ``fetch`` callback through which a replayed backward reads forward tensors.

A replayed backward (:mod:`kswap.layers.replay`, and for called functions and
custom gradients :mod:`kswap.layers.calls`, :mod:`kswap.layers.custom`) never
touches a forward tensor itself: it asks ``fetch(tensor, by_value)`` for the
tensor to use instead. With ``by_value=True`` the backward reads the values
(kswap's copy brought back from the host); with ``by_value=False`` it needs
only the shape (the tensor itself when its shape is static, else a stand-in
of the same shape).

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.fetch import zeros
    >>> zeros(tf.ones((2, 3)), lambda t, by_value: t).shape
    TensorShape([2, 3])
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

__all__ = ["Fetch", "zeros"]

#: ``fetch(tensor, by_value) -> tensor``: what the backward uses for ``tensor``.
Fetch = Callable[[tf.Tensor, bool], tf.Tensor]


def zeros(t: tf.Tensor, fetch: Fetch) -> tf.Tensor:
    """Zeros shaped like ``t``: the gradient of an output nothing reads.

    A static shape gives a constant; otherwise the shape is read from
    ``fetch(t, False)``, so the forward tensor is not kept for it. A variant
    (``TensorList``) gets TensorFlow's ``zeros_like`` of it.
    """
    if t.dtype == tf.variant:
        return tf.zeros_like(fetch(t, False))
    if t.shape.is_fully_defined():
        return tf.zeros(t.shape, t.dtype)
    return tf.zeros(tf.shape(fetch(t, False)), t.dtype)
