"""Tiny models for the static estimate's tests and the ``kswap plan`` command line."""

import keras


def mlp(input_shape=(64,), classes=10, **_):
    """Dense(256) -> ReLU -> Dense(classes): 64 * 256 + 256 + 256 * 10 + 10 weights."""
    return keras.Sequential(
        [
            keras.Input(input_shape),
            keras.layers.Dense(256, name="a"),
            keras.layers.ReLU(name="relu"),
            keras.layers.Dense(classes, name="b"),
        ],
        name="mlp",
    )


def convnet(input_shape=(32, 32, 3), classes=10, **_):
    """Conv2D(8, 3, relu) -> MaxPooling2D -> Flatten -> Dense."""
    return keras.Sequential(
        [
            keras.Input(input_shape),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv"),
            keras.layers.MaxPooling2D(name="pool"),
            keras.layers.Flatten(name="flatten"),
            keras.layers.Dense(classes, name="dense"),
        ],
        name="convnet",
    )


def deep_mlp(input_shape=(256,), classes=10, **_):
    """Four Dense(512) + ReLU pairs, then Dense(classes): room for a plan to save."""
    layers = [keras.Input(input_shape)]
    for i in range(4):
        layers += [keras.layers.Dense(512, name=f"d{i}"), keras.layers.ReLU(name=f"r{i}")]
    layers.append(keras.layers.Dense(classes, name="out"))
    return keras.Sequential(layers, name="deep_mlp")
