"""The model zoo of ``benchmarks/zoo.py``: name -> how to build the model and its data.

    >>> from zoo_models import CATALOGUE, build, make_data
    >>> entry = CATALOGUE["lstm"]
    >>> model = build(entry)           # compiled, from the current seed
    >>> x, y = make_data(entry, model, samples=8)

Groups:

- ``applications``: every ``keras.applications`` constructor (found at import),
  ``weights=None``, ``include_top=True``, 10 classes, at the smallest square
  input it accepts (``MIN_SIZE``, 32 unless listed).
- ``hub``: keras-hub backbones built from small configs (no preset, no
  weights, no download) under a small head, called as a nested model as
  keras-hub's own task models call them: text encoders and vision backbones
  with a classifier head, decoders with a next-token head.
- ``recurrent``: LSTM, GRU, SimpleRNN, Bidirectional, ConvLSTM2D and
  TimeDistributed models.
- ``custom``: Conv3D, a small U-Net, a registered custom layer, Keras ops
  between layers, a nested model's dict output.

Every model is compiled with Adam and a plain loss; data are random (token ids
for text models), from a ``numpy.random.Generator`` seeded by the caller.
``Entry.dataset`` says whether ``zoo.py`` trains it from a ``tf.data`` pipeline
(batch dimension unknown in the traced step) instead of arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import keras
import numpy as np

__all__ = ["Entry", "CATALOGUE", "GROUPS", "MIN_SIZE", "build", "make_data", "select"]

#: Smallest square input (pixels) of the keras.applications models that need
#: more than 32 with ``include_top=True``, ``weights=None``.
MIN_SIZE = {
    "InceptionResNetV2": 75,
    "InceptionV3": 75,
    "Xception": 71,
}

#: keras.applications models trained from ``tf.data`` instead of arrays.
APPLICATIONS_ON_DATASETS = {"MobileNetV2", "ResNet50", "DenseNet121", "EfficientNetB0"}

VOCAB = 1000
SEQ = 32
CLASSES = 10


@dataclasses.dataclass(frozen=True)
class Entry:
    """One zoo model.

    Attributes:
        name: Catalogue key.
        group: ``applications``, ``hub``, ``recurrent`` or ``custom``.
        build: Returns the uncompiled model (random weights from the current seed).
        inputs: ``model -> rng -> samples -> x``: random inputs.
        targets: ``model -> rng -> samples -> y``: random targets.
        loss: Keras loss name.
        dataset: Train from a ``tf.data.Dataset`` (unknown batch dimension).
        batch: Samples per step.
        note: What the model is, in a few words (the table's "model" column).
    """

    name: str
    group: str
    build: Callable[[], keras.Model]
    inputs: Callable
    targets: Callable
    loss: str = "sparse_categorical_crossentropy"
    dataset: bool = False
    batch: int = 8
    note: str = ""


def build(entry: Entry, optimizer: str = "adam") -> keras.Model:
    """The entry's model, compiled (weights from the current random seed)."""
    model = entry.build()
    model.compile(optimizer=optimizer, loss=entry.loss)
    return model


def make_data(entry: Entry, model: keras.Model, samples: int, seed: int = 0):
    """Random ``(x, y)`` for ``model``, ``samples`` of each."""
    rng = np.random.default_rng(seed)
    return entry.inputs(model, rng, samples), entry.targets(model, rng, samples)


# ---------------------------------------------------------------- data makers


def images(model, rng, n):
    """Floats in [0, 1) shaped like each input (dicts and lists kept)."""
    inputs = [rng.random((n, *t.shape[1:]), dtype=np.float32) for t in model.inputs]
    return inputs[0] if len(inputs) == 1 else inputs


def class_ids(model, rng, n):
    return rng.integers(0, CLASSES, size=(n,))


def pixel_classes(model, rng, n):
    shape = model.outputs[0].shape
    return rng.integers(0, shape[-1], size=(n, *shape[1:-1]))


def tokens(model, rng, n):
    return rng.integers(1, VOCAB, size=(n, SEQ)).astype("int32")


def text_inputs(model, rng, n):
    """keras-hub's dict of ``token_ids``, ``padding_mask`` (all ones), ``segment_ids``."""
    out = {}
    for name in model.input:
        if name == "token_ids":
            out[name] = tokens(model, rng, n)
        elif name == "padding_mask":
            out[name] = np.ones((n, SEQ), "int32")
        else:  # segment_ids
            out[name] = np.zeros((n, SEQ), "int32")
    return out


def next_tokens(model, rng, n):
    return tokens(model, rng, n)


# ---------------------------------------------------------------- keras.applications


def _application(name: str) -> Callable[[], keras.Model]:
    size = MIN_SIZE.get(name, 32)

    def make():
        factory = getattr(keras.applications, name)
        return factory(weights=None, input_shape=(size, size, 3), classes=CLASSES)

    return make


def _applications() -> dict[str, Entry]:
    names = sorted(
        n
        for n in dir(keras.applications)
        if n[:1].isupper() and callable(getattr(keras.applications, n))
    )
    return {
        n: Entry(
            n,
            "applications",
            _application(n),
            images,
            class_ids,
            dataset=n in APPLICATIONS_ON_DATASETS,
            note=f"{MIN_SIZE.get(n, 32)}x{MIN_SIZE.get(n, 32)}",
        )
        for n in names
    }


# ---------------------------------------------------------------- keras-hub


def _hub(cls: str, **config):
    import keras_hub

    return getattr(keras_hub.models, cls)(**config)


def _classifier(backbone) -> keras.Model:
    """The backbone nested under a mean-pool and softmax head."""
    inputs = backbone.input
    out = backbone(inputs)
    if isinstance(out, dict):
        out = out["pooled_output"] if "pooled_output" in out else out["sequence_output"]
    if len(out.shape) == 3:
        out = keras.layers.GlobalAveragePooling1D(name="pool")(out)
    elif len(out.shape) == 4:
        out = keras.layers.GlobalAveragePooling2D(name="pool")(out)
    out = keras.layers.Dense(CLASSES, activation="softmax", name="head")(out)
    return keras.Model(inputs, out, name=f"{backbone.name}_classifier")


def _next_token(backbone) -> keras.Model:
    """The backbone nested under a per-token softmax over the vocabulary."""
    inputs = backbone.input
    out = backbone(inputs)
    if isinstance(out, dict):
        out = out["sequence_output"]
    out = keras.layers.Dense(VOCAB, activation="softmax", name="lm_head")(out)
    return keras.Model(inputs, out, name=f"{backbone.name}_lm")


_TEXT = dict(vocabulary_size=VOCAB, num_layers=2, hidden_dim=64, intermediate_dim=128)
#: The text backbones' config where they take ``num_heads``.
_TEXT_HEADS = dict(_TEXT, num_heads=2, max_sequence_length=64)

_HUB: dict[str, tuple[str, str, dict, str]] = {
    # name: (class, head, config, what)
    "hub_bert": (
        "BertBackbone",
        "classifier",
        _TEXT_HEADS,
        "text encoder",
    ),
    "hub_distilbert": (
        "DistilBertBackbone",
        "classifier",
        _TEXT_HEADS,
        "text encoder",
    ),
    "hub_roberta": (
        "RobertaBackbone",
        "classifier",
        _TEXT_HEADS,
        "text encoder",
    ),
    "hub_albert": (
        "AlbertBackbone",
        "classifier",
        dict(_TEXT, num_heads=2, embedding_dim=32, max_sequence_length=64),
        "text encoder, shared layers",
    ),
    "hub_deberta_v3": (
        "DebertaV3Backbone",
        "classifier",
        dict(_TEXT, num_heads=2, max_sequence_length=64, bucket_size=16),
        "text encoder, relative attention",
    ),
    "hub_fnet": (
        "FNetBackbone",
        "classifier",
        dict(_TEXT, max_sequence_length=64),
        "text encoder, Fourier mixing",
    ),
    "hub_gpt2": (
        "GPT2Backbone",
        "next_token",
        _TEXT_HEADS,
        "text decoder",
    ),
    "hub_opt": (
        "OPTBackbone",
        "next_token",
        _TEXT_HEADS,
        "text decoder",
    ),
    "hub_llama": (
        "LlamaBackbone",
        "next_token",
        dict(_TEXT, num_query_heads=4, num_key_value_heads=2),
        "text decoder, GQA, RoPE",
    ),
    "hub_gemma": (
        "GemmaBackbone",
        "next_token",
        dict(_TEXT, num_query_heads=4, num_key_value_heads=2, head_dim=16),
        "text decoder, GQA",
    ),
    "hub_vit": (
        "ViTBackbone",
        "classifier",
        dict(
            image_shape=(64, 64, 3),
            patch_size=8,
            num_layers=4,
            num_heads=2,
            hidden_dim=64,
            mlp_dim=128,
        ),
        "vision transformer 64x64, patch 8",
    ),
    "hub_deit": (
        "DeiTBackbone",
        "classifier",
        dict(
            image_shape=(64, 64, 3),
            patch_size=8,
            num_layers=4,
            num_heads=2,
            hidden_dim=64,
            intermediate_dim=128,
        ),
        "vision transformer 64x64, patch 8",
    ),
    "hub_resnet": (
        "ResNetBackbone",
        "classifier",
        dict(
            input_conv_filters=[16],
            input_conv_kernel_sizes=[3],
            stackwise_num_filters=[64, 64],
            stackwise_num_blocks=[1, 1],
            stackwise_num_strides=[1, 2],
            block_type="bottleneck_block",
            image_shape=(64, 64, 3),
        ),
        "CNN 64x64, bottlenecks",
    ),
    "hub_mit": (
        "MiTBackbone",
        "classifier",
        dict(
            layerwise_depths=[1, 1],
            num_layers=2,
            layerwise_num_heads=[1, 2],
            layerwise_sr_ratios=[4, 2],
            max_drop_path_rate=0.1,
            layerwise_patch_sizes=[7, 3],
            layerwise_strides=[4, 2],
            hidden_dims=[16, 32],
            image_shape=(64, 64, 3),
        ),
        "mix transformer 64x64",
    ),
    "hub_cspnet": (
        "CSPNetBackbone",
        "classifier",
        dict(
            stem_filters=16,
            stem_kernel_size=3,
            stem_strides=2,
            stackwise_depth=[1, 1],
            stackwise_strides=[1, 2],
            stackwise_num_filters=[32, 64],
            block_type="dark_block",
            stage_type="dark",
            image_shape=(64, 64, 3),
        ),
        "CSPNet, DarkNet stages, 64x64",
    ),
    "hub_swin": (
        "SwinTransformerBackbone",
        "classifier",
        dict(
            image_shape=(64, 64, 3),
            embed_dim=32,
            depths=[2, 2],
            num_heads=[2, 4],
            window_size=4,
            patch_size=4,
        ),
        "Swin transformer 64x64",
    ),
}

_HUB_ON_DATASETS = {"hub_bert", "hub_gpt2", "hub_vit"}


def _hub_entry(name: str, cls: str, head: str, config: dict, what: str) -> Entry:
    vision = "image_shape" in config

    def make():
        backbone = _hub(cls, **config)
        return _classifier(backbone) if head == "classifier" else _next_token(backbone)

    return Entry(
        name,
        "hub",
        make,
        images if vision else text_inputs,
        next_tokens if head == "next_token" else class_ids,
        dataset=name in _HUB_ON_DATASETS,
        note=f"keras_hub.models.{cls}: {what}",
    )


# ---------------------------------------------------------------- recurrent


def _sequential(*layers, name):
    return keras.Sequential(list(layers), name=name)


def _text_rnn(rnn, name):
    def make():
        return _sequential(
            keras.Input((SEQ,), dtype="int32"),
            keras.layers.Embedding(VOCAB, 32),
            *rnn(),
            keras.layers.Dense(CLASSES, activation="softmax"),
            name=name,
        )

    return make


def _conv_lstm():
    return _sequential(
        keras.Input((4, 16, 16, 3)),
        keras.layers.ConvLSTM2D(8, 3, padding="same"),
        keras.layers.Flatten(),
        keras.layers.Dense(CLASSES, activation="softmax"),
        name="conv_lstm2d",
    )


def _time_distributed():
    return _sequential(
        keras.Input((4, 16, 16, 3)),
        keras.layers.TimeDistributed(keras.layers.Conv2D(8, 3, activation="relu")),
        keras.layers.TimeDistributed(keras.layers.Flatten()),
        keras.layers.TimeDistributed(keras.layers.Dense(32, activation="relu")),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(CLASSES, activation="softmax"),
        name="time_distributed",
    )


_RECURRENT = {
    "lstm": (_text_rnn(lambda: [keras.layers.LSTM(64)], "lstm"), "Embedding, LSTM, Dense"),
    "gru": (_text_rnn(lambda: [keras.layers.GRU(64)], "gru"), "Embedding, GRU, Dense"),
    "simple_rnn": (
        _text_rnn(lambda: [keras.layers.SimpleRNN(64)], "simple_rnn"),
        "Embedding, SimpleRNN, Dense",
    ),
    "bidirectional_lstm": (
        _text_rnn(
            lambda: [
                keras.layers.Bidirectional(keras.layers.LSTM(32, return_sequences=True)),
                keras.layers.GlobalAveragePooling1D(),
            ],
            "bidirectional_lstm",
        ),
        "Embedding, Bidirectional(LSTM), pool, Dense",
    ),
}


# ---------------------------------------------------------------- custom


@keras.saving.register_keras_serializable(package="kswap_zoo")
class ScaledDense(keras.layers.Layer):
    """A custom layer: ``gelu(x @ w + b) * scale``, written with keras.ops."""

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros")
        self.scale = self.add_weight(shape=(), initializer="ones")

    def call(self, x):
        return keras.ops.gelu(keras.ops.matmul(x, self.w) + self.b) * self.scale

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def _conv3d():
    return _sequential(
        keras.Input((8, 16, 16, 1)),
        keras.layers.Conv3D(8, 3, activation="relu", padding="same"),
        keras.layers.MaxPooling3D(2),
        keras.layers.Conv3D(16, 3, activation="relu", padding="same"),
        keras.layers.GlobalAveragePooling3D(),
        keras.layers.Dense(CLASSES, activation="softmax"),
        name="conv3d",
    )


def _unet():
    conv = lambda f: keras.layers.Conv2D(f, 3, padding="same", activation="relu")  # noqa: E731
    inp = keras.Input((32, 32, 3))
    c1 = conv(16)(conv(16)(inp))
    c2 = conv(32)(conv(32)(keras.layers.MaxPooling2D()(c1)))
    c3 = conv(64)(keras.layers.MaxPooling2D()(c2))
    u2 = keras.layers.Conv2DTranspose(32, 2, strides=2, padding="same")(c3)
    u2 = conv(32)(keras.layers.Concatenate()([u2, c2]))
    u1 = keras.layers.UpSampling2D()(u2)
    u1 = conv(16)(keras.layers.Concatenate()([u1, c1]))
    out = keras.layers.Conv2D(3, 1, activation="softmax")(u1)
    return keras.Model(inp, out, name="unet")


def _custom_layer():
    inp = keras.Input((64,))
    x = keras.layers.Dense(64, activation="relu")(inp)
    x = ScaledDense(64)(x)
    out = keras.layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inp, out, name="custom_layer")


def _ops_arithmetic():
    inp = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(16, 3, activation="relu")(inp)
    x = x * 0.5 + 1.0  # Keras operations between layers
    x = keras.layers.Flatten()(x)
    out = keras.layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inp, out, name="ops_arithmetic")


def _ops_mean():
    inp = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(16, 3, activation="relu")(inp)
    x = keras.ops.mean(x, axis=(1, 2))  # a Keras op instead of a pooling layer
    out = keras.layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inp, out, name="ops_mean")


def _dict_output():
    inner_in = keras.Input((16, 16, 3))
    feat = keras.layers.Conv2D(16, 3, activation="relu", name="feat_conv")(inner_in)
    aux = keras.layers.GlobalAveragePooling2D(name="aux_pool")(feat)
    inner = keras.Model(inner_in, {"feat": feat, "aux": aux}, name="features")
    inp = keras.Input((16, 16, 3))
    out = inner(inp)["feat"]  # a nested model's dict output, indexed
    x = keras.layers.GlobalAveragePooling2D()(out)
    out = keras.layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inp, out, name="dict_output")


_CUSTOM = {
    "conv3d": (_conv3d, images, class_ids, "Conv3D, MaxPooling3D"),
    "unet": (_unet, images, pixel_classes, "Conv2D, pool, Conv2DTranspose, UpSampling, concat"),
    "custom_layer": (_custom_layer, images, class_ids, "registered keras.ops layer"),
    "ops_arithmetic": (_ops_arithmetic, images, class_ids, "x * 0.5 + 1.0 between layers"),
    "ops_mean": (_ops_mean, images, class_ids, "keras.ops.mean between layers"),
    "dict_output": (_dict_output, images, class_ids, "a nested model's dict output indexed"),
}

_ON_DATASETS = {"lstm", "unet"}


def _catalogue() -> dict[str, Entry]:
    out = _applications()
    for name, (cls, head, config, what) in _HUB.items():
        out[name] = _hub_entry(name, cls, head, config, what)
    for name, (make, what) in _RECURRENT.items():
        out[name] = Entry(
            name, "recurrent", make, tokens, class_ids, dataset=name in _ON_DATASETS, note=what
        )
    out["conv_lstm2d"] = Entry(
        "conv_lstm2d", "recurrent", _conv_lstm, images, class_ids, note="ConvLSTM2D, Dense"
    )
    out["time_distributed"] = Entry(
        "time_distributed",
        "recurrent",
        _time_distributed,
        images,
        class_ids,
        note="TimeDistributed(Conv2D, Flatten, Dense)",
    )
    for name, (make, inputs, targets, what) in _CUSTOM.items():
        out[name] = Entry(
            name, "custom", make, inputs, targets, dataset=name in _ON_DATASETS, note=what
        )
    return out


CATALOGUE: dict[str, Entry] = _catalogue()
GROUPS: dict[str, list[str]] = {}
for _entry in CATALOGUE.values():
    GROUPS.setdefault(_entry.group, []).append(_entry.name)


def select(spec: str) -> list[str]:
    """Catalogue names from a comma list of names and group names (``all``: every one)."""
    names: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part == "all":
            found = list(CATALOGUE)
        elif part in GROUPS:
            found = GROUPS[part]
        elif part in CATALOGUE:
            found = [part]
        else:
            raise ValueError(
                f"Unknown model or group {part!r}. Groups: {sorted(GROUPS)}; "
                f"models: {sorted(CATALOGUE)}"
            )
        names += [n for n in found if n not in names]
    return names
