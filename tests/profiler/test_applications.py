"""End-to-end: kswap's peak against the allocator's own, on real models."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ResNet50", "MobileNetV2", "VGG16"])
def test_peak_agrees_with_get_memory_info(name):
    model = getattr(keras.applications, name)(weights=None, input_shape=(64, 64, 3), classes=10)
    model.compile("adam", "sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.random((32, 64, 64, 3), dtype=np.float32)
    y = rng.integers(0, 10, 32)
    trace = kswap.profile(model, x, y, steps=2, batch_size=16)
    # profile() resets the allocator's peak just before the profiled steps and
    # reads get_memory_info("CPU:0")["peak"] right after them
    allocator_peak = trace.metadata["allocator_peak_bytes"]
    assert abs(trace.peak_bytes("device") - allocator_peak) <= 0.02 * allocator_peak
    # the per-layer table names real layers of the model
    names = {layer.name for layer in model.layers}
    top = [k for k in trace.by_layer() if not k.startswith("(")][:5]
    assert top and set(top) <= names
    del model
    keras.backend.clear_session()
    tf.config.experimental.reset_memory_stats("CPU:0")
