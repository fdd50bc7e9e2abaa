"""No trainable variable of a zoo model loses its gradient under kswap.

One model of each family of ``benchmarks/zoo.py``'s catalogue is built twice
with the same seed, plain and with ``OffloadingModel(policy="all")``, and the
gradient of the loss is traced (with an unknown batch dimension, as
``model.fit`` traces it). The variables that get a gradient must be the same;
on the models listed in ``BIT_IDENTICAL`` the gradients' values must also be
equal bit for bit on one batch. The others differ in the last bits (their
bound against TensorFlow's own rounding noise is measured by
``test_exactness_zoo.py``).
"""

import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
zoo_models = pytest.importorskip("zoo_models")

#: One per family: hard-swish with Keras operations between layers, a
#: vision transformer and a text decoder with tied embeddings (keras-hub),
#: recurrent, a U-Net, a registered custom layer. (Grouped convolutions and
#: swish, as in ConvNeXt and EfficientNet, are in test_any_model.py.)
MODELS = [
    "MobileNetV3Small",
    "hub_vit",
    "hub_gpt2",
    "bidirectional_lstm",
    "unet",
    "custom_layer",
]

#: Models whose first gradients kswap reproduces bit for bit.
BIT_IDENTICAL = {"unet", "custom_layer", "bidirectional_lstm"}


def _gradients(model, x, y):
    def spec(a):
        return tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype))

    @tf.function(input_signature=[keras.tree.map_structure(spec, x), spec(y)])
    def grads(xb, yb):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=xb, y=yb, y_pred=model(xb, training=True))
        out = tape.gradient(loss, [v.value for v in model.trainable_variables])
        return [None if g is None else tf.convert_to_tensor(g) for g in out]  # IndexedSlices

    return [None if g is None else np.asarray(g) for g in grads(x, y)]


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_every_variable_keeps_its_gradient(name):
    if name.startswith("hub_"):
        pytest.importorskip("keras_hub")
    entry = zoo_models.CATALOGUE[name]
    models = []
    for wrap in (False, True):
        keras.utils.set_random_seed(0)
        model = zoo_models.build(entry)
        models.append(kswap.OffloadingModel(model) if wrap else model)
    x, y = zoo_models.make_data(entry, models[0], samples=2)
    keras.utils.set_random_seed(1)
    plain = _gradients(models[0], x, y)
    keras.utils.set_random_seed(1)
    offloaded = _gradients(models[1], x, y)
    names = [v.path for v in models[0].trainable_variables]
    pairs = zip(names, plain, offloaded, strict=True)
    lost = [n for n, a, b in pairs if a is not None and b is None]
    assert not lost, f"variables without a gradient under kswap: {lost}"
    assert [g is None for g in offloaded] == [g is None for g in plain]
    if name not in BIT_IDENTICAL:
        return
    for n, a, b in zip(names, plain, offloaded, strict=True):
        if a is not None:
            np.testing.assert_array_equal(b, a, err_msg=n)
