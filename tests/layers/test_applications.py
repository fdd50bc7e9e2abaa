"""Offloaded keras.applications models train exactly like the plain ones, bit for bit.

Both train with SGD (``tests.applications.OPTIMIZERS`` says why). EfficientNetB0 (swish is a
tf.custom_gradient, replayed with its own gradient function) is trained the
same way, from arrays with SGD, in ``tests/layers/test_exactness_zoo.py``,
which also compares the outputs before training and bounds any deviation by
the remapper's.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from kswap.layers import Offload
from tests import applications
from tests.layers.helpers import assert_same_state

#: The models, fed from a tf.data pipeline (20 samples, batch 4): the batch size is
#: unknown in the traced step, as in the steps kswap.profile runs, which then reuse
#: the traced step.
NAMES = ["ResNet50", "MobileNetV2"]


def _fit(model, x, y):
    keras.utils.set_random_seed(1)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    assert data.element_spec[0].shape[0] is None
    return model.fit(data, shuffle=False, verbose=0).history["loss"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_five_steps_bit_identical(name):
    ref = applications.build(name)
    off = kswap.OffloadingModel(applications.build(name))
    rng = np.random.default_rng(0)
    x = rng.random((20, *applications.INPUT_SHAPE), dtype=np.float32)
    y = rng.integers(0, applications.CLASSES, 20)
    h_ref = _fit(ref, x, y)
    h_off = _fit(off, x, y)
    assert ref.optimizer.iterations.numpy() == 5
    np.testing.assert_array_equal(h_off, h_ref)
    assert_same_state(ref, off)  # weights and BN moving statistics, bit for bit
    wrapped = [layer for layer in off.layers if isinstance(layer, Offload)]
    assert len(wrapped) == len(ref.layers) - 1
    assert not any(layer.fallbacks for layer in wrapped)
    applications.keep(name, ref)  # its step is traced: the profiler's check reuses it
