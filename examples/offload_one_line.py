"""Offload a model's activations to host memory in one line, and train exactly as before.

``kswap.OffloadingModel(model)`` wraps every layer so that the tensors its
backward reads wait in host memory between forward and backward. It keeps
the model's weights and optimizer, so training gives the same numbers. This
script trains a small convolutional network (BatchNormalization, Dropout,
residual connections) twice from the same weights and seed, once as it is and
once offloaded, prints the losses side by side, then profiles three steps
of each and prints the median device peak of a step.

On a machine without a GPU device memory is emulated on the CPU (kswap's host
copies are real copies, counted apart), and the figures printed say so.

Run:
    python examples/offload_one_line.py
"""

from __future__ import annotations

import statistics

import keras
import numpy as np

import kswap  # first: selects TensorFlow's CPU allocator that records memory

MIB = 2**20


def build_model() -> keras.Model:
    """A small residual CNN, built from a fixed seed so both runs start alike."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(16, 3, padding="same", name="conv1")(inputs)
    x = keras.layers.BatchNormalization(name="bn1")(x)
    x = keras.layers.ReLU(name="relu1")(x)
    # Residual blocks of one size: the activations that backward reads grow
    # with depth, what one block's backward works on does not, so offloading
    # saves most of them.
    for i in range(2, 11):
        y = keras.layers.Conv2D(16, 3, padding="same", name=f"conv{i}")(x)
        y = keras.layers.BatchNormalization(name=f"bn{i}")(y)
        y = keras.layers.ReLU(name=f"relu{i}")(y)
        x = keras.layers.Add(name=f"add{i}")([x, y])
    x = keras.layers.MaxPooling2D(name="pool")(x)
    x = keras.layers.Dropout(0.2, seed=1, name="drop")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    outputs = keras.layers.Dense(10, activation="softmax", name="head")(x)
    model = keras.Model(inputs, outputs, name="small_cnn")
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


def main() -> None:
    rng = np.random.default_rng(0)
    # a partial last batch: fit then traces its step for any batch size, the
    # graph kswap.profile runs too, so profiling below traces nothing again
    x = rng.random((132, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, 132)

    plain = build_model()
    offloaded = kswap.OffloadingModel(build_model())  # the one line

    keras.utils.set_random_seed(1)
    plain_losses = plain.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    keras.utils.set_random_seed(1)
    kswap_losses = offloaded.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    plain_losses = plain_losses.history["loss"]
    kswap_losses = kswap_losses.history["loss"]

    print("epoch  loss (plain)          loss (kswap)")
    for epoch, (a, b) in enumerate(zip(plain_losses, kswap_losses, strict=True), 1):
        print(f"{epoch:>5}  {a!r:<20}  {b!r}")
    print("losses identical:", plain_losses == kswap_losses)

    # Three profiled steps of each. Both models live in this process and the
    # allocator counts every tensor, so compare what a step adds on top of
    # what was in use when it began (the step peak), the median of the three:
    # the executor's order, and so one step's peak, varies from step to step.
    # The allocator's blocks (what get_memory_info counts) round a request up,
    # by up to twice, depending on which blocks happen to be free; the bytes
    # the tensors asked for do not move.
    label = "emulated on CPU:0" if not kswap.transfer.has_gpu() else "GPU"
    for name, model in (("plain", plain), ("kswap", offloaded)):
        trace = kswap.profile(model, x, y, steps=3, batch_size=32)
        peak, tensors = (
            statistics.median(trace.step_peak_bytes("device", i, requested=r) for i in range(3))
            for r in (False, True)
        )
        print(
            f"{name}: step peak {peak / MIB:.1f} MiB on the device, its tensors "
            f"{tensors / MIB:.1f} MiB (median of 3 steps), "
            f"{trace.peak_bytes('host') / MIB:.1f} MiB in the host tier ({label})"
        )
    plain_model = kswap.strip(offloaded)  # and back: the same weight objects, no wrappers
    print("strip gives back the plain model:", plain_model.weights[0] is offloaded.weights[0])


if __name__ == "__main__":
    main()
