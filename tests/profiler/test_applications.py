"""End-to-end: kswap's peak against the allocator's own, on real models."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from tests import applications


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ResNet50", "MobileNetV2", "VGG16"])
def test_peak_agrees_with_get_memory_info(name):
    # a model another test has trained (its step traced, batch size unknown as
    # in these steps) when there is one;
    # 32x32 inputs at batch 32 make as many activations as 64x64 at batch 8
    model = applications.take(name)
    rng = np.random.default_rng(0)
    x = rng.random((64, *applications.INPUT_SHAPE), dtype=np.float32)
    y = rng.integers(0, applications.CLASSES, 64)
    trace = kswap.profile(model, x, y, steps=2, batch_size=32)
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
