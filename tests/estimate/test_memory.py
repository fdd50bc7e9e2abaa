"""Byte counts of the static estimate, against values computed by hand."""

import keras
import pytest

from kswap.estimate import estimate_workload
from kswap.estimate.graph import trace_step
from kswap.estimate.memory import analyze
from tests.estimate.models import convnet, mlp

F = 4  # bytes of a float32


def blocks_of(model, batch):
    return {b.name: b for b in analyze(trace_step(model, batch)).blocks}


def test_dense_relu_dense():
    b = blocks_of(mlp((64,)), 8)
    assert list(b) == ["a", "relu", "b"]
    # a reads its input (the model's, on the device anyway); relu its output; b its
    # input, which is relu's output, counted once in relu
    assert [b[n].saved_bytes for n in b] == [0, 8 * 256 * F, 0]
    assert [b[n].input_bytes for n in b] == [0, 8 * 256 * F, 8 * 256 * F]
    assert [b[n].output_bytes for n in b] == [8 * 256 * F, 8 * 256 * F, 8 * 10 * F]
    # a's output waits for relu (its bias add wrote into its product's buffer)
    assert b["a"].forward_bytes == 8 * 256 * F
    # relu's backward: beyond its saved output, the upstream gradient, into whose
    # buffer ReluGrad writes its input's
    assert b["relu"].backward_bytes == 8 * 256 * F
    # b's backward: the upstream gradient and the gradient of its input
    assert b["b"].backward_bytes == 8 * 10 * F + 8 * 256 * F
    # a's input needs no gradient: its backward holds only the upstream one
    assert b["a"].backward_bytes == 8 * 256 * F


def test_conv_pool_dense():
    b = blocks_of(convnet(), 2)
    out = 2 * 32 * 32 * 8 * F
    assert b["conv"].saved_bytes == out  # its ReLU reads its output; the input is the model's
    # MaxPoolGrad reads the pool's input (conv's output, counted there) and its output
    assert b["pool"].saved_bytes == out // 4
    assert b["flatten"].saved_bytes == 0 and b["flatten"].kind == "reshape"
    # dense reads the flattened pool output: a view of a buffer counted in pool
    assert b["dense"].saved_bytes == 0
    assert (b["conv"].kind, b["pool"].kind, b["dense"].kind) == ("conv", "pool", "dense")


def test_a_tensor_two_blocks_read_is_counted_once_in_the_first():
    inputs = keras.Input((16,))
    h = keras.layers.Dense(32, activation="relu", name="h")(inputs)
    p = keras.layers.Dense(4, name="p")(h)
    q = keras.layers.Dense(4, name="q")(h)
    out = keras.layers.Add(name="sum")([p, q]) + 1.0
    add = out._keras_history.operation.name  # "add", or "add_N" after other tests' adds
    b = blocks_of(keras.Model(inputs, out), 8)
    assert list(b) == ["h", "p", "q", "sum", add] and add.startswith("add")
    assert [b[n].saved_bytes for n in b] == [8 * 32 * F, 0, 0, 0, 0]
    assert not b[add].wrapped and b[add].kind == "op" and b["sum"].wrapped


def test_batch_norm_saves_its_input_and_dropout_its_mask():
    model = keras.Sequential(
        [
            keras.Input((8, 8, 4)),
            keras.layers.Conv2D(16, 1, name="conv"),
            keras.layers.BatchNormalization(name="bn"),
            keras.layers.Dropout(0.5, name="drop"),
            keras.layers.Flatten(),
            keras.layers.Dense(2, name="out"),
        ]
    )
    b = blocks_of(model, 4)
    x = 4 * 8 * 8 * 16 * F
    assert b["conv"].saved_bytes == 0  # its input is the model's
    assert x <= b["bn"].saved_bytes <= x + 1024  # x, plus per-channel statistics
    assert b["bn"].kind == "norm" and b["drop"].kind == "dropout"
    # where(mask, x / keep, 0): the gradient of x reads the boolean mask, not x
    assert b["drop"].saved_bytes == x // F


def test_nested_models_and_shared_layers():
    inner = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(8, name="i1"), keras.layers.Dense(8, name="i2")],
        name="inner",
    )
    shared = keras.layers.Dense(8, name="shared")
    inputs = keras.Input((8,))
    out = shared(inner(shared(inputs)))
    step = trace_step(keras.Model(inputs, out), 2)
    assert [b.name for b in step.blocks] == ["shared", "i1", "i2", "shared_2"]


def test_unknown_input_dimensions_need_input_shape():
    inputs = keras.Input((None, 4))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.raises(ValueError, match=r"unknown dimensions .* pass `input_shape`"):
        trace_step(model, 2)
    step = trace_step(model, 2, input_shape=(10, 4))
    assert tuple(step.outputs[0].shape) == (2, 10, 2)


def test_persistent_bytes_and_optimizer_slots():
    model = mlp((64,))
    params = 64 * 256 + 256 + 256 * 10 + 10
    for optimizer, slots in [
        ("adam", 2),
        ("sgd", 0),
        (keras.optimizers.SGD(momentum=0.9), 1),
        (keras.optimizers.RMSprop(momentum=0.9, centered=True), 3),
        (keras.optimizers.Adam(amsgrad=True), 3),
    ]:
        w = estimate_workload(model, 4, optimizer=optimizer)
        assert (w.weight_bytes, w.gradient_bytes) == (params * F, params * F)
        assert w.optimizer_bytes == slots * params * F, optimizer
    model.compile(keras.optimizers.SGD(momentum=0.5), "mse")
    assert estimate_workload(model, 4).optimizer_bytes == params * F  # the compiled one
    assert estimate_workload(model, 4, optimizer="adam").optimizer_bytes == 2 * params * F


def test_non_trainable_weights_are_weights_without_gradients():
    model = keras.Sequential([keras.Input((4, 4, 2)), keras.layers.BatchNormalization()])
    w = estimate_workload(model, 2, optimizer="adam")
    assert w.weight_bytes == 4 * 2 * F and w.gradient_bytes == 2 * 2 * F  # moving stats too
    assert w.optimizer_bytes == 2 * 2 * 2 * F


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, r"`batch_size` must be an integer >= 1. Received: batch_size=0"),
        ({"batch_size": 4, "device": "tpu9"}, r"Unknown `device`.*Received: device='tpu9'"),
        ({"batch_size": 4, "optimizer": "nope"}, r"`optimizer` must be .*optimizer='nope'"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        estimate_workload(mlp(), **kwargs)


def test_a_saved_tensor_is_freed_in_backward_after_its_last_reader():
    model = keras.Sequential(
        [
            keras.Input((16, 16, 4)),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="c1"),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="c2"),
            keras.layers.Conv2D(8, 3, padding="same", activation="sigmoid", name="c3"),
        ]
    )
    b = blocks_of(model, 2)
    act = 2 * 16 * 16 * 8 * F
    # each saves its output (for its activation's gradient); c2 and c3 read their
    # input too, the output of the block before, counted there
    assert [b[n].saved_bytes for n in ("c1", "c2", "c3")] == [act, act, act]
    # c2: its output and the upstream gradient (ReluGrad writes into it, the output
    # is freed), then the gradient of its input beside it: one tensor beyond saved
    assert b["c2"].backward_bytes == act
    assert b["c3"].backward_bytes == act  # SigmoidGrad writes into its gradient too
    # c1's input is the model's: it makes no gradient, and holds the upstream one
    assert b["c1"].backward_bytes == act


@pytest.mark.parametrize("offload", [False, True], ids=["plain", "kswap"])
def test_activation_gradients_write_into_the_upstream_gradient_when_profiled(offload):
    import numpy as np

    import kswap

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((32, 32, 8)),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="c1"),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="c2"),
            keras.layers.GlobalAveragePooling2D(name="gap"),
            keras.layers.Dense(4, name="out"),
        ]
    )
    model.compile(optimizer="sgd", loss="mse")
    if offload:
        model = kswap.OffloadingModel(model)
    x = np.random.rand(64, 32, 32, 8).astype("float32")
    y = np.random.rand(64, 4).astype("float32")
    trace = kswap.profile(model, x, y, steps=1, batch_size=32)
    act = 32 * 32 * 32 * 16 * F
    relu_grads = [a for a in trace.buffers if a.op and a.op.endswith("/ReluGrad")]
    convs = [a for a in trace.buffers if a.op and a.op.endswith("/Conv2DBackpropInput")]
    # the estimate's assumption, in the step fit runs: c2's input gradient gets a
    # buffer of its own, no ReLU gradient does (each writes into its upstream one)
    assert sum(o.op.endswith("/ReluGrad") for o in trace.ops) == 2  # they ran
    assert [a.requested_bytes for a in convs if a.requested_bytes == act]
    assert not [a for a in relu_grads if (a.requested_bytes or a.size) >= act]
