"""Exactness as measured, beyond the test models: five training steps through ``fit``.

For one model of each kind (keras.applications EfficientNetB0 and
MobileNetV3Small, a keras-hub GPT-2 backbone, an LSTM, Keras operations
between layers, ResNet V2's pre-activation residual blocks, and
tanh-approximated GELU in a model whose name sorts after ``gradient_tape``
and on a sequence) the offloaded model is trained next to the plain one from
the same seed: the outputs on a batch with ``training=False``, the loss of
each step and the weights after five steps must be equal bit for bit. Where
they are not, the deviation must stay within what TensorFlow itself makes of
a rewrite: the plain model trained again with Grappler's remapper off
(:mod:`tests.layers.exactness`). There is no floor: every model here trains
deterministically on CPU (the same model trained twice gives the same bits),
so on a model the remapper switch leaves bit-identical, any difference is
kswap's and the test fails. On TensorFlow's CPU build without oneDNN the
remapper's fusions here (``Conv2D`` or ``MatMul`` with ``BiasAdd``, and
``Relu``) round like the ops they replace, so the switch changes nothing on
any of these models. Known gaps are marked ``xfail(strict=True)`` with their
measured deviation, so that closing one turns its test red until the mark
goes. The models in ``DATASETS`` are trained from a ``tf.data`` pipeline too,
whose unknown batch dimension gives kswap's gradients dynamic shapes.
"""

import keras
import numpy as np
import pytest

from tests.layers.exactness import Deviation, deviation, train
from tests.layers.helpers import cpu_has_amx

STEPS = 5
VOCAB = 64


def _images(n, size, classes=5):
    rng = np.random.default_rng(0)
    return rng.random((n, size, size, 3), dtype=np.float32), rng.integers(0, classes, n)


def efficientnet_b0():
    # SGD, as where the gap was found: tracing Adam's update of its 213 variables
    # costs seconds; GPT-2 here and the models of tests/layers/test_exactness.py
    # train with Adam
    model = keras.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=5)
    model.compile(keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy")
    return model


def mobilenet_v3_small():
    model = keras.applications.MobileNetV3Small(weights=None, input_shape=(32, 32, 3), classes=5)
    model.compile(keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy")
    return model


def gpt2():
    keras_hub = pytest.importorskip("keras_hub")
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCAB,
        num_layers=2,
        num_heads=2,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=16,
    )
    logits = keras.layers.Dense(VOCAB, name="lm_head")(backbone.output)
    model = keras.Model(backbone.input, logits, name="gpt2_lm")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _tokens(n, length=16):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, (n, length)).astype("int32")
    x = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    return x, rng.integers(0, VOCAB, (n, length))


def lstm():
    model = keras.Sequential(
        [
            keras.Input((32,), dtype="int32"),
            keras.layers.Embedding(VOCAB, 32, name="embed"),
            keras.layers.LSTM(64, return_sequences=True, name="lstm"),
            keras.layers.GlobalAveragePooling1D(name="pool"),
            keras.layers.Dense(5, activation="softmax", name="out"),
        ],
        name="recurrent",
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


def _sequences(n):
    rng = np.random.default_rng(0)
    return rng.integers(0, VOCAB, (n, 32)).astype("int32"), rng.integers(0, 5, n)


def keras_ops():
    """Keras operations between layers: hard swish and a gate written as arithmetic."""
    inp = keras.Input((16, 16, 3))
    h = keras.layers.Conv2D(16, 3, padding="same", name="c1")(inp)
    h = h * keras.layers.ReLU(6.0, name="relu6")(h + 3.0) * (1.0 / 6.0)
    h = keras.layers.DepthwiseConv2D(3, padding="same", name="dw")(h)
    gate = keras.layers.GlobalAveragePooling2D(keepdims=True, name="squeeze")(h)
    gate = keras.layers.Conv2D(16, 1, activation="sigmoid", name="excite")(gate)
    h = keras.ops.tanh(h * gate) - 0.5 * h
    h = keras.layers.Conv2D(8, 1, name="c2")(h)
    h = keras.layers.GlobalAveragePooling2D(name="pool")(h)
    out = keras.layers.Dense(5, name="out")(h / 4.0 + 1.0)
    model = keras.Model(inp, out, name="keras_ops")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def squeeze_excite():
    """MobileNetV3's squeeze-and-excite block on a 1x1 map (its last blocks at 32x32).

    Hard swish, a gate ``relu6(x + 3) / 6`` and the product of the two, whose
    inputs (8 x 576 floats) are large enough to be offloaded. The backward of
    each product by ``1 / 6`` is reassociated by Grappler according to the
    names of its factors and to the control edges on its nodes.
    """
    inp = keras.Input((1, 1, 576))
    h = keras.layers.Conv2D(576, 1, name="expand")(inp)
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.Activation("hard_swish", name="hs")(h)
    s = keras.layers.GlobalAveragePooling2D(keepdims=True, name="squeeze")(h)
    s = keras.layers.Conv2D(144, 1, activation="relu", name="excite")(s)
    s = keras.layers.Conv2D(576, 1, name="excite_1")(s)
    s = keras.layers.ReLU(6.0, name="relu6")(s + 3.0) * (1.0 / 6.0)
    h = keras.layers.Multiply(name="mul")([h, s])
    h = keras.layers.Conv2D(96, 1, name="project")(h)
    h = keras.layers.BatchNormalization(name="project_bn")(h)
    out = keras.layers.Dense(5, name="out")(keras.layers.Flatten(name="flat")(h))
    model = keras.Model(inp, out, name="se")
    model.compile(
        keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def preact_residual():
    """ResNet V2's pre-activation blocks: a block's output feeds the next Add and BN.

    Without kswap the tape sums that tensor's four gradients in one ``AddN``:
    the residual's, then the three of the BatchNormalization that reads it
    (its product, mean and variance). kswap's BN block passes its input once
    per use and returns one gradient per use, so that the sum is the same.
    """
    inp = keras.Input((8, 8, 8))
    x = keras.layers.Conv2D(16, 3, padding="same", name="stem")(inp)
    for i in range(3):
        p = keras.layers.BatchNormalization(name=f"b{i}_preact_bn")(x)
        p = keras.layers.Activation("relu", name=f"b{i}_preact_relu")(p)
        h = keras.layers.Conv2D(16, 3, padding="same", name=f"b{i}_conv")(p)
        x = keras.layers.Add(name=f"b{i}_add")([x, h])
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    out = keras.layers.Dense(5, name="out")(x)
    model = keras.Model(inp, out, name="preact")
    model.compile(
        keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def conv3d():
    """Conv3D with ReLU, then a max pool of 2x2x2 windows: ties of the maximum in a window.

    TensorFlow's own ``MaxPool3DGrad`` on a CPU hands a window's gradient to
    every input equal to its maximum; oneDNN, which pairs the pool with its
    gradient where it runs, to one of them.
    """
    model = keras.Sequential(
        [
            keras.Input((8, 16, 16, 1)),
            keras.layers.Conv3D(8, 3, activation="relu", padding="same", name="c1"),
            keras.layers.MaxPooling3D(2, name="pool"),
            keras.layers.Conv3D(16, 3, activation="relu", padding="same", name="c2"),
            keras.layers.GlobalAveragePooling3D(name="gap"),
            keras.layers.Dense(5, name="out"),
        ],
        name="conv3d",
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _volumes(n):
    rng = np.random.default_rng(0)
    return rng.random((n, 8, 16, 16, 1), dtype=np.float32), rng.integers(0, 5, n)


def _small_maps(n):
    rng = np.random.default_rng(0)
    return rng.random((n, 8, 8, 8), dtype=np.float32), rng.integers(0, 5, n)


def _maps(n):
    rng = np.random.default_rng(0)
    return rng.random((n, 1, 1, 576), dtype=np.float32), rng.integers(0, 5, n)


def gelu_late_name():
    """Tanh-approximated GELU (``x ** 3``) in a model whose scope sorts after ``gradient_tape``."""
    inp = keras.Input((32,))
    h = keras.layers.Dense(256, activation=_gelu_tanh, name="d1")(inp)
    out = keras.layers.Dense(5, name="out")(h)
    model = keras.Model(inp, out, name="zeta")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _gelu_tanh(x):
    return keras.activations.gelu(x, approximate=True)


def gelu_tokens():
    """Tanh-approximated GELU on a sequence: its gradients reduce broadcasts of a dynamic shape."""
    inp = keras.Input((8, 16))
    h = keras.layers.Dense(32, activation=_gelu_tanh, name="d1")(inp)
    out = keras.layers.Dense(5, name="out")(h)
    model = keras.Model(inp, out, name="gelu_tokens")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class _GeluFeedForward(keras.layers.Layer):
    """A feed-forward block as keras-hub's Gemma writes it: tanh GELU between two projections."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.up = keras.layers.Dense(128, use_bias=False, name="up")
        self.down = keras.layers.Dense(64, use_bias=False, name="down")

    def build(self, input_shape):
        self.up.build(input_shape)
        self.down.build((*input_shape[:-1], 128))

    def call(self, x):
        return self.down(keras.activations.gelu(self.up(x), approximate=True))


def gelu_in_block():
    """Tanh-approximated GELU inside one layer, its output read by the layer's next op.

    Grappler merges the forward's square of the GELU's input with the
    gradient's only where the gradient reads the same tensor and its power
    has no control edge (see ``kswap.layers.saved.inputs_read_in_place`` and
    ``kswap.layers.chain``); the merged node's name orders the forward's product.
    """
    inp = keras.Input((16, 64))
    h = keras.layers.Dense(64, name="proj")(inp)
    h = _GeluFeedForward(name="ffw")(h)
    out = keras.layers.Dense(5, name="out")(h)
    model = keras.Model(inp, out, name="gelu_in_block")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _feature_sequences(n):
    rng = np.random.default_rng(0)
    return rng.random((n, 16, 64), dtype=np.float32), rng.integers(0, 5, (n, 16))


def _token_vectors(n):
    rng = np.random.default_rng(0)
    return rng.random((n, 8, 16), dtype=np.float32), rng.integers(0, 5, (n, 8))


def _vectors(n):
    rng = np.random.default_rng(0)
    return rng.random((n, 32), dtype=np.float32), rng.integers(0, 5, n)


#: name -> (builder, data, batch size)
MODELS = {
    "efficientnet_b0": (efficientnet_b0, lambda n: _images(n, 32), 4),
    "mobilenet_v3_small": (mobilenet_v3_small, lambda n: _images(n, 32), 4),
    "gpt2": (gpt2, _tokens, 4),
    "lstm": (lstm, _sequences, 4),
    "keras_ops": (keras_ops, lambda n: _images(n, 16), 4),
    "gelu_late_name": (gelu_late_name, _vectors, 32),
    "gelu_tokens": (gelu_tokens, _token_vectors, 4),
    "squeeze_excite": (squeeze_excite, _maps, 8),
    "preact_residual": (preact_residual, _small_maps, 8),
    "squeeze_excite_mul_only": (squeeze_excite, _maps, 8),
    "conv3d": (conv3d, _volumes, 8),
    "gelu_in_block": (gelu_in_block, _feature_sequences, 8),
}

#: What is offloaded where not every layer is (``kswap.OffloadingModel``'s ``policy``):
#: the product alone, so that its backward reads the copies of both factors while
#: the tape differentiates the ops around it.
POLICIES = {"squeeze_excite_mul_only": ["mul"]}

#: Models trained from a ``tf.data`` pipeline as well (an unknown batch dimension:
#: kswap's gradients then read dynamic shapes, which TensorFlow's constant folding
#: and arithmetic optimizer handle differently from static ones).
DATASETS = {
    "gpt2",
    "gelu_tokens",
    "squeeze_excite",
    "squeeze_excite_mul_only",
    "preact_residual",
}

#: Measured gaps (name -> reason), each a strict xfail. On each the remapper switch changes
#: nothing (every deviation 0), so the bound is zero.
GAPS: dict[str, str] = {}


#: Gaps measured on CPUs with AMX only (name -> reason), each a strict xfail there.
AMX_GAPS: dict[str, str] = {
    "squeeze_excite": (
        "on a CPU with AMX, weights 1.6e-8 apart after 5 SGD steps (with numpy arrays the "
        "first step's gamma gradient of `bn` differs in the last bit) while the remapper "
        "switch changes nothing; the ops Grappler leaves and the ops that run are the plain "
        "model's. Without kswap's control edges inside the block's backward, the numpy "
        "variant is bit-identical there but the tf.data one still differs"
    ),
}

#: Models on which no wrapped layer may fall back to recomputation (EfficientNetB0:
#: swish is a tf.custom_gradient, replayed with its own gradient function).
NO_FALLBACKS = {"efficientnet_b0", "mobilenet_v3_small"}

#: Models whose three trainings take seconds each (tracing their training step).
SLOW = {"efficientnet_b0", "mobilenet_v3_small", "gpt2"}


def _params():
    for name in MODELS:
        for dataset in (False, True) if name in DATASETS else (False,):
            marks = [pytest.mark.xfail(strict=True, reason=GAPS[name])] if name in GAPS else []
            if name in AMX_GAPS and cpu_has_amx():
                marks.append(pytest.mark.xfail(strict=True, reason=AMX_GAPS[name]))
            marks += [pytest.mark.slow] if name in SLOW else []
            case = name + ("-dataset" if dataset else "")
            yield pytest.param(name, dataset, marks=marks, id=case)


@pytest.mark.filterwarnings("ignore:kswap cannot replay:UserWarning")
@pytest.mark.parametrize("name,dataset", list(_params()))
def test_offloaded_training_within_what_the_remapper_changes(name, dataset):
    build, make_data, batch = MODELS[name]
    x, y = make_data(batch * STEPS)
    plain = train(build, x, y, batch, dataset=dataset)
    off = train(build, x, y, batch, offload=True, dataset=dataset, policy=POLICIES.get(name, "all"))
    assert len(off.losses) == len(plain.losses) == STEPS
    if name in NO_FALLBACKS:
        assert not off.fallbacks, off.fallbacks
    found = deviation(off, plain)
    if found.within(Deviation(0.0, 0.0, 0.0, 0.0)):
        return  # bit-identical
    bound = deviation(train(build, x, y, batch, remapping=False, dataset=dataset), plain)
    assert found.within(bound), (
        f"{name}: kswap deviates from the plain model by [{found}]; "
        f"switching the remapper off deviates by [{bound}]"
    )
