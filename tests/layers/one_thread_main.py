"""Offloading with one inter-op thread (``python -m tests.layers.one_thread_main``).

TensorFlow's thread count is fixed before its runtime starts, so this runs
apart from the suite. It trains a chain of convolutions plain and offloaded
(``policy="all"``) for three steps through ``fit`` from the same seed, then
profiles one step of each, and prints as JSON on its last line whether the
losses and weights are bit-identical and both device peaks. With
``--no-gate`` the forward does not wait for the host copies
(``kswap.layers.schedule.ONE_THREAD_GATES = False``). With ``--zoo NAME``
it then trains model ``NAME`` of ``tests/layers/test_exactness_zoo.py`` as
well, plain and offloaded as that test does, and adds the deviation (one
process for both: TensorFlow's start takes seconds).
"""

import argparse
import dataclasses
import json

import tensorflow as tf

tf.config.threading.set_inter_op_parallelism_threads(1)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import kswap  # noqa: E402
from kswap.layers import schedule  # noqa: E402


def build():
    """Eight 3x3 convolutions on 32x32x16, batch 64: each output 4 MiB, weights 0.1 MiB."""
    keras.utils.set_random_seed(0)
    layers = [keras.Input((32, 32, 16))]
    layers += [
        keras.layers.Conv2D(16, 3, padding="same", activation="tanh", name=f"c{i}")
        for i in range(8)
    ]
    layers += [keras.layers.GlobalAveragePooling2D(name="gap"), keras.layers.Dense(4, name="out")]
    model = keras.Sequential(layers, name="chain")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class Losses(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def zoo(name: str) -> dict:
    """How far the offloaded model ``name`` trains from the plain one."""
    from tests.layers.exactness import deviation, train
    from tests.layers.test_exactness_zoo import MODELS, STEPS

    build, make_data, batch = MODELS[name]
    x, y = make_data(batch * STEPS)
    plain = train(build, x, y, batch)
    return dataclasses.asdict(deviation(train(build, x, y, batch, offload=True), plain))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-gate", action="store_true")
    parser.add_argument("--zoo", help="a model of tests/layers/test_exactness_zoo.py")
    args = parser.parse_args()
    schedule.ONE_THREAD_GATES = not args.no_gate
    rng = np.random.default_rng(0)
    x = rng.random((192, 32, 32, 16), dtype=np.float32)
    y = rng.integers(0, 4, 192)
    runs = {}
    for name, make in (("plain", build), ("kswap", lambda: kswap.OffloadingModel(build()))):
        model = make()
        losses = Losses()
        model.fit(x, y, batch_size=64, shuffle=False, verbose=0, callbacks=[losses])
        trace = kswap.profile(model, x, y, steps=1, batch_size=64)
        runs[name] = (model, losses.losses, trace.peak_bytes("device", requested=True))
    (plain, plain_losses, plain_peak), (off, off_losses, off_peak) = runs.values()
    result = {
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "losses_identical": plain_losses == off_losses,
        "weights_identical": all(
            np.array_equal(a.numpy(), b.numpy())
            for a, b in zip(plain.weights, off.weights, strict=True)
        ),
        "plain_peak_bytes": plain_peak,
        "kswap_peak_bytes": off_peak,
    }
    if args.zoo:  # after the chain's peaks: the allocator counts every model of the process
        result["deviation"] = zoo(args.zoo)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
