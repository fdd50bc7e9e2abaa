"""FLOPs and memory traffic of graph ops, and their roofline time on a device.

Each op of a traced forward pass (see :mod:`kswap.estimate.graph`) costs
``flops`` floating-point operations (a multiply-add is two) and moves
``bytes`` to and from memory (its inputs read once, its outputs written
once). On a :class:`~kswap.planning.Device` it takes the roofline time
``max(flops / peak, bytes / bandwidth)``, the peak being the Tensor Core rate
for 16-bit floats on a device that has one and the FP32 rate otherwise.

The formulas, from the ops' static shapes:

- ``Conv2D``/``Conv3D``: ``2 * prod(output) * prod(kernel window) * in_channels / groups``;
  ``DepthwiseConv2dNative``: ``2 * prod(output) * prod(kernel window)``;
  ``Conv2DBackpropInput`` (a transposed convolution's forward):
  ``2 * prod(its input) * prod(kernel window) * out_channels``.
- ``MatMul``, ``BatchMatMul*``: ``2 * prod(output) * k``; ``Einsum``:
  ``2 * the product of every index's size``.
- ``MaxPool``/``AvgPool``: ``prod(output) * prod(window)``; reductions:
  ``prod(input)``; ``Softmax``: ``5 * prod``; other elementwise ops:
  ``prod(largest output)``.
- Ops that only change a tensor's view (``Reshape``, ``Identity``,
  ``ReadVariableOp``, ``Shape``...) cost nothing.

A backward costs, per op, the forward's FLOPs once for each input whose
gradient is needed (a convolution with a trainable kernel and an input that
needs its gradient: twice) and moves what the gradient reads, the incoming
gradients and the gradients it makes.

Example:
    >>> import tensorflow as tf
    >>> from kswap.estimate.flops import op_cost
    >>> @tf.function(autograph=False)
    ... def f(x, k):
    ...     return tf.nn.conv2d(x, k, strides=1, padding="SAME")
    >>> x, k = tf.TensorSpec((8, 32, 32, 3)), tf.TensorSpec((3, 3, 3, 16))
    >>> g = f.get_concrete_function(x, k).graph
    >>> cost = op_cost(next(op for op in g.get_operations() if op.type == "Conv2D"))
    >>> cost.flops == 2 * (8 * 32 * 32 * 16) * (3 * 3 * 3)   # 2 * outputs * window * channels
    True
    >>> cost.bytes == (8 * 32 * 32 * 3 + 3 * 3 * 3 * 16 + 8 * 32 * 32 * 16) * 4
    True
"""

from __future__ import annotations

import dataclasses
import math
import re

import tensorflow as tf

from kswap.planning.devices import Device

__all__ = ["OpCost", "op_cost", "tensor_bytes", "roofline_seconds", "FREE_OPS", "LINEAR_OPS"]

#: Op types that cost neither FLOPs nor memory traffic (views, metadata, variables).
FREE_OPS = frozenset(
    {
        "Const", "Placeholder", "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims",
        "Shape", "ShapeN", "Size", "Rank", "ReadVariableOp", "VarHandleOp", "NoOp",
        "StopGradient", "PreventGradient", "AssignVariableOp", "AssignAddVariableOp",
        "AssignSubVariableOp", "BroadcastGradientArgs", "Fill", "ZerosLike", "OnesLike",
        "Range", "Pack", "Unpack", "ConcatOffset", "EnsureShape", "Snapshot",
    }
)  # fmt: skip

#: Op types whose FLOPs are products of two operands (their backward costs once per operand).
LINEAR_OPS = frozenset(
    {
        "Conv2D", "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput",
        "Conv3DBackpropInputV2", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
        "Einsum", "_FusedConv2D", "_FusedMatMul",
    }
)  # fmt: skip

_MOVE_OPS = frozenset(
    {"Transpose", "Pad", "PadV2", "MirrorPad", "ConcatV2", "Tile", "Slice", "StridedSlice",
     "GatherV2", "ResourceGather", "Split", "SplitV", "BroadcastTo", "Cast", "ReverseV2"}
)  # fmt: skip
_REDUCTIONS = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin"})
_POOLS = frozenset({"MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D", "MaxPoolV2"})


@dataclasses.dataclass(frozen=True)
class OpCost:
    """What one op costs: FLOPs, bytes moved, and the dtype its FLOPs run in."""

    flops: float
    bytes: int
    dtype: str = "float32"


def _size(shape) -> int:
    dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
    if dims is None or any(d is None for d in dims):
        return 0
    return math.prod(dims)


def tensor_bytes(t: tf.Tensor) -> int:
    """Bytes of a tensor with a fully known static shape (0 if unknown, resource or variant)."""
    if t.dtype in (tf.resource, tf.variant, tf.string) or t.shape.rank is None:
        return 0
    return _size(t.shape) * t.dtype.size


def _attr(op: tf.Operation, name: str, default=None):
    try:
        return op.get_attr(name)
    except (ValueError, TypeError):
        return default


def _einsum_flops(op: tf.Operation) -> float:
    equation = _attr(op, "equation", b"")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    lhs = equation.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for labels, t in zip(lhs, op.inputs, strict=False):
        dims = t.shape.as_list() if t.shape.rank is not None else []
        labels = re.sub(r"\.\.\.", "", labels)
        ellipsis = len(dims) - len(labels)
        for i, label in enumerate(labels):
            d = dims[i + ellipsis] if 0 <= i + ellipsis < len(dims) else None
            if d is not None:
                sizes[label] = max(sizes.get(label, 1), d)
        if ellipsis > 0:
            sizes["..."] = max(sizes.get("...", 1), math.prod(d or 1 for d in dims[:ellipsis]))
    return 2.0 * math.prod(sizes.values()) if sizes else 0.0


def _flops(op: tf.Operation) -> float:
    kind = op.type
    out = _size(op.outputs[0].shape) if op.outputs else 0
    if kind in ("Conv2D", "Conv3D", "_FusedConv2D"):
        k = op.inputs[1].shape.as_list()  # [*window, in_channels / groups, out_channels]
        return 2.0 * out * math.prod(k[:-1])
    if kind == "DepthwiseConv2dNative":
        k = op.inputs[1].shape.as_list()  # [kh, kw, in_channels, multiplier]
        return 2.0 * out * math.prod(k[:-2])
    if kind in ("Conv2DBackpropInput", "Conv3DBackpropInputV2"):
        k = op.inputs[1].shape.as_list()  # [*window, out_channels, in_channels]
        return 2.0 * _size(op.inputs[2].shape) * math.prod(k[:-1])
    if kind in ("MatMul", "_FusedMatMul"):
        a = op.inputs[0].shape.as_list()
        k = a[0] if _attr(op, "transpose_a", False) else a[-1]
        return 2.0 * out * (k or 0)
    if kind.startswith("BatchMatMul"):
        a = op.inputs[0].shape.as_list()
        k = a[-2] if _attr(op, "adj_x", False) else a[-1]
        return 2.0 * out * (k or 0)
    if kind == "Einsum":
        return _einsum_flops(op)
    if kind in _POOLS:
        window = _attr(op, "ksize", None) or [1]
        return float(out * math.prod(window))
    if kind in _REDUCTIONS:
        return float(_size(op.inputs[0].shape)) if op.inputs else 0.0
    if kind in ("Softmax", "LogSoftmax"):
        return 5.0 * out
    if kind in _MOVE_OPS:
        return 0.0
    return float(max((_size(t.shape) for t in op.outputs), default=0))


def op_cost(op: tf.Operation) -> OpCost:
    """FLOPs and bytes moved of one forward op (see the module docstring)."""
    if op.type in FREE_OPS or not op.outputs:
        return OpCost(0.0, 0)
    moved = sum(tensor_bytes(t) for t in op.inputs) + sum(tensor_bytes(t) for t in op.outputs)
    dtype = op.outputs[0].dtype.name
    return OpCost(_flops(op), moved, dtype)


def roofline_seconds(flops: float, nbytes: float, device: Device, dtype: str = "float32") -> float:
    """``max(flops / peak, bytes / bandwidth)`` on ``device``.

    The peak is the Tensor Core rate for float16 and bfloat16 where the
    device has one, the FP32 rate otherwise.

    >>> from kswap.planning import Device
    >>> k40 = Device.preset("k40")
    >>> roofline_seconds(4.29e12, 1, k40), roofline_seconds(0, 288e9, k40)
    (1.0, 1.0)
    """
    peak = device.fp32_flops
    if dtype in ("float16", "bfloat16") and device.tensor_flops:
        peak = device.tensor_flops
    return max(flops / peak, nbytes / device.memory_bytes_per_s)
