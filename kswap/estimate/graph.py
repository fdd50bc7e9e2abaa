"""A model's forward step as a TensorFlow graph, cut into kswap's blocks.

:func:`trace_step` builds the model's training-mode forward pass for a given
batch size as a graph (traced, never run: no memory is allocated) and records
which ops each block made. A block is what kswap would wrap: every Keras
layer called in the model, models nested in it (Sequential or functional,
keras_hub backbones) recursed into the way :func:`kswap.OffloadingModel`
recurses, a layer called twice giving two blocks. Keras operations called
between layers (``x + y``, indexing a dict output) are blocks too, marked
``wrapped=False``: kswap leaves them to TensorFlow, so they can be neither
swapped nor recomputed, but what their backward reads is on the device all
the same.

Example:
    >>> import keras
    >>> from kswap.estimate.graph import trace_step
    >>> inputs = keras.Input((8,))
    >>> hidden = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="out")(hidden) + 1.0)
    >>> step = trace_step(model, batch_size=4)
    >>> [(b.name, b.kind, b.wrapped) for b in step.blocks[:2]]
    [('hidden', 'dense', True), ('out', 'dense', True)]
    >>> step.blocks[2].kind, step.blocks[2].wrapped   # ``+ 1.0``: a Keras operation
    ('op', False)
    >>> [tuple(t.shape) for t in step.blocks[0].outputs]
    [(4, 16)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf
from keras.src.models.functional import Functional
from keras.src.models.functional import operation_fn as _keras_operation_fn

__all__ = ["TracedBlock", "TracedStep", "kind_of", "trace_step", "input_specs"]


@dataclasses.dataclass
class TracedBlock:
    """One block of the traced forward pass.

    Attributes:
        name: The block's name: the Keras layer's name (``name_2`` for its
            second call; ``outer/name`` if a nested model's layer has the
            name of another block).
        kind: What it is (see :func:`kind_of`).
        ops: The graph ops its forward made, in creation order.
        inputs: The tensors passed to it (flattened, tensors only).
        outputs: The tensors it returned (flattened).
        wrapped: Whether kswap wraps it (a Keras layer) or leaves it to
            TensorFlow (a Keras operation that is not a layer).
        layer: The Keras layer or operation.
    """

    name: str
    kind: str
    ops: list[tf.Operation]
    inputs: list[tf.Tensor]
    outputs: list[tf.Tensor]
    wrapped: bool
    layer: Any = dataclasses.field(repr=False, default=None)


@dataclasses.dataclass
class TracedStep:
    """The traced forward pass: its blocks in forward order, inputs and outputs."""

    blocks: list[TracedBlock]
    inputs: list[tf.Tensor]
    outputs: list[tf.Tensor]
    graph: tf.Graph = dataclasses.field(repr=False)
    function: Any = dataclasses.field(repr=False, default=None)  # keeps the graph alive


_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("MultiHeadAttention", "GroupQueryAttention", "Attention", "CachedMulti")),
    ("conv", ("Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose",
              "Conv3DTranspose", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D",
              "SeparableConv2D")),
    ("dense", ("Dense", "EinsumDense")),
    ("norm", ("BatchNormalization", "LayerNormalization", "GroupNormalization",
              "UnitNormalization", "RMSNormalization", "SpectralNormalization")),
    ("pool", ("MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D",
              "AveragePooling2D", "AveragePooling3D", "GlobalAveragePooling1D",
              "GlobalAveragePooling2D", "GlobalAveragePooling3D", "GlobalMaxPooling1D",
              "GlobalMaxPooling2D", "GlobalMaxPooling3D")),
    ("activation", ("Activation", "ReLU", "LeakyReLU", "ELU", "PReLU", "Softmax")),
    ("dropout", ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                 "GaussianDropout", "AlphaDropout", "GaussianNoise")),
    ("merge", ("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum",
               "Concatenate", "Dot")),
    ("embedding", ("Embedding", "TokenAndPositionEmbedding", "PositionEmbedding",
                   "ReversibleEmbedding")),
    ("recurrent", ("RNN", "LSTM", "GRU", "SimpleRNN", "Bidirectional", "ConvLSTM1D",
                   "ConvLSTM2D", "ConvLSTM3D")),
    ("reshape", ("Reshape", "Flatten", "Permute", "RepeatVector", "ZeroPadding1D",
                 "ZeroPadding2D", "ZeroPadding3D", "Cropping1D", "Cropping2D", "Cropping3D",
                 "UpSampling1D", "UpSampling2D", "UpSampling3D", "Rescaling", "Normalization")),
)  # fmt: skip


def kind_of(operation: Any) -> str:
    """The block kind of a Keras layer or operation, from its class and bases.

    ``"conv"``, ``"dense"``, ``"norm"``, ``"pool"``, ``"activation"``,
    ``"attention"``, ``"dropout"``, ``"merge"``, ``"embedding"``,
    ``"recurrent"``, ``"reshape"``; ``"op"`` for a Keras operation that is
    not a layer; ``"other"`` for any other layer (custom layers, transformer
    blocks). A subclass gets its base's kind.
    """
    if not isinstance(operation, keras.layers.Layer):
        return "op"
    names = {c.__name__ for c in type(operation).__mro__}
    for kind, classes in _KINDS:
        if names.intersection(classes):
            return kind
    return "other"


def _is_graph_model(layer: Any) -> bool:
    return isinstance(layer, (keras.Sequential, Functional))


def input_specs(
    model: keras.Model, batch_size: int, input_shape: Any = None
) -> list[tf.TensorSpec]:
    """One fully known ``tf.TensorSpec`` per model input, the batch dimension ``batch_size``.

    Args:
        model: A built Keras model.
        batch_size: Samples per step.
        input_shape: Shapes without the batch dimension for inputs whose
            other dimensions are unknown (``None``): one shape, or one per
            input (a list in ``model.inputs`` order, or a dict by input name).

    Raises:
        ValueError: naming the input, if a dimension stays unknown.
    """
    inputs = list(getattr(model, "inputs", None) or [])
    if not inputs:
        raise ValueError(
            "`model` must be built, with known inputs (a functional or Sequential model "
            f"with an Input). Received: model={model.name!r} without inputs"
        )
    shapes: list[Any] = [None] * len(inputs)
    if isinstance(input_shape, dict):
        names = [getattr(t, "name", "").split(":")[0] for t in inputs]
        for key, shape in input_shape.items():
            if key not in names:
                raise ValueError(
                    f"`input_shape` names an input the model lacks. Inputs: {names}. "
                    f"Received: input_shape={input_shape!r}"
                )
            shapes[names.index(key)] = shape
    elif input_shape is not None:
        nested = isinstance(input_shape, Sequence) and any(
            isinstance(s, Sequence) for s in input_shape
        )
        shapes = list(input_shape) if nested else [input_shape] * len(inputs)
        if len(shapes) != len(inputs):
            raise ValueError(
                f"`input_shape` must give one shape per model input ({len(inputs)}). "
                f"Received: input_shape={input_shape!r}"
            )
    specs = []
    for t, given in zip(inputs, shapes, strict=True):
        known = tuple(t.shape[1:])
        if given is not None:
            given = tuple(int(d) for d in given)
            if len(given) != len(known) or any(
                k is not None and k != g for k, g in zip(known, given, strict=True)
            ):
                raise ValueError(
                    f"`input_shape` {given} does not match the model's input "
                    f"{getattr(t, 'name', '')!r} of shape {tuple(t.shape)}. "
                    f"Received: input_shape={input_shape!r}"
                )
            known = given
        if any(d is None for d in known):
            raise ValueError(
                f"The model's input {getattr(t, 'name', '')!r} has unknown dimensions "
                f"{tuple(t.shape)}: pass `input_shape` (without the batch dimension). "
                f"Received: input_shape={input_shape!r}"
            )
        specs.append(tf.TensorSpec((batch_size, *known), t.dtype))
    return specs


def _tensors(structure: Any) -> list[tf.Tensor]:
    return [t for t in keras.tree.flatten(structure) if isinstance(t, tf.Tensor)]


class _Recorder:
    def __init__(self) -> None:
        self.blocks: list[TracedBlock] = []
        self.calls: dict[str, int] = {}

    def name(self, operation: Any, path: str) -> str:
        base = operation.name
        taken = {b.name for b in self.blocks}
        if base in taken and path and self.calls.get(base, 0) == 0:
            base = f"{path}/{base}"
        count = self.calls.get(base, 0) + 1
        self.calls[base] = count
        return base if count == 1 else f"{base}_{count}"

    def run(self, model: Any, inputs: list, path: str) -> Any:
        graph_model = model._functional if isinstance(model, keras.Sequential) else model
        if graph_model is None:  # a Sequential without an Input: its layers in order
            x = inputs[0] if len(inputs) == 1 else inputs
            for layer in model.layers:
                x = self.call(layer, path, (x,), {})
            return x
        here = f"{path}/{model.name}" if path else model.name

        def operation_fn(operation: Any):
            return lambda *args, **kwargs: self.call(operation, here, args, kwargs)

        return graph_model._run_through_graph(inputs, operation_fn=operation_fn)

    def call(self, operation: Any, path: str, args: tuple, kwargs: dict) -> Any:
        if _is_graph_model(operation):
            structure = args[0] if len(args) == 1 else list(args)
            if isinstance(operation, Functional):
                structure = operation._standardize_inputs(structure)
            return self.run(operation, keras.tree.flatten(structure), path)
        graph = tf.compat.v1.get_default_graph()
        start = len(graph.get_operations())
        outputs = _keras_operation_fn(operation, training=True)(*args, **kwargs)
        self.blocks.append(
            TracedBlock(
                name=self.name(operation, path),
                kind=kind_of(operation),
                ops=list(graph.get_operations()[start:]),
                inputs=_tensors((args, kwargs)),
                outputs=_tensors(outputs),
                wrapped=isinstance(operation, keras.layers.Layer)
                and not isinstance(operation, keras.layers.InputLayer),
                layer=operation,
            )
        )
        return outputs


def trace_step(model: keras.Model, batch_size: int, input_shape: Any = None) -> TracedStep:
    """Traces ``model``'s training-mode forward pass at ``batch_size`` into blocks.

    Args:
        model: A built Sequential or functional Keras model.
        batch_size: Samples per step.
        input_shape: Shapes for inputs with unknown dimensions (see :func:`input_specs`).

    Returns:
        A :class:`TracedStep`. Nothing is run: the graph only has shapes.
    """
    specs = input_specs(model, batch_size, input_shape)
    recorder = _Recorder()
    captured: dict[str, list] = {}

    def forward(*xs):
        captured["inputs"] = list(xs)
        outputs = recorder.run(model, list(xs), "")
        captured["outputs"] = _tensors(outputs)
        return captured["outputs"]

    function = tf.function(forward, autograph=False).get_concrete_function(*specs)
    return TracedStep(
        blocks=recorder.blocks,
        inputs=captured["inputs"],
        outputs=captured["outputs"],
        graph=function.graph,
        function=function,
    )
