"""Small models of every kind OffloadingModel supports, built deterministically."""

import keras

SEED = 1234


def sequential():
    return keras.Sequential(
        [
            keras.Input((12, 12, 3)),
            keras.layers.Conv2D(6, 3, padding="same", activation="relu", name="c1"),
            keras.layers.BatchNormalization(name="bn1"),
            keras.layers.MaxPooling2D(name="pool"),
            keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6", name="dw"),
            keras.layers.SeparableConv2D(8, 3, padding="same", name="sep"),
            keras.layers.Dropout(0.25, seed=7, name="drop"),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(16, activation="gelu", name="d1"),
            keras.layers.LayerNormalization(name="ln"),
            keras.layers.Dense(3, activation="softmax", name="out"),
        ],
        name="seq",
    )


def residual():
    inp = keras.Input((10, 10, 4))
    h = keras.layers.ZeroPadding2D(1, name="pad")(inp)
    h = keras.layers.Conv2D(8, 3, name="c1")(h)
    h = keras.layers.BatchNormalization(name="bn1")(h)
    h = keras.layers.Activation("relu", name="r1")(h)
    b = keras.layers.Conv2D(8, 1, name="branch")(h)
    b = keras.layers.BatchNormalization(name="bn2")(b)
    h = keras.layers.Add(name="add")([h, b])
    c = keras.layers.Conv2D(4, 3, padding="same", activation="tanh", name="c2")(h)
    h = keras.layers.Concatenate(name="cat")([h, c])
    h = keras.layers.Multiply(name="mul")([h, h])
    h = keras.layers.Dropout(0.2, seed=3, name="drop")(h)
    h = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    out = keras.layers.Dense(3, activation="softmax", name="out")(h)
    return keras.Model(inp, out, name="res")


def shared_multi_io():
    a = keras.Input((8,), name="a")
    b = keras.Input((8,), name="b")
    shared = keras.layers.Dense(16, activation="sigmoid", name="shared")
    ha, hb = shared(a), shared(b)
    h = keras.layers.Concatenate(name="cat")([ha, hb])
    h = keras.layers.Reshape((4, 8), name="reshape")(h)
    h = keras.layers.Conv1D(4, 2, activation="elu", name="conv1d")(h)
    h = keras.layers.Flatten(name="flat")(h)
    out1 = keras.layers.Dense(2, name="reg")(h)
    out2 = keras.layers.Dense(3, activation="softmax", name="cls")(hb)
    return keras.Model([a, b], [out1, out2], name="multi")


def nested():
    inner_in = keras.Input((6,))
    inner_h = keras.layers.Dense(12, activation="relu", name="inner_d")(inner_in)
    inner_h = keras.layers.BatchNormalization(name="inner_bn")(inner_h)
    inner = keras.Model(inner_in, inner_h, name="inner")
    inp = keras.Input((6,))
    h = inner(inp)
    h = keras.layers.Dense(8, activation="selu", name="mid")(h)
    out = keras.layers.Dense(1, name="out")(h)
    return keras.Model(inp, out, name="outer")


BUILDERS = {
    "sequential": sequential,
    "residual": residual,
    "shared_multi_io": shared_multi_io,
    "nested": nested,
}
