"""kswap.AutoTune inside fit: its plans, their predicted peaks, and what the next step measured.

    python benchmarks/autotune.py                                  # MobileNetV2, 64x64, batch 32
    python benchmarks/autotune.py --model ResNet50 --input 96,96,3 --budget 0.5 --steps 10

The model (keras.applications, ``weights=None``, 5 classes, Adam, as
``benchmarks/offload.py`` builds it) is wrapped by ``kswap.OffloadingModel``
and trained through ``fit`` on synthetic data for ``--steps`` steps with
``kswap.AutoTune(budget)``. Printed per round: the budget the plan was made
for, its predicted device peak and slowdown, the counts of its actions and
the device peak the profiled step after it measured; then the device peak of
the first profiled step (the model's own actions) and whether AutoTune went
back to them. Without a GPU, device memory is emulated on CPU:0.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import device_label, mib, table


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="MobileNetV2", help="a keras.applications name")
    p.add_argument("--input", default="64,64,3")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--budget", default="0.5", help="fraction, bytes or size ('200MiB')")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--link", default=None, help="a preset name; default: measured")
    args = p.parse_args()

    import keras

    import kswap

    shape = tuple(int(v) for v in args.input.split(","))
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, args.model)(weights=None, input_shape=shape, classes=5)
    model.compile("adam", "sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.random((args.batch * args.steps, *shape), dtype=np.float32)
    y = rng.integers(0, 5, args.batch * args.steps)
    budget = float(args.budget) if args.budget.replace(".", "", 1).isdigit() else args.budget
    tune = kswap.AutoTune(budget, link=args.link, profile_steps=1, verbose=1)
    t0 = time.perf_counter()
    kswap.OffloadingModel(model).fit(x, y, batch_size=args.batch, callbacks=[tune], verbose=0)
    seconds = time.perf_counter() - t0
    rows = [
        [
            i + 1,
            mib(r.target_bytes),
            mib(r.plan.predicted_peak_bytes),
            "-" if r.measured_peak_bytes is None else mib(r.measured_peak_bytes),
            f"{r.plan.slowdown:.2f}",
            ", ".join(f"{n} {k}" for k, n in r.plan.counts().items()),
            r.plan.optimizer_state,
        ]
        for i, r in enumerate(tune.rounds)
    ]
    print(
        f"\n{args.model} {args.input}, batch {args.batch}, budget {args.budget}, "
        f"{args.steps} steps in {seconds:.0f} s; {device_label(not kswap.transfer.has_gpu())}\n"
    )
    print(
        table(
            [
                "round",
                "target MiB",
                "predicted MiB",
                "measured MiB",
                "slowdown",
                "actions",
                "slots",
            ],
            rows,
        )
    )
    start = "-" if tune.start_peak_bytes is None else mib(tune.start_peak_bytes)
    print(
        f"\nfirst profiled step (the model's own actions): {start} MiB; restored: {tune.restored}"
    )


if __name__ == "__main__":
    main()
