"""Replaying a ``tf.custom_gradient`` used inside a layer.

Inside ``tf.function`` a ``tf.custom_gradient`` function (Keras's ``silu`` /
``swish`` activation is TensorFlow's ``tf.nn.silu``, which has one) shows up
in the layer's graph as its forward ops followed by an ``IdentityN`` op whose
gradient is the user's gradient function, registered under the op's
``_gradient_op_type`` attribute. That function does not read the op's
inputs: it reads the tensors its Python closure holds (for ``silu``, its
input ``features``).

To replay it with kswap's copies, :func:`custom_gradient_of` finds those
tensors while the forward is traced (so they can be sent to host memory), and
:func:`call_custom_gradient` calls TensorFlow's own gradient function with the
closure's tensors replaced, for the call, by the copies brought back. The
forward ops inside the custom gradient get no backward, exactly as with
TensorFlow's tape, so the gradients are bit-identical and none of those ops'
values need to wait for backward.

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.custom import call_custom_gradient, custom_gradient_of
    >>> @tf.function
    ... def grad_of_silu(x):
    ...     y = tf.nn.silu(x)
    ...     spec = custom_gradient_of(y.op)   # IdentityN(result, features, beta)
    ...     grads = call_custom_gradient(y.op, spec, lambda t, _: t, [tf.ones_like(y), None, None])
    ...     return grads[1]                   # the gradient of ``features``
    >>> round(float(grad_of_silu(tf.constant(0.0))), 3)
    0.5
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from kswap.layers import fetch as fetch_lib

__all__ = ["CustomGradient", "custom_gradient_of", "call_custom_gradient"]


@dataclasses.dataclass(frozen=True)
class CustomGradient:
    """What replaying one ``tf.custom_gradient`` needs.

    Attributes:
        function: The gradient function registered for the ``IdentityN`` op.
        results: How many of the op's outputs are the custom function's
            results (the rest pass its inputs and variables through).
        reads: The forward tensors the user's gradient function holds in its
            closure: what backward reads.
    """

    function: Callable
    results: int
    reads: tuple[tf.Tensor, ...]
    _cells: tuple = ()  # (cell, index in a list or None, tensor)


def _cell(fn, name: str):
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__:
        return None
    for var, cell in zip(code.co_freevars, fn.__closure__, strict=True):
        if var == name:
            return cell
    return None


def custom_gradient_of(op: tf.Operation) -> CustomGradient | None:
    """The custom gradient of a ``tf.custom_gradient``'s ``IdentityN`` op, if ``op`` is one."""
    if op.type != "IdentityN":
        return None
    try:
        name = op.get_attr("_gradient_op_type")
    except ValueError:
        return None
    try:
        function = tf_ops._gradient_registry.lookup(
            name.decode() if isinstance(name, bytes) else name
        )
    except LookupError:
        return None
    tape_cell = _cell(function, "tape_grad_fn")
    tape_grad_fn = tape_cell.cell_contents if tape_cell is not None else None
    grad_cell = _cell(tape_grad_fn, "grad_fn") if tape_grad_fn is not None else None
    count_cell = _cell(tape_grad_fn, "flat_result_len") if tape_grad_fn is not None else None
    if grad_cell is None or count_cell is None:
        return None  # a TensorFlow whose custom_gradient is built otherwise
    grad_fn = grad_cell.cell_contents
    cells = []
    for var, cell in zip(grad_fn.__code__.co_freevars, grad_fn.__closure__ or (), strict=True):
        del var
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, tf.Tensor) and not isinstance(value, tf.Variable):
            cells.append((cell, None, value))
        elif isinstance(value, (list, tuple)):
            cells += [(cell, i, v) for i, v in enumerate(value) if isinstance(v, tf.Tensor)]
    reads = tuple({t.ref(): t for _, _, t in cells}.values())
    return CustomGradient(function, int(count_cell.cell_contents), reads, tuple(cells))


def call_custom_gradient(
    op,
    spec: CustomGradient,
    fetch: fetch_lib.Fetch,
    out_grads: Sequence,
) -> list:
    """Calls the custom gradient with its closure's tensors replaced by ``fetch``'s.

    Args:
        op: The ``IdentityN`` op (or kswap's view of it).
        spec: What :func:`custom_gradient_of` returned for it.
        fetch: ``fetch(tensor, by_value)``: the tensor the backward should use.
        out_grads: One gradient per output of the op (None: no gradient).
            Results without one get zeros, as TensorFlow's tape gives them;
            pass-through outputs are not read.

    Returns:
        One gradient per input of the op.
    """
    grads = list(out_grads)
    for i in range(spec.results):
        if grads[i] is None:
            grads[i] = fetch_lib.zeros(op.outputs[i], fetch)
    saved = []
    for cell, index, tensor in spec._cells:
        saved.append((cell, cell.cell_contents))
        replacement = fetch(tensor, True)
        if index is None:
            cell.cell_contents = replacement
        else:
            value = list(cell.cell_contents)
            value[index] = replacement
            cell.cell_contents = type(saved[-1][1])(value)
    try:
        result = spec.function(op, *grads)
    finally:
        for cell, value in reversed(saved):
            cell.cell_contents = value
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    return (result + [None] * len(op.inputs))[: len(op.inputs)]
