"""Train an offloaded model under ``tf.distribute.MirroredStrategy``.

kswap works under ``tf.distribute``, it does not replace it: build and wrap
the model inside the strategy's scope, then ``fit`` as usual; every replica
offloads its own activations. The script trains a small convolutional
network on two replicas, plain and offloaded, from the same weights and seed,
and prints the losses side by side.

Without two GPUs the script splits the CPU into two logical devices, which
TensorFlow allows only before it creates its devices: so this runs as a
script of its own, and configures the devices before any TensorFlow op.
Optimizer state in host memory (``optimizer_state="host"``) is not supported
under a strategy yet, and says so.

Run:
    python examples/mirrored_strategy.py
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import kswap  # first: selects TensorFlow's CPU allocator that records memory

GLOBAL_BATCH = 32


def strategy() -> tf.distribute.MirroredStrategy:
    """Two replicas: two GPUs if there are, else two logical CPUs (set before any op)."""
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= 2:
        return tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"])
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv1")(inputs)
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv2")(x)
    x = keras.layers.MaxPooling2D(name="pool")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    outputs = keras.layers.Dense(10, activation="softmax", name="head")(x)
    model = keras.Model(inputs, outputs, name="small_cnn")
    model.compile("sgd", "sparse_categorical_crossentropy")
    return model


def main() -> None:
    mirrored = strategy()
    rng = np.random.default_rng(0)
    x = rng.random((GLOBAL_BATCH * 4, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, GLOBAL_BATCH * 4)

    losses = {}
    for name in ("plain", "kswap"):
        with mirrored.scope():
            model = build_model()
            if name == "kswap":
                model = kswap.OffloadingModel(model)  # inside the scope, like the model
        keras.utils.set_random_seed(1)
        history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=2, shuffle=False, verbose=0)
        losses[name] = history.history["loss"]

    print(f"replicas: {mirrored.num_replicas_in_sync}")
    print("epoch  loss (plain)          loss (kswap)")
    for epoch, (a, b) in enumerate(zip(losses["plain"], losses["kswap"], strict=True), 1):
        print(f"{epoch:>5}  {a!r:<20}  {b!r}")
    print("losses identical:", losses["plain"] == losses["kswap"])


if __name__ == "__main__":
    main()
