"""Offloaded keras.applications models train exactly like the plain ones (EfficientNetB0:
swish is a tf.custom_gradient, replayed with its own gradient function)."""

import keras
import numpy as np
import pytest

import kswap
from kswap.layers import Offload
from tests.layers.helpers import assert_same_state


def _build(name):
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, input_shape=(32, 32, 3), classes=5)
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ResNet50", "MobileNetV2", "EfficientNetB0"])
def test_five_steps_bit_identical(name):
    ref = _build(name)
    off = kswap.OffloadingModel(_build(name))
    rng = np.random.default_rng(0)
    x = rng.random((20, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 5, 20)
    keras.utils.set_random_seed(1)
    h_ref = ref.fit(x, y, batch_size=4, shuffle=False, verbose=0).history["loss"]
    keras.utils.set_random_seed(1)
    h_off = off.fit(x, y, batch_size=4, shuffle=False, verbose=0).history["loss"]
    assert ref.optimizer.iterations.numpy() == 5
    np.testing.assert_array_equal(h_off, h_ref)
    assert_same_state(ref, off)  # weights and BN moving statistics, bit for bit
    wrapped = [layer for layer in off.layers if isinstance(layer, Offload)]
    assert len(wrapped) == len(ref.layers) - 1
    assert not any(layer.fallbacks for layer in wrapped)
