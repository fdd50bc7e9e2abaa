"""Models beyond plain layer chains: recurrent layers, Keras operations between
layers, sparse gradients, called tf.functions, variables read out of sight.

Every case trains through ``model.fit`` side by side with the unwrapped model
(same seed) and must give the same losses and weights bit for bit, with every
trainable variable that gets a gradient without kswap getting one with it.
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from kswap.layers import Offload
from kswap.layers.chain import order_backward
from kswap.layers.tensors import dense_parts

SEED = 11


def _tokens(rnn):
    def build():
        inp = keras.Input((12,), dtype="int32")
        h = keras.layers.Embedding(200, 16, name="emb")(inp)
        h = rnn()(h)
        return keras.Model(inp, keras.layers.Dense(2, activation="softmax", name="out")(h))

    return build


def _keras_ops():
    inp = keras.Input((6, 6, 3))
    h = keras.layers.Conv2D(4, 3, padding="same", name="c1")(inp)
    h = h + 1.0  # keras.Operation (Add), not a layer
    h = keras.ops.relu(h) * 0.5
    pooled = {"mean": keras.ops.mean(h, axis=(1, 2)), "max": keras.ops.max(h, axis=(1, 2))}
    h = pooled["mean"] - pooled["max"]  # indexing a dict of symbolic tensors
    return keras.Model(inp, keras.layers.Dense(2, name="out")(h))


def _grouped_conv():
    inp = keras.Input((8, 8, 4))
    h = keras.layers.Conv2D(4, 5, padding="same", groups=4, name="depthwise_as_groups")(inp)
    h = keras.layers.Conv2D(4, 3, padding="same", groups=2, activation="relu", name="g2")(h)
    h = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    return keras.Model(inp, keras.layers.Dense(2, name="out")(h))


def _silu():
    # tf.nn.silu has a tf.custom_gradient: TensorFlow's own gradient function must be used
    inp = keras.Input((6, 6, 3))
    h = keras.layers.Conv2D(8, 3, activation="silu", name="c1")(inp)
    h = keras.layers.Activation("swish", name="act")(keras.layers.BatchNormalization(name="bn")(h))
    h = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    return keras.Model(inp, keras.layers.Dense(2, activation="silu", name="out")(h))


def _time_distributed():
    inp = keras.Input((5, 6, 6, 2))
    h = keras.layers.TimeDistributed(keras.layers.Conv2D(3, 3, activation="relu"), name="td")(inp)
    h = keras.layers.ConvLSTM2D(3, 3, name="convlstm")(h)
    h = keras.layers.Flatten(name="flat")(h)
    return keras.Model(inp, keras.layers.Dense(2, name="out")(h))


@keras.saving.register_keras_serializable(package="kswap_tests")
class DirectGather(keras.layers.Layer):
    """Reads its table with ``tf.gather`` on the variable: a ResourceGather op."""

    def build(self, input_shape):
        self.table = self.add_weight(shape=(50, 8), name="table")

    def call(self, ids):
        return tf.gather(self.table.value, ids)


def _direct_gather():
    inp = keras.Input((4,), dtype="int32")
    h = DirectGather(name="gather")(inp)
    h = keras.layers.Flatten(name="flat")(h)
    return keras.Model(inp, keras.layers.Dense(2, name="out")(h))


@keras.saving.register_keras_serializable(package="kswap_tests")
class AddOther(keras.layers.Layer):
    """Takes a second tensor by keyword (as DeBERTa's layers take ``rel_embeddings``)."""

    def call(self, x, other=None):
        return x + other


def _keyword_tensor():
    inp = keras.Input((4,))
    side = keras.layers.Dense(4, name="side")(inp)
    h = AddOther(name="add_other")(keras.layers.Dense(4, name="main")(inp), other=side)
    return keras.Model(inp, keras.layers.Dense(2, name="out")(h))


def _attention():
    # a second positional tensor (the value) and a boolean mask by keyword
    inp = keras.Input((6, 4))
    q = keras.layers.Dense(8, name="q")(inp)
    v = keras.layers.Dense(8, name="v")(inp)
    mask = keras.ops.greater(inp[:, :, :1], 0.3)
    mask = keras.ops.logical_and(mask, keras.ops.transpose(mask, (0, 2, 1)))
    h = keras.layers.MultiHeadAttention(2, 4, name="mha")(q, v, attention_mask=mask)
    h = keras.layers.Flatten(name="flat")(h)
    return keras.Model(inp, keras.layers.Dense(2, name="out")(h))


CASES = {
    "lstm": _tokens(lambda: keras.layers.LSTM(8, name="rnn")),
    "gru": _tokens(lambda: keras.layers.GRU(8, name="rnn")),
    "simple_rnn": _tokens(lambda: keras.layers.SimpleRNN(8, name="rnn")),
    "bidirectional": _tokens(lambda: keras.layers.Bidirectional(keras.layers.LSTM(4), name="rnn")),
    "keras_ops": _keras_ops,
    "grouped_conv": _grouped_conv,
    "silu": _silu,
    "time_distributed": _time_distributed,
    "direct_gather": _direct_gather,
    "keyword_tensor": _keyword_tensor,
    "attention": _attention,
}

#: Cases whose layers kswap cannot replay, and so recomputes (with a warning).
FALLS_BACK = {
    "direct_gather": {"gather"},
}


#: Token classifiers; the other cases regress two values.
CLASSIFIERS = {"lstm", "gru", "simple_rnn", "bidirectional"}


def _build(case):
    keras.utils.set_random_seed(SEED)
    model = CASES[case]()
    model.compile("adam", "sparse_categorical_crossentropy" if case in CLASSIFIERS else "mse")
    # built before fit, the optimizer's slots do not make fit trace the step twice
    # (the graph that runs is the same; OffloadingModel builds it too, and
    # tests/layers/test_exactness.py trains references whose optimizer fit builds)
    model.optimizer.build(model.trainable_variables)
    return model


def _data(model, n=32):
    rng = np.random.default_rng(0)
    t = model.inputs[0]
    if t.dtype.startswith("int"):
        x = rng.integers(0, 50, (n, *t.shape[1:])).astype("int32")
    else:
        x = rng.random((n, *t.shape[1:]), dtype=np.float32)
    if model.loss == "sparse_categorical_crossentropy":
        return x, rng.integers(0, 2, n)
    return x, rng.random((n, 2), dtype=np.float32)


def _fit(model, x, y):
    keras.utils.set_random_seed(3)
    return model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history["loss"]


def _variables_with_gradients(model, x, y) -> set[int]:
    """Positions (in ``trainable_variables``) of the variables that get a gradient."""

    @tf.function
    def grads(xb, yb):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=xb, y=yb, y_pred=model(xb, training=True))
        return tape.gradient(loss, [v.value for v in model.trainable_variables])

    return {i for i, g in enumerate(grads(x[:8], y[:8])) if g is not None}


@pytest.mark.parametrize("case", list(CASES))
def test_trains_exactly_and_every_variable_gets_its_gradient(case):
    ref = _build(case)
    off = kswap.OffloadingModel(_build(case))
    x, y = _data(ref)
    ref_loss = _fit(ref, x, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        off_loss = _fit(off, x, y)
        off_grads = _variables_with_gradients(off, x, y)
    messages = [str(w.message) for w in caught]
    # after fit in both (a training-mode call updates BatchNormalization's statistics)
    with_grads = _variables_with_gradients(ref, x, y)
    assert with_grads == set(range(len(ref.trainable_variables)))
    assert off_grads == with_grads
    assert not [m for m in messages if "Gradients do not exist" in m], messages
    np.testing.assert_array_equal(off_loss, ref_loss)
    for a, b in zip(ref.weights, off.weights, strict=True):
        np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=a.path)

    wrapped = {layer.name: layer for layer in off._flatten_layers() if isinstance(layer, Offload)}
    fell_back = {name for name, layer in wrapped.items() if layer.fallbacks}
    assert fell_back == FALLS_BACK.get(case, set())
    for name in fell_back:  # never silent: the warning names the layer and the cost
        assert any(
            f"layer {name!r}" in m and ("recomputed" in m or "does not offload" in m)
            for m in messages
        ), messages


def test_keras_operations_are_left_as_they_are():
    model = _build("keras_ops")
    off = kswap.OffloadingModel(model)
    ops = [op for op in off.operations if not isinstance(op, keras.layers.Layer)]
    assert ops, "the model has Keras operations between its layers"
    assert all(not isinstance(op, Offload) for op in ops)
    assert isinstance(off.get_layer("c1"), Offload)
    stripped = kswap.strip(off)
    assert not any(isinstance(layer, Offload) for layer in stripped._flatten_layers())


def test_sparse_gradients_go_through_the_schedule():
    @tf.function
    def f(ids, dy):
        table = tf.ones((1000, 64))
        with tf.GradientTape() as tape:
            tape.watch(table)
            y = tf.nn.relu(tf.gather(table, ids)) * 2.0
        (g,) = tape.gradient(y, [table], output_gradients=dy)
        assert isinstance(g, tf.IndexedSlices)
        graph = tf.compat.v1.get_default_graph()
        start = len(graph.get_operations())
        dx = tf.nn.relu(dy) * 3.0 + tf.nn.relu(dy * 2.0)
        new_ops = graph.get_operations()[start:]
        order_backward(new_ops, [g, dx, None])
        return g.values, dx

    ids = tf.constant(np.arange(256) % 1000, tf.int32)
    values, dx = f(ids, tf.ones((256, 64)))
    assert values.shape == (256, 64) and dx.shape == (256, 64)
    sl = tf.IndexedSlices(tf.ones((2, 3)), tf.constant([0, 1]), tf.constant([4, 3]))
    assert len(dense_parts([sl, None, tf.ones(2)])) == 3
