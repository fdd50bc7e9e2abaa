"""Train an offloaded model with your own ``tf.GradientTape`` loop.

``kswap.OffloadingModel`` returns a Keras model, so a custom training loop
uses it like any other: call it under a ``tf.GradientTape`` inside a
``tf.function`` (copies between the device and host memory overlap compute
only in graph mode) and apply the gradients. The script trains a small
convolutional network with such a loop twice, from the same weights and seed,
plain and offloaded, over a ``tf.data`` pipeline, and prints the losses side
by side and whether the weights end up the same.

Apply the gradients inside the same ``tf.function`` as here: a function that
returns the gradients instead is optimized differently by TensorFlow's
Grappler, and its results can differ in the last bits from the plain model's
(see docs/limits.md).

Run:
    python examples/custom_loop.py
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import kswap  # first: selects TensorFlow's CPU allocator that records memory

BATCH, STEPS = 32, 6


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(16, 3, padding="same", name="conv1")(inputs)
    x = keras.layers.BatchNormalization(name="bn1")(x)
    x = keras.layers.ReLU(name="relu1")(x)
    x = keras.layers.Conv2D(32, 3, strides=2, activation="relu", name="conv2")(x)
    x = keras.layers.Dropout(0.2, seed=1, name="drop")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    outputs = keras.layers.Dense(10, name="logits")(x)
    return keras.Model(inputs, outputs, name="small_cnn")


def train(model: keras.Model, dataset: tf.data.Dataset) -> list[float]:
    """Plain TensorFlow: a tape, the gradients, the optimizer, in one tf.function."""
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
        return loss

    keras.utils.set_random_seed(1)  # Dropout's seeds: the same in both runs
    return [float(step(x, y)) for x, y in dataset]


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((BATCH * STEPS, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, BATCH * STEPS)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)

    plain = build_model()
    offloaded = kswap.OffloadingModel(build_model())
    plain_losses = train(plain, dataset)
    kswap_losses = train(offloaded, dataset)

    print("step  loss (plain)          loss (kswap)")
    for i, (a, b) in enumerate(zip(plain_losses, kswap_losses, strict=True), 1):
        print(f"{i:>4}  {a!r:<20}  {b!r}")
    same_weights = all(
        np.array_equal(a.numpy(), b.numpy())
        for a, b in zip(plain.weights, offloaded.weights, strict=True)
    )
    print("losses identical:", plain_losses == kswap_losses)
    print("weights identical:", same_weights)


if __name__ == "__main__":
    main()
