"""Offload a keras_hub transformer: a small GPT-2 trained for next-token prediction.

A keras_hub backbone is a functional Keras model, so ``kswap.OffloadingModel``
wraps its layers like any other's (the backbone nested under a language-model
head here, as keras_hub's task models call it). The backbone is built from a
small configuration: no preset, no weights, nothing downloaded. The script
trains it plain and offloaded from the same weights and seed, prints the
losses side by side, then profiles one step of each and prints its device
step peak.

Needs keras-hub (``pip install keras-hub``; ``make`` installs it beside
tensorflow-cpu). On a machine without a GPU device memory is emulated on the
CPU, and the figures printed say so.

Run:
    python examples/keras_hub_transformer.py
"""

from __future__ import annotations

import keras
import keras_hub
import numpy as np

import kswap  # first: selects TensorFlow's CPU allocator that records memory

VOCAB, LENGTH, BATCH = 500, 32, 16
MIB = 2**20


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCAB,
        num_layers=2,
        num_heads=2,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=LENGTH,
    )
    logits = keras.layers.Dense(VOCAB, name="lm_head")(backbone.output)
    model = keras.Model(backbone.input, logits, name="gpt2_lm")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def main() -> None:
    rng = np.random.default_rng(0)
    # a partial last batch: fit then traces its step for any batch size, the
    # graph kswap.profile runs too, so profiling below traces nothing again
    ids = rng.integers(0, VOCAB, (BATCH * 4 + 4, LENGTH + 1)).astype("int32")
    x = {"token_ids": ids[:, :-1], "padding_mask": np.ones_like(ids[:, :-1])}
    y = ids[:, 1:]  # the next token at every position

    plain = build_model()
    offloaded = kswap.OffloadingModel(build_model())

    keras.utils.set_random_seed(1)
    plain_losses = plain.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    keras.utils.set_random_seed(1)
    kswap_losses = offloaded.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    plain_losses = plain_losses.history["loss"]
    kswap_losses = kswap_losses.history["loss"]

    print("epoch  loss (plain)          loss (kswap)")
    for epoch, (a, b) in enumerate(zip(plain_losses, kswap_losses, strict=True), 1):
        print(f"{epoch:>5}  {a!r:<20}  {b!r}")
    print("losses identical:", plain_losses == kswap_losses)

    label = "emulated on CPU:0" if not kswap.transfer.has_gpu() else "GPU"
    for name, model in (("plain", plain), ("kswap", offloaded)):
        trace = kswap.profile(model, x, y, steps=1, batch_size=BATCH)
        print(
            f"{name}: step peak {trace.step_peak_bytes('device') / MIB:.2f} MiB on the device, "
            f"{trace.peak_bytes('host') / MIB:.2f} MiB in the host tier ({label})"
        )


if __name__ == "__main__":
    main()
