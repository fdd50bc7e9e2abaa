"""Tiny models for the profiler tests."""

import keras
import numpy as np


def chain(widths=(256, 512, 384), inputs=128, name="chain"):
    layers = [keras.Input((inputs,))]
    layers += [
        keras.layers.Dense(w, use_bias=False, name=f"d{i + 1}") for i, w in enumerate(widths)
    ]
    model = keras.Sequential(layers, name=name)
    model.compile(keras.optimizers.SGD(0.01), "mse")
    return model


def data(model, n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, *model.inputs[0].shape[1:]), dtype=np.float32)
    y = rng.random((n, *model.outputs[0].shape[1:]), dtype=np.float32)
    return x, y


def small_cnn(name="cnn"):
    inp = keras.Input((16, 16, 3))
    h = keras.layers.Conv2D(8, 3, padding="same", name="conv")(inp)
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.Activation("relu", name="relu")(h)
    h = keras.layers.Dropout(0.3, seed=3, name="drop")(h)
    h = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    out = keras.layers.Dense(4, activation="softmax", name="head")(h)
    model = keras.Model(inp, out, name=name)
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


def cnn_data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 16, 16, 3), dtype=np.float32), rng.integers(0, 4, n)


def sequence_chain(length=4096, channels=32, depth=3, name="sequence"):
    """Few weights, large activations: memory grows with the batch.

    Dense layers over a sequence of ``length`` steps: each output is
    ``length * channels`` floats per example, and no kernel of the step takes
    scratch memory out of proportion to them.
    """
    inp = keras.Input((length, 8))
    h = inp
    for i in range(depth):
        h = keras.layers.Dense(channels, activation="relu", name=f"c{i}")(h)
    out = keras.layers.Dense(2, name="head")(keras.layers.GlobalAveragePooling1D(name="gap")(h))
    model = keras.Model(inp, out, name=name)
    model.compile(keras.optimizers.SGD(0.01), "mse")
    return model
