"""The backward reads no forward tensor from the device.

What an op's gradient reads is declared in ``kswap.layers.saved``; if the
declaration is wrong for the installed TensorFlow (a gradient that reads its
output rather than its input, say), the forward tensor silently stays on the
device until backward. These tests look at the built training graph itself:
no op of the model's backward may consume a forward tensor worth offloading,
whether batch shapes are static (arrays) or not (``tf.data``).
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from kswap import transfer
from kswap.layers import offload, replay, saved, schedule
from kswap.trace.build import in_scope
from tests.layers.helpers import assert_same_state, build, compile_, data
from tests.layers.models import BUILDERS


def _training_graph(model, x, y, dynamic: bool):
    xs = x if isinstance(x, list) else [x]
    ys = y if isinstance(y, list) else [y]
    spec = lambda a: tf.TensorSpec((None if dynamic else a.shape[0], *a.shape[1:]))  # noqa: E731

    @tf.function(input_signature=([spec(a) for a in xs], [spec(a) for a in ys]))
    def step(xs, ys):
        with tf.GradientTape() as tape:
            out = keras.tree.flatten(model(xs if len(xs) > 1 else xs[0], training=True))
            errors = [tf.reduce_mean(tf.square(o - t)) for o, t in zip(out, ys, strict=True)]
            loss = tf.add_n(errors)
        return tape.gradient(loss, model.trainable_weights)

    return step.get_concrete_function().graph


def _read_from_device(graph, scope: str) -> list[str]:
    """Forward tensors of ``scope`` that backward ops consume directly."""
    found = []
    for op in graph.get_operations():
        if not op.name.startswith(scope + "/") or op.type in ("ReadVariableOp", "Const", "Shape"):
            continue
        if in_scope(op.name, transfer.HOST_SCOPE):
            continue  # a host copy (backward may read its shape on the host)
        if in_scope(op.name, transfer.DEVICE_SCOPE):
            continue  # a swap-in: named after the tensor it brings back, under its scope
        for i, t in enumerate(op.outputs):
            if i in saved.outputs_read_in_place(op) or any(
                c.inputs[k] is t for c in t.consumers() for k in saved.inputs_read_in_place(c)
            ):
                continue  # read from the device on purpose (oneDNN's pairing, x ** 3's square)
            n = t.shape.num_elements()
            if n is not None and n * t.dtype.size < offload.MIN_OFFLOAD_BYTES:
                continue
            readers = [
                c.name
                for c in t.consumers()
                if c.name.startswith(f"gradient_tape/{scope}/")
                and not in_scope(c.name, transfer.DEVICE_SCOPE)
            ]
            if readers:
                found.append(f"{t.name} <- {readers[0]}")
    return found


def _model_scope(graph) -> str:
    """The model's name scope (Keras may add a suffix to the model's name)."""
    return next(op.name.split("/")[0] for op in graph.get_operations() if "/" in op.name)


def _check(model, x, y, dynamic):
    graph = _training_graph(model, x, y, dynamic)
    assert _read_from_device(graph, _model_scope(graph)) == []
    states = schedule._STATES.get(graph, {}).values()
    in_place = {
        t.name
        for op in graph.get_operations()
        for i, t in enumerate(op.outputs)
        if i in saved.outputs_read_in_place(op)
    }
    assert [k for state in states for k in state.kept_on_device if k[1] not in in_place] == []
    assert any(state.host for state in states)
    return [k for state in states for k in state.kept_on_device if k[1] in in_place]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("kind", list(BUILDERS))
def test_small_models(kind, dynamic, monkeypatch):
    monkeypatch.setattr(offload, "MIN_OFFLOAD_BYTES", 0)  # their tensors are tiny
    model = kswap.OffloadingModel(compile_(build(kind)))
    x, y = data(model, 64)
    _check(model, x, y, dynamic)


@pytest.fixture(scope="module")
def offloaded_application():
    """``offloaded_application(name)``: one offloaded model per name, for both graphs of it."""
    models = {}

    def get(name):
        if name not in models:
            model = getattr(keras.applications, name)(weights=None, input_shape=(32, 32, 3))
            models[name] = kswap.OffloadingModel(compile_(model))
        return models[name]

    yield get
    models.clear()


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", ["ResNet50", "MobileNetV2"])
def test_applications(name, dynamic, offloaded_application):
    model = offloaded_application(name)
    rng = np.random.default_rng(0)
    x = rng.random((4, 32, 32, 3), dtype=np.float32)
    y = rng.random((4, 1000), dtype=np.float32)
    in_place = _check(model, x, y, dynamic)
    # ResNet50's 3x3, stride-2 pool keeps its output for oneDNN's pairing
    expected = ["pool1_pool"] if name == "ResNet50" and transfer.onednn_enabled() else []
    assert [block for block, _ in in_place] == expected


def test_only_overlapping_max_pools_read_their_output_in_place(monkeypatch):
    @tf.function
    def pools(x):
        return (
            tf.nn.max_pool2d(x, 3, 2, "SAME"),
            tf.nn.max_pool2d(x, 2, 2, "VALID"),
            tf.nn.avg_pool2d(x, 3, 2, "SAME"),
        )

    graph = pools.get_concrete_function(tf.TensorSpec((1, 8, 8, 2))).graph
    ops = {
        op.type + str(op.get_attr("ksize")[1]): op
        for op in graph.get_operations()
        if "Pool" in op.type
    }
    monkeypatch.setattr(transfer, "onednn_enabled", lambda: True)
    assert saved.outputs_read_in_place(ops["MaxPool3"]) == (0,)
    assert saved.outputs_read_in_place(ops["MaxPool2"]) == ()
    assert saved.outputs_read_in_place(ops["AvgPool3"]) == ()
    monkeypatch.setattr(transfer, "onednn_enabled", lambda: False)  # no pairing to keep
    assert saved.outputs_read_in_place(ops["MaxPool3"]) == ()


def test_every_3d_max_pool_reads_its_output_in_place(monkeypatch):
    @tf.function
    def pool(x):
        return tf.nn.max_pool3d(x, 2, 2, "VALID")  # windows that do not overlap

    graph = pool.get_concrete_function(tf.TensorSpec((1, 4, 4, 4, 2))).graph
    (op,) = [op for op in graph.get_operations() if op.type == "MaxPool3D"]
    monkeypatch.setattr(transfer, "onednn_enabled", lambda: True)
    assert saved.outputs_read_in_place(op) == (0,)
    monkeypatch.setattr(transfer, "onednn_enabled", lambda: False)
    assert saved.outputs_read_in_place(op) == ()


def test_a_wrong_declaration_is_caught(monkeypatch):
    """Declaring that Relu's gradient reads nothing leaves its output on the device."""
    monkeypatch.setattr(offload, "MIN_OFFLOAD_BYTES", 0)
    monkeypatch.setitem(saved.GRADIENT_READS, "Relu", ((), ()))
    model = kswap.OffloadingModel(compile_(build("residual")))
    x, y = data(model, 64)
    graph = _training_graph(model, x, y, dynamic=False)
    assert any("ReluGrad" in r for r in _read_from_device(graph, _model_scope(graph)))


def test_a_wrong_declaration_costs_memory_never_correctness(monkeypatch):
    """With unknown batch sizes a shape-only read gets a stand-in; a misread is rebuilt."""
    monkeypatch.setattr(offload, "MIN_OFFLOAD_BYTES", 0)
    monkeypatch.setitem(saved.GRADIENT_READS, "Relu", ((), ()))
    monkeypatch.setattr(replay, "_MISREAD", set())
    ref = compile_(build("residual"))
    off = kswap.OffloadingModel(compile_(build("residual")))
    x, y = data(ref)
    losses = []
    for model in (ref, off):
        keras.utils.set_random_seed(5)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            losses.append(model.fit(dataset, shuffle=False, verbose=0).history["loss"])
    assert any("The gradient of Relu reads a value" in str(w.message) for w in caught)
    np.testing.assert_array_equal(losses[1], losses[0])
    assert_same_state(ref, off)


def test_a_cube_reads_its_input_in_place_only_where_its_square_would_sort_otherwise():
    """``x ** 3``: where the forward's own square and the gradient's merged one sort apart."""

    def cube_pow(scope: str):
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, (None, 4))
            with tf.name_scope(scope):
                h = tf.identity(x, name="BiasAdd")
                with tf.name_scope("Gelu"):
                    tf.math.pow(h, 3.0, name="Pow")
                    tf.math.pow(h, 2.0, name="Square")
        return graph.get_operation_by_name(f"{scope}/Gelu/Pow"), graph.get_operation_by_name(
            f"{scope}/Gelu/Square"
        )

    # "zeta/d/BiasAdd" sorts before "zeta/d/Gelu/ArithmeticOptimizer/..." and after
    # "gradient_tape/...": without the device's own x the product is ordered otherwise
    cube, square = cube_pow("zeta/d")
    assert saved.inputs_read_in_place(cube) == (0,)
    assert saved.inputs_read_in_place(square) == ()  # not a cube: no square to merge
    cube, _ = cube_pow("alpha/d")  # both sides agree: the copy is read
    assert saved.inputs_read_in_place(cube) == ()
