"""Which tensors an op's gradient reads, so forward knows what to offload.

A gradient function reads some of its op's inputs and outputs as values
(``MatMul`` reads both inputs, ``Relu`` its output, ``BiasAdd`` nothing). Only
those need a host copy; the rest are needed at most for their shape (a
static shape is a constant; an unknown one is served by a stand-in). An op
type missing from :data:`GRADIENT_READS` is assumed to read everything, which
is always correct and only costs transfers.

This table decides memory, never correctness: the backward asks for every
tensor it reads through :func:`kswap.layers.replay.replay_gradients`; a
tensor that has no host copy is then used from the device (and reported),
and a gradient that uses a shape stand-in for more than its shape is built
again from the real tensors (with a warning).

Example:
    >>> from kswap.layers.saved import reads
    >>> reads("MatMul", 2, 1), reads("Relu", 1, 1), reads("Unknown", 1, 1)
    (((0, 1), ()), ((), (0,)), ((0,), (0,)))
"""

from __future__ import annotations

__all__ = [
    "GRADIENT_READS",
    "reads",
    "op_reads",
    "inputs_read_in_place",
    "outputs_read_in_place",
    "register_gradient_reads",
]

_NONE: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
_IN0 = ((0,), ())
_IN01 = ((0, 1), ())
_OUT0 = ((), (0,))

#: op type -> (input indices, output indices) its gradient function reads.
GRADIENT_READS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    # linear algebra and convolutions: both operands
    "MatMul": _IN01,
    "BatchMatMul": _IN01,
    "BatchMatMulV2": _IN01,
    "BatchMatMulV3": _IN01,
    "Einsum": ((0, 1), ()),
    "Conv2D": _IN01,
    "Conv3D": _IN01,
    "DepthwiseConv2dNative": _IN01,
    "Conv2DBackpropInput": ((1, 2), ()),
    "Conv3DBackpropInputV2": ((1, 2), ()),
    # shape-only gradients
    "BiasAdd": _NONE,
    "BiasAddV1": _NONE,
    "Add": _NONE,
    "AddV2": _NONE,
    "Sub": _NONE,
    "AddN": _NONE,
    "Neg": _NONE,
    "Identity": _NONE,
    "ReadVariableOp": _NONE,
    "IdentityN": _NONE,
    "Reshape": _NONE,
    "Squeeze": _NONE,
    "ExpandDims": _NONE,
    "Transpose": ((1,), ()),
    "Cast": _NONE,
    "Pad": ((1,), ()),
    "PadV2": ((1,), ()),
    "MirrorPad": ((1,), ()),
    "Tile": ((1,), ()),
    "BroadcastTo": ((1,), ()),
    "ConcatV2": ((-1,), ()),
    "Slice": ((1, 2), ()),
    "StridedSlice": ((1, 2, 3), ()),
    "Sum": ((1,), ()),
    "Mean": ((1,), ()),
    "Shape": _NONE,
    "StopGradient": _NONE,
    "PreventGradient": _NONE,
    "ReverseV2": ((1,), ()),
    # TensorArrays (recurrent layers' input and output sequences)
    "TensorListFromTensor": _NONE,
    "TensorListStack": _NONE,
    # activations that read their output
    "Relu": _OUT0,
    "Relu6": _OUT0,
    "Elu": _OUT0,
    "Selu": _OUT0,
    "Sigmoid": _OUT0,
    "Tanh": _OUT0,
    "Softmax": _OUT0,
    "LogSoftmax": _OUT0,
    "Exp": _OUT0,
    "Sqrt": _OUT0,
    "Rsqrt": _OUT0,
    "Reciprocal": _OUT0,
    # activations and elementwise ops that read their input(s)
    "LeakyRelu": _IN0,
    "Softplus": _IN0,
    "Softsign": _IN0,
    "Square": _IN0,
    "Log": _IN0,
    "Erf": _IN0,
    "Abs": _IN0,
    "Mul": _IN01,
    "RealDiv": _IN01,
    "DivNoNan": _IN01,
    "Maximum": _IN01,
    "Minimum": _IN01,
    "SquaredDifference": _IN01,
    "Pow": ((0, 1), (0,)),
    "SelectV2": ((0,), ()),
    # pooling
    "MaxPool": ((0,), (0,)),
    "MaxPoolV2": ((0, 1, 2), (0,)),
    "MaxPool3D": ((0,), (0,)),
    "AvgPool": _NONE,
    "AvgPool3D": _NONE,
    "Max": ((0, 1), (0,)),
    "Min": ((0, 1), (0,)),
}


def reads(
    op_type: str,
    num_inputs: int,
    num_outputs: int,
    *,
    skipped: frozenset[int] = frozenset(),
    scalars: frozenset[int] = frozenset(),
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Input and output indices an op type's gradient reads (all if unknown).

    Args:
        op_type: The op's type.
        num_inputs: Its number of inputs.
        num_outputs: Its number of outputs.
        skipped: Inputs whose gradient nobody needs (TensorFlow passes them
            to the gradient function as ``skip_input_indices``).
        scalars: Inputs of rank 0.

    ``x * c`` with a constant scalar ``c`` (Dropout's scale, a loss weight)
    reads only ``c``, as TensorFlow's ``Mul`` gradient then computes
    ``grad * c`` alone:

    >>> reads("Mul", 2, 1), reads("Mul", 2, 1, skipped=frozenset({1}), scalars=frozenset({1}))
    (((0, 1), ()), ((1,), ()))
    """
    if op_type == "Mul" and 1 in skipped and 1 in scalars:
        return (1,), ()
    if op_type == "Mul" and 0 in skipped and 0 in scalars:
        return (0,), ()  # ``c * x``: the gradient of x is ``c * grad``; none is made for c
    if op_type == "Pow" and 1 in skipped:
        return (0, 1), ()  # ``x ** c``: ``grad * c * x ** (c - 1)``, the output is not read
    entry = GRADIENT_READS.get(op_type)
    if entry is None:
        return tuple(range(num_inputs)), tuple(range(num_outputs))
    ins = tuple(sorted({i % num_inputs for i in entry[0]})) if num_inputs else ()
    outs = tuple(i for i in entry[1] if i < num_outputs)
    return ins, outs


def op_reads(op, skipped: frozenset[int] = frozenset()) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """:func:`reads` for a graph op whose inputs ``skipped`` need no gradient."""
    return reads(
        op.type,
        len(op.inputs),
        len(op.outputs),
        skipped=skipped,
        scalars=frozenset(i for i, t in enumerate(op.inputs) if t.shape.rank == 0),
    )


def register_gradient_reads(
    op_type: str, inputs: tuple[int, ...], outputs: tuple[int, ...]
) -> None:
    """Declares which inputs/outputs the gradient of a custom op type reads."""
    GRADIENT_READS[op_type] = (tuple(inputs), tuple(outputs))


def outputs_read_in_place(op) -> tuple[int, ...]:
    """Outputs of ``op`` whose gradient must read the op's own tensor, not a copy.

    Where TensorFlow runs oneDNN, its layout pass pairs a ``MaxPool`` (or
    ``MaxPool3D``) with the gradient that reads the pool's output: the
    forward saves where the maxima are and the backward reads that. A
    gradient that reads a copy of the output is not paired, and TensorFlow's
    own kernel runs instead:

    - ``MaxPoolGrad`` adds overlapping windows' gradients in another order
      (NASNetLarge's 3x3, stride-2 pools: gradients about 1e-7 apart). For
      windows that do not overlap both give each window's gradient to the
      same input, so only overlapping 2-D pools keep their output.
    - ``MaxPool3DGrad`` gives a window's gradient to every input equal to its
      maximum, oneDNN to one of them, so every 3-D max pool keeps its output
      (a Conv3D-ReLU-MaxPooling3D model's first kernel gradient 6e-5 apart
      after one step otherwise).
    """
    from kswap import transfer  # TensorFlow's; this table needs none

    if not transfer.onednn_enabled():
        return ()
    if op.type == "MaxPool3D":
        return (0,)
    if op.type != "MaxPool":
        return ()
    ksize, strides = op.get_attr("ksize"), op.get_attr("strides")
    return (0,) if any(k > s for k, s in zip(ksize, strides, strict=True)) else ()


def inputs_read_in_place(op) -> tuple[int, ...]:
    """Inputs of ``op`` whose gradient must read the op's own tensor, not a copy.

    ``x ** 3`` (tanh GELU's): Grappler rewrites the forward into
    ``x * square(x)`` (``<scope>/ArithmeticOptimizer/ConvertPow__inner_<name>``)
    and, where the gradient's ``x ** 2`` squares the same ``x``, merges the two
    squares into the gradient's node (``gradient_tape/<op>/Pow``). The forward
    product then sorts its inputs by name before constant folding regroups it
    with GELU's coefficient. A gradient that reads a copy of ``x`` leaves the
    forward its own square; where that name sorts on the other side of ``x``
    than the merged one does, the product is rounded otherwise (keras-hub's
    Gemma: weights 2.0e-7 apart after 5 Adam steps). Only there ``x`` is read
    on the device; elsewhere (GPT-2's GELU) its copy is.
    """
    if op.type != "Pow" or len(op.inputs) != 2 or op.inputs[1].op.type != "Const":
        return ()
    from tensorflow.python.framework import tensor_util  # TensorFlow's; the table needs none

    exponent = tensor_util.MakeNdarray(op.inputs[1].op.get_attr("value"))
    if exponent.size != 1 or float(exponent.reshape(-1)[0]) != 3.0:
        return ()
    x = op.inputs[0]
    x_name = x.op.name if x.value_index == 0 else f"{x.op.name}:{x.value_index}"
    scope, _, base = op.name.rpartition("/")
    own = f"{scope}/ArithmeticOptimizer/ConvertPow__inner_{base}" if scope else base
    merged = f"gradient_tape/{op.name}/Pow"
    return (0,) if (x_name < own) != (x_name < merged) else ()
