"""The tensors of a wrapped layer's call: which are the offloaded block's inputs.

An offloaded call is one ``tf.custom_gradient`` block (:mod:`kswap.layers.offload`)
whose inputs are every tensor the layer is called with, wherever it is passed
(:func:`call_arguments`), so each gets its gradient. Composite float values
(ragged, sparse) cannot be block inputs (:func:`hidden_float_values`: such a
call is not offloaded). Keras's annotations of the layer's outputs (logits,
masks) are carried over to the block's (:func:`keep_keras_attributes`).

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.arguments import call_arguments
    >>> tensors, rebuild = call_arguments(tf.ones((2, 3)), (), {"mask": tf.ones((2,)), "n": 4})
    >>> [tuple(t.shape) for t in tensors], rebuild([1, 2])
    ([(2, 3), (2,)], (1, [], {'mask': 2, 'n': 4}))
"""

from __future__ import annotations

import keras
import tensorflow as tf

__all__ = ["call_arguments", "hidden_float_values", "keep_keras_attributes"]


def call_arguments(inputs, args, kwargs):
    """The tensors of a call, and how to call the layer with others in their place.

    Every tensor the layer is called with is a block input, wherever it is
    passed (``MultiHeadAttention()(q, v)``, DeBERTa's ``rel_embeddings=``),
    so each gets its gradient. In the first argument anything with a dtype
    (numpy arrays) is converted, as Keras does; elsewhere only tensors are, so
    that Python and numpy values stay what the layer expects.

    Returns:
        ``(tensors, call)``: ``call(ts)`` calls the layer with ``ts`` in the
        place of ``tensors``.
    """
    structure = (inputs, list(args), dict(kwargs))
    flat = list(keras.tree.flatten(structure))
    first = len(keras.tree.flatten(inputs))
    is_tensor = [
        isinstance(t, tf.Tensor)
        or (i < first and (isinstance(t, tf.Variable) or hasattr(t, "dtype")))
        for i, t in enumerate(flat)
    ]
    tensors = [tf.convert_to_tensor(t) for t, ok in zip(flat, is_tensor, strict=True) if ok]

    def rebuild(ts):
        it = iter(ts)
        return keras.tree.pack_sequence_as(
            structure, [next(it) if ok else t for t, ok in zip(flat, is_tensor, strict=True)]
        )

    return tensors, rebuild


def hidden_float_values(args, kwargs) -> bool:
    """Whether composite float values (ragged, sparse) are passed besides the inputs.

    Tensors passed any way are block inputs (:func:`call_arguments`) and get
    their gradients; composite values are not, and would get none.
    """
    for t in keras.tree.flatten((list(args), kwargs)):
        if isinstance(t, tf.__internal__.CompositeTensor) and not isinstance(
            t, (tf.Variable, keras.Variable)
        ):
            dtype = getattr(t, "dtype", None)
            if dtype is not None and (dtype.is_floating or dtype.is_complex):
                return True
    return False


def keep_keras_attributes(new, inner) -> None:
    """Carries Keras's tensor annotations over to the block's outputs.

    ``_keras_logits`` (set by softmax and sigmoid) lets the loss start from the
    logits, as it does without kswap; that part of the graph is then
    differentiated by TensorFlow directly. ``_keras_mask`` carries masks.
    """
    for name in ("_keras_logits", "_keras_mask"):
        value = getattr(inner, name, None)
        if value is not None:
            try:
                setattr(new, name, value)
            except AttributeError:
                pass
