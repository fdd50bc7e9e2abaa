"""Recurrent layers are offloaded: their per-step values wait in host memory.

Each recurrent layer (a ``While`` loop on the TensorFlow backend) must train
through ``model.fit`` with an unknown batch dimension bit-identically to the
unwrapped model from the same seed, without falling back to recomputation,
and its gradient loop must read host copies of the per-step values its
forward accumulated, not the forward's device lists.
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from kswap import transfer
from kswap.layers import Offload, loops, schedule
from kswap.trace.build import in_scope

SEED = 5
STEPS = 6


def _tokens(*rnn, mask_zero=False):
    def build():
        inp = keras.Input((STEPS,), dtype="int32")
        h = keras.layers.Embedding(30, 8, mask_zero=mask_zero, name="emb")(inp)
        for layer in rnn:
            h = layer()(h)
        if len(h.shape) == 3:
            h = keras.layers.Flatten(name="flat")(h)
        return keras.Model(inp, keras.layers.Dense(2, activation="softmax", name="out")(h))

    return build


def _conv_lstm():
    inp = keras.Input((4, 5, 5, 2))
    h = keras.layers.ConvLSTM2D(3, 3, padding="same", name="rnn")(inp)
    h = keras.layers.Flatten(name="flat")(h)
    return keras.Model(inp, keras.layers.Dense(2, activation="softmax", name="out")(h))


def _state_outputs():
    inp = keras.Input((STEPS,), dtype="int32")
    h = keras.layers.Embedding(30, 8, name="emb")(inp)
    seq, state_h, state_c = keras.layers.LSTM(
        6, return_sequences=True, return_state=True, name="rnn"
    )(h)
    h = keras.layers.Concatenate(name="cat")([keras.layers.Flatten(name="flat")(seq), state_c])
    del state_h  # an output nothing reads: its gradient is zeros
    return keras.Model(inp, keras.layers.Dense(2, activation="softmax", name="out")(h))


@keras.saving.register_keras_serializable(package="kswap_tests")
class Iterated(keras.layers.Layer):
    """``h = tanh(h @ w)`` three times in a ``tf.while_loop``; ``grow`` also
    concatenates every step's ``h`` onto a tensor whose shape invariant is looser."""

    def __init__(self, grow=False, **kwargs):
        super().__init__(**kwargs)
        self.grow = grow

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], input_shape[-1]), name="w")

    def call(self, x):
        def body(i, acc, h):
            h = tf.tanh(tf.matmul(h, self.w.value))
            return i + 1, tf.concat([acc, h], axis=1) if self.grow else acc + h, h

        loose = tf.TensorShape([None, None]) if self.grow else x.shape
        invariants = (tf.TensorShape([]), loose, x.shape)
        _, acc, _ = tf.while_loop(lambda i, *_: i < 3, body, (0, x, x), shape_invariants=invariants)
        return tf.reshape(acc[:, :4], [-1, 4])

    def get_config(self):
        return {**super().get_config(), "grow": self.grow}


def _iterated(grow):
    def build():
        inp = keras.Input((STEPS,), dtype="int32")
        h = keras.layers.Flatten(name="flat")(keras.layers.Embedding(30, 4, name="emb")(inp))
        h = keras.layers.Dense(4, name="dense")(h)
        h = Iterated(grow, name="rnn")(h)
        return keras.Model(inp, keras.layers.Dense(2, activation="softmax", name="out")(h))

    return build


CASES = {
    "lstm": _tokens(lambda: keras.layers.LSTM(6, name="rnn")),
    "gru": _tokens(lambda: keras.layers.GRU(6, name="rnn")),
    "simple_rnn": _tokens(lambda: keras.layers.SimpleRNN(6, name="rnn")),
    "bidirectional": _tokens(lambda: keras.layers.Bidirectional(keras.layers.LSTM(4), name="rnn")),
    "stacked": _tokens(
        lambda: keras.layers.LSTM(6, return_sequences=True, name="rnn"),
        lambda: keras.layers.GRU(5, go_backwards=True, name="rnn2"),
    ),
    "dropout": _tokens(
        lambda: keras.layers.LSTM(6, dropout=0.3, recurrent_dropout=0.2, seed=2, name="rnn")
    ),
    "masked": _tokens(
        lambda: keras.layers.LSTM(6, return_sequences=True, name="rnn"),
        lambda: keras.layers.GRU(5, name="rnn2"),
        mask_zero=True,
    ),
    "state_outputs": _state_outputs,
    "conv_lstm": _conv_lstm,
    "while_loop": _iterated(grow=False),
}
RECURRENT = {"rnn", "rnn2"}


def _build(case):
    keras.utils.set_random_seed(SEED)
    model = CASES[case]()
    model.compile("adam", "sparse_categorical_crossentropy")
    # built before fit, the optimizer's slots do not make fit trace the step twice
    # (the graph that runs is the same; OffloadingModel builds it too, and
    # tests/layers/test_exactness.py trains references whose optimizer fit builds)
    model.optimizer.build(model.trainable_variables)
    return model


def _dataset(model, n=20, batch=8):
    """Batches of 8, 8 and 4: the step is traced with an unknown batch dimension."""
    rng = np.random.default_rng(0)
    t = model.inputs[0]
    if t.dtype.startswith("int"):
        x = rng.integers(0, 30, (n, *t.shape[1:])).astype("int32")
        x[:, -2:] *= rng.integers(0, 2, (n, 2)).astype("int32")  # zeros for the mask
    else:
        x = rng.random((n, *t.shape[1:]), dtype=np.float32)
    y = rng.integers(0, 2, n)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)


def _fit(model, dataset):
    keras.utils.set_random_seed(3)
    return model.fit(dataset, shuffle=False, verbose=0).history["loss"]


def _training_graph(model, dataset):
    """A training step of ``model`` traced with an unknown batch dimension."""
    x_spec, y_spec = dataset.element_spec

    @tf.function(input_signature=[x_spec, y_spec])
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))
        return tape.gradient(loss, [v.value for v in model.trainable_variables])

    return step.get_concrete_function().graph


def _float_accumulators(while_op) -> set[int]:
    """Outputs of a forward loop that accumulate float values TensorFlow's gradient reads."""
    return {
        k
        for k, t in enumerate(while_op.outputs)
        if t.dtype == tf.variant
        and (dtype := loops._list_elements(while_op, k)) is not None
        and dtype.is_floating
    }


@pytest.mark.parametrize("case", list(CASES))
def test_fit_is_bit_identical_and_nothing_is_recomputed(case):
    ref = _build(case)
    off = kswap.OffloadingModel(_build(case))
    dataset = _dataset(ref)
    ref_loss = _fit(ref, dataset)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        off_loss = _fit(off, dataset)
    assert not [w for w in caught if "cannot replay" in str(w.message)]
    assert not [w for w in caught if "does not support masking" in str(w.message)]
    np.testing.assert_array_equal(off_loss, ref_loss)
    for a, b in zip(ref.weights, off.weights, strict=True):
        np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=a.path)
    wrapped = {layer.name: layer for layer in off._flatten_layers() if isinstance(layer, Offload)}
    assert RECURRENT & set(wrapped)
    assert {name: layer.fallbacks for name, layer in wrapped.items() if layer.fallbacks} == {}


@pytest.mark.parametrize(
    "case", ["lstm", "bidirectional", "stacked", "dropout", "conv_lstm", "while_loop"]
)
def test_the_gradient_loop_reads_host_copies(case):
    off = kswap.OffloadingModel(_build(case))
    graph = _training_graph(off, _dataset(off))
    loops_ = [op for op in graph.get_operations() if op.type in loops.LOOP_OPS]
    forward = [op for op in loops_ if not op.name.startswith("gradient_tape/")]
    assert forward and len(loops_) == 2 * len(forward)
    for op in forward:
        accumulators = _float_accumulators(op)
        assert accumulators, op.name  # per-step gates and states
        for k in accumulators:
            readers = [c for c in op.outputs[k].consumers() if c.type != "TensorListElementShape"]
            # the only reader is the stack into host memory, made right after the loop
            assert [c.type for c in readers] == ["TensorListStack"], (op.name, k)
            assert in_scope(readers[0].name, transfer.HOST_SCOPE)
            assert not readers[0].control_inputs
    for op in loops_:
        if op.name.startswith("gradient_tape/"):
            back = [t.op.type for t in op.inputs if in_scope(t.op.name, transfer.DEVICE_SCOPE)]
            # lists rebuilt from their host copies; dense invariants (dropout masks) copied back
            assert "TensorListFromTensor" in back, op.name
            assert set(back) <= {"TensorListFromTensor", "DeepCopy"}, back
            if case == "dropout":
                assert "DeepCopy" in back
    (state,) = schedule._STATES[graph].values()
    stacks = [h for h in state.host.values() if h.op.type == "TensorListStack"]
    assert len(stacks) >= sum(len(_float_accumulators(op)) for op in forward)
    assert state.kept_on_device == []


def test_accumulated_variable_reads_stay_on_the_device():
    """The loop reads its weights every step: those lists share the variables' buffers."""
    off = kswap.OffloadingModel(_build("lstm"))
    graph = _training_graph(off, _dataset(off))
    (op,) = [
        op
        for op in graph.get_operations()
        if op.type in loops.LOOP_OPS and not op.name.startswith("gradient_tape/")
    ]
    body = op._body_graph
    reads = [
        k
        for k, out in enumerate(body.outputs)
        if (src := loops._source(out)).op.type == "TensorListPushBack"
        and loops._source(src.op.inputs[1]).op.type == "ReadVariableOp"
    ]
    assert reads  # kernel and recurrent kernel
    for k in reads:
        assert loops._list_elements(op, k) is None
        assert [c.type for c in op.outputs[k].consumers()] == ["StatelessWhile"]


def test_without_replay_the_loop_falls_back(monkeypatch):
    monkeypatch.setattr(loops, "REPLAY_LOOPS", False)
    ref = _build("gru")
    off = kswap.OffloadingModel(_build("gru"))
    dataset = _dataset(ref)
    ref_loss = _fit(ref, dataset)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        off_loss = _fit(off, dataset)
    np.testing.assert_array_equal(off_loss, ref_loss)
    assert off.get_layer("rnn").fallbacks
    assert any("layer 'rnn'" in str(w.message) and "recomputed" in str(w.message) for w in caught)


def test_a_loop_whose_values_change_shape_is_recomputed():
    """A shape invariant looser than the initial value: the steps' values cannot be stacked."""
    CASES["growing"] = _iterated(grow=True)
    try:
        ref = _build("growing")
        off = kswap.OffloadingModel(_build("growing"))
    finally:
        del CASES["growing"]
    dataset = _dataset(ref)
    ref_loss = _fit(ref, dataset)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        off_loss = _fit(off, dataset)
    np.testing.assert_array_equal(off_loss, ref_loss)
    (reason,) = off.get_layer("rnn").fallbacks
    assert "may change shape from step to step" in reason
    assert any("layer 'rnn'" in str(w.message) and "recomputed" in str(w.message) for w in caught)
