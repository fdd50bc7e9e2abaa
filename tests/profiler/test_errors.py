import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from tests.profiler.models import chain, data


@pytest.fixture(scope="module")
def model():
    return chain()


def test_uncompiled_model():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)], name="raw")
    with pytest.raises(ValueError, match="must be compiled.*Received: an uncompiled model 'raw'"):
        kswap.profile(m, np.ones((8, 4)), np.ones((8, 2)))
    with pytest.raises(ValueError, match="kswap.measure"):
        kswap.measure(m, np.ones((8, 4)), np.ones((8, 2)))


def test_not_a_model():
    with pytest.raises(ValueError, match="`model` must be a keras.Model"):
        kswap.profile("resnet", np.ones((8, 4)), np.ones((8, 2)))


@pytest.mark.parametrize("steps", [0, -1, 1.5, True, "2"])
def test_bad_steps(model, steps):
    x, y = data(model, 8)
    with pytest.raises(ValueError, match=r"`steps` must be an integer >= 1. Received: steps="):
        kswap.profile(model, x, y, steps=steps)


def test_empty_and_mismatched_data(model):
    x, y = data(model, 8)
    with pytest.raises(ValueError, match="`x` is empty"):
        kswap.profile(model, x[:0], y[:0])
    with pytest.raises(
        ValueError,
        match="`x` and `y` must have the same number of samples. Received: x has 8, y has 4",
    ):
        kswap.profile(model, x, y[:4])
    with pytest.raises(ValueError, match="`x` must be given"):
        kswap.profile(model, None, y)
    with pytest.raises(
        ValueError, match="`batch_size` must be between 1 and the number of samples"
    ):
        kswap.profile(model, x, y, batch_size=9)


def test_running_profiler_is_reported_and_left_running(model, tmp_path):
    x, y = data(model, 8)
    tf.profiler.experimental.start(str(tmp_path))
    try:
        with pytest.raises(kswap.profiler.ProfilerBusyError, match="already running"):
            kswap.profile(model, x, y, steps=1, batch_size=8)
    finally:
        tf.profiler.experimental.stop()  # raises if kswap had stopped it


def test_bad_isolate(model):
    x, y = data(model, 8)
    with pytest.raises(ValueError, match="`isolate` must be True or False"):
        kswap.measure(model, x, y, isolate="yes")
