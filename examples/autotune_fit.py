"""Meet a device memory budget inside ``fit`` with ``kswap.AutoTune``.

``kswap.AutoTune(budget=0.5)`` is a Keras callback. During the first steps of
``fit`` it profiles the step, measures the device peak with every block kept
(the baseline), plans per block whether the tensors its backward reads stay
on the device, go to host memory or are recomputed, applies the plan, and
measures the next step against the budget (planning again, tighter, if it is
over). Training goes on with the plan applied.

The model here is a stack of Dense layers whose activations (batch 2048) are
most of the step's memory, so half its peak is within reach; the callback's
own lines (``verbose=1``) say what it planned and measured, and the script
then prints the plan's table and whether the measured peak is under the
budget. With ``--logdir`` the rounds also go to TensorBoard
(``tensorboard --logdir DIR``: scalars, the plan as text, a device-memory
chart, and the Profile plugin's memory profile).

On a machine without a GPU device memory is emulated on the CPU, and the
figures printed say so.

Run:
    python examples/autotune_fit.py [--budget 0.5] [--logdir DIR]
"""

from __future__ import annotations

import argparse

import keras
import numpy as np

import kswap  # first: selects TensorFlow's CPU allocator that records memory

MIB = 2**20
WIDTH, BATCH, EPOCHS = 128, 2048, 7


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((WIDTH,))
    x = inputs
    for i in range(20):
        x = keras.layers.Dense(WIDTH, activation="tanh", name=f"dense{i}")(x)
    outputs = keras.layers.Dense(4, activation="softmax", name="head")(x)
    model = keras.Model(inputs, outputs, name="mlp")
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.5, help="a fraction of the baseline")
    parser.add_argument("--logdir", default=None, help="write AutoTune's rounds for TensorBoard")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    x = rng.random((2 * BATCH, WIDTH), dtype=np.float32)  # two steps an epoch
    y = rng.integers(0, 4, 2 * BATCH)

    model = kswap.OffloadingModel(build_model())  # every layer wrapped
    tune = kswap.AutoTune(budget=args.budget, link="pcie4", profile_steps=1, logdir=args.logdir)
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=[tune])

    label = "emulated on CPU:0" if not kswap.transfer.has_gpu() else "GPU"
    if tune.plan is None:
        print("no plan was applied: the model keeps its own actions")
        return
    print(tune.plan.table(tune.workload))
    budget = tune.budget_bytes
    peak = tune.measured_peak_bytes
    print(f"baseline device peak:  {tune.baseline_peak_bytes / MIB:.2f} MiB ({label})")
    print(f"budget:                {budget / MIB:.2f} MiB")
    if peak is None:
        print("fit ended before the last plan's step was measured: give it more steps")
        return
    print(f"measured device peak:  {peak / MIB:.2f} MiB ({label})")
    print(f"under the budget: {peak <= budget}  (rounds: {len(tune.rounds)})")


if __name__ == "__main__":
    main()
