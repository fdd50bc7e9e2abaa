"""Offloaded training gives the unwrapped model's numbers (same seed)."""

import keras
import numpy as np
import pytest

import kswap
from kswap.layers import Offload
from tests.layers.helpers import assert_same_state, build, compile_, data, trained_references
from tests.layers.models import BUILDERS

POLICIES = {
    "all": "all",
    "conv": "conv",
    "names": None,  # filled per model: every other layer
    "callable": lambda layer: isinstance(
        layer, (keras.layers.Dense, keras.layers.BatchNormalization)
    ),
}


def _fit(model, x, y):
    keras.utils.set_random_seed(5)
    return model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history["loss"]


@pytest.fixture(scope="module")
def reference():
    """``reference(kind)``: the plain model and its losses after :func:`_fit` (4 steps).

    Trained once per kind and shared by the tests that train a twin on the
    same arrays from the same seed (they only read it). It is compiled and
    fitted as a user would: its optimizer is built inside ``fit``.
    """
    return trained_references(_fit)


def _policy(name, model):
    if name == "names":
        return [
            layer.name
            for layer in model.layers[1::2]
            if not isinstance(layer, keras.layers.InputLayer)
        ]
    return POLICIES[name]


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("kind", list(BUILDERS))
def test_five_fit_steps_match(kind, policy, reference):
    ref, h_ref = reference(kind)
    twin = compile_(build(kind))
    # built before fit, the optimizer's slots do not make fit trace the step
    # twice (the graph that runs is the same); OffloadingModel builds it too
    # (tests/layers/test_model_api.py), the reference's is built in its fit
    twin.optimizer.build(twin.trainable_variables)
    off = kswap.OffloadingModel(twin, policy=_policy(policy, twin))
    h_off = _fit(off, *data(ref))
    assert ref.optimizer.iterations.numpy() == off.optimizer.iterations.numpy() == 4
    np.testing.assert_array_equal(h_off, h_ref)
    assert_same_state(ref, off)
    wrapped = [layer for layer in off._flatten_layers() if isinstance(layer, Offload)]
    if policy != "conv" or kind in ("sequential", "residual", "shared_multi_io"):
        assert wrapped, "the policy wrapped nothing"
    assert all(not layer.fallbacks for layer in wrapped), [layer.fallbacks for layer in wrapped]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_prefetch_zero_matches(kind, reference):
    ref, h_ref = reference(kind)
    off = kswap.OffloadingModel(compile_(build(kind)), prefetch=0)
    h_off = _fit(off, *data(ref))
    np.testing.assert_array_equal(h_off, h_ref)
    assert_same_state(ref, off)


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_dataset_with_unknown_batch_size_matches(kind, monkeypatch):
    """tf.data batches have no static batch size: shapes are read at run time."""
    import tensorflow as tf

    from kswap.layers import offload

    monkeypatch.setattr(offload, "MIN_OFFLOAD_BYTES", 0)  # offload every tensor
    ref = compile_(build(kind))
    off = kswap.OffloadingModel(compile_(build(kind)))
    x, y = data(ref)
    histories = []
    for model in (ref, off):
        keras.utils.set_random_seed(5)
        tup = lambda a: tuple(a) if isinstance(a, list) else a  # noqa: E731
        dataset = tf.data.Dataset.from_tensor_slices((tup(x), tup(y))).batch(8)
        assert keras.tree.flatten(dataset.element_spec)[0].shape[0] is None
        histories.append(model.fit(dataset, shuffle=False, verbose=0).history["loss"])
    np.testing.assert_array_equal(histories[1], histories[0])
    assert_same_state(ref, off)


@pytest.mark.parametrize("kind", ["sequential", "residual"])
def test_train_on_batch_evaluate_predict(kind):
    ref = compile_(build(kind))
    off = kswap.OffloadingModel(compile_(build(kind)))
    x, y = data(ref, 16)
    for _ in range(5):
        keras.utils.set_random_seed(9)
        l_ref = ref.train_on_batch(x, y)
        keras.utils.set_random_seed(9)
        l_off = off.train_on_batch(x, y)
        np.testing.assert_allclose(l_off, l_ref, rtol=1e-6)
    assert_same_state(ref, off)
    np.testing.assert_allclose(
        off.evaluate(x, y, verbose=0), ref.evaluate(x, y, verbose=0), rtol=1e-6
    )
    np.testing.assert_allclose(
        off.predict(x, verbose=0), ref.predict(x, verbose=0), rtol=1e-6, atol=1e-7
    )


@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy", "categorical_crossentropy"])
def test_softmax_classifier_losses(loss):
    """Keras computes these losses from the softmax's logits; so must kswap."""
    models = []
    for wrap in (False, True):
        model = build("sequential")
        model.compile("adam", loss)
        models.append(kswap.OffloadingModel(model) if wrap else model)
    rng = np.random.default_rng(0)
    x = rng.random((32, 12, 12, 3), dtype=np.float32)
    labels = rng.integers(0, 3, 32)
    y = labels if loss.startswith("sparse") else np.eye(3, dtype=np.float32)[labels]
    histories = []
    for model in models:
        keras.utils.set_random_seed(5)
        histories.append(model.fit(x, y, batch_size=8, shuffle=False, verbose=0).history["loss"])
    np.testing.assert_array_equal(histories[1], histories[0])
    assert_same_state(*models)
