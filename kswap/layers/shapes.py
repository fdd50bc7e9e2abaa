"""Where a tensor's dynamic shape can be read at run time without breaking Grappler's rewrites.

A gradient that reads only the shape of a tensor whose shape is not static
gets a stand-in of that shape instead (:meth:`kswap.layers.schedule.GraphState.stand_in`),
so the tensor may be freed in forward. The shape must then be read from
somewhere: :func:`shape_chain` walks up the elementwise producers that have
the tensor's shape at run time, so it can be read from one that has a host
copy, or from the last of them (:func:`shape_source`), rather than from an
intermediate that Grappler or the remapper would otherwise rewrite or fuse.

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.shapes import shape_chain, shape_source
    >>> with tf.Graph().as_default():
    ...     x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    ...     y = 2.0 * (x + x**3)
    ...     print(shape_source(y).name, len(shape_chain(y)))
    x:0 3
"""

from __future__ import annotations

import tensorflow as tf

from kswap.layers.tensors import canonical

__all__ = ["FUSES_WITH_CONSUMERS", "shape_chain", "shape_source"]


#: Ops whose output has the shape of their inputs broadcast together.
_ELEMENTWISE = frozenset(
    {
        "Abs", "Cast", "Cos", "Elu", "Erf", "Exp", "Expm1", "Floor", "LeakyRelu", "Log",
        "Log1p", "Neg", "Reciprocal", "Relu", "Relu6", "Round", "Rsqrt", "Selu", "Sigmoid",
        "Sign", "Sin", "Softplus", "Softsign", "Sqrt", "Square", "Tanh", "Softmax",
        "LogSoftmax", "Add", "AddV2", "Sub", "Mul", "RealDiv", "DivNoNan", "Maximum",
        "Minimum", "Pow", "SquaredDifference", "AddN", "SelectV2", "StopGradient",
        "Snapshot",
    }
)  # fmt: skip


#: Ops the remapper fuses with the elementwise ops that read their output (a bias, an
#: activation): a shape is never read from their output, which would stop the fusion.
FUSES_WITH_CONSUMERS = frozenset(
    {
        "Conv2D", "Conv3D", "DepthwiseConv2dNative", "MatMul", "BatchMatMulV2",
        "BatchMatMulV3", "FusedBatchNormV3", "_FusedConv2D", "_FusedMatMul",
    }
)  # fmt: skip


def shape_source(t: tf.Tensor) -> tf.Tensor:
    """The tensor up ``t``'s elementwise producers that has ``t``'s shape at run time.

    Through an elementwise op whose inputs of unknown shape all come from one
    source and have the output's static shape, and whose other inputs only
    broadcast along dimensions of size 1 or ones known to be equal (a scalar
    constant, a bias): ``c * (x + x ** 3)`` has the shape of ``x``.
    """
    return shape_chain(t)[-1]


def shape_chain(t: tf.Tensor) -> list[tf.Tensor]:
    """``t`` and the producers :func:`shape_source` walks through, ``t`` first.

    Every one has ``t``'s shape at run time; the last is ``shape_source(t)``.
    The walk stops below the output of an op in :data:`FUSES_WITH_CONSUMERS`.
    """
    chain = [t]
    while True:
        op = t.op
        if op.type not in _ELEMENTWISE and not (
            op.type == "BiasAdd" and op.get_attr("data_format") in (b"NHWC", "NHWC")
        ):
            return chain
        dims = t.shape.as_list() if t.shape.rank is not None else None
        if dims is None:
            return chain
        dynamic = [x for x in op.inputs if not x.shape.is_fully_defined()]
        static = [x for x in op.inputs if x.shape.is_fully_defined()]
        if not dynamic or any(x.shape.rank is None or x.shape.as_list() != dims for x in dynamic):
            return chain
        for x in static:
            sdims = x.shape.as_list()
            if len(sdims) > len(dims):
                return chain
            aligned = dims[len(dims) - len(sdims) :]
            if any(s != 1 and (d is None or s != d) for s, d in zip(sdims, aligned, strict=True)):
                return chain
        sources = {canonical(shape_source(canonical(x))).ref() for x in dynamic}
        if len(sources) != 1:
            return chain
        t = canonical(dynamic[0])
        if t.op.type in FUSES_WITH_CONSUMERS:
            return chain
        chain.append(t)
