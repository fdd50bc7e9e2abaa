"""kswap.AutoTune inside fit: the budget it meets, against the measured baseline, and its losses.

    python benchmarks/autotune.py                                  # MobileNetV2, 64x64, batch 32
    python benchmarks/autotune.py --models ResNet50,MobileNetV2,VGG16 --input 96,96,3 --processes 3

Each model (keras.applications, ``weights=None``, Adam, seed 0, as
``benchmarks/offload.py`` builds it) runs in ``--processes`` fresh
processes. Each process:

1. measures the plain model's device peak (``kswap.profile``, 2 steps, the
   last one's peak): the **measured baseline**;
2. wraps it (``kswap.OffloadingModel``, the default policy) and trains it
   through ``fit`` on synthetic data for ``--steps`` steps with
   ``kswap.AutoTune(budget, profile_steps=1)``;
3. trains a second copy of the plain model (same seed, same batches) through
   ``fit`` and compares the per-step losses with those of step 2.

Printed per model and process: AutoTune's own estimate of the baseline and
the budget it derived from it, the device peak measured after its last
plan, that peak as a fraction of the measured baseline, the rounds, the
plan's actions and predicted slowdown, and whether the losses are
bit-identical (else the largest relative difference). Without a GPU,
device memory is emulated on CPU:0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from _common import device_label, mib, run_worker, table
from offload import build_variant


def _build(name, input_shape):
    return build_variant(name, "baseline", input_shape)


def _fit(model, x, y, batch, callbacks=()):
    import keras

    losses = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda _, logs: losses.append(float(logs["loss"]))
    )
    keras.utils.set_random_seed(1)
    model.fit(x, y, batch_size=batch, shuffle=False, verbose=0, callbacks=[*callbacks, record])
    return losses


def worker(args) -> dict:
    import kswap
    from kswap.modelspec import synthetic_data

    model = _build(args.model, args.input)
    x, y = synthetic_data(model, args.batch * args.steps)
    baseline = kswap.profile(model, x, y, steps=2, batch_size=args.batch)
    budget = float(args.budget) if args.budget.replace(".", "", 1).isdigit() else args.budget
    tune = kswap.AutoTune(budget, link=args.link, profile_steps=1, verbose=1)
    t0 = time.perf_counter()
    losses = _fit(kswap.OffloadingModel(model), x, y, args.batch, [tune])
    seconds = time.perf_counter() - t0
    reference = _fit(_build(args.model, args.input), x, y, args.batch)
    rel = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, reference, strict=True))
    plan = tune.plan
    if args.plans and plan is not None and not tune.restored:
        os.makedirs(args.plans, exist_ok=True)
        plan.to_json(os.path.join(args.plans, f"{args.model}-{os.getpid()}.json"))
    return {
        "measured_baseline_bytes": baseline.peak_bytes("device", len(baseline.steps) - 1),
        "estimated_baseline_bytes": plan.baseline_peak_bytes if plan else None,
        "budget_bytes": tune.rounds[0].target_bytes if tune.rounds else None,
        "start_peak_bytes": tune.start_peak_bytes,
        "rounds": [
            {
                "target_bytes": r.target_bytes,
                "predicted_bytes": r.plan.predicted_peak_bytes,
                "measured_bytes": r.measured_peak_bytes,
            }
            for r in tune.rounds
        ],
        "final_peak_bytes": tune.start_peak_bytes if tune.restored else tune.measured_peak_bytes,
        "restored": tune.restored,
        "counts": plan.counts() if plan else {},
        "optimizer_state": plan.optimizer_state if plan else None,
        "slowdown": plan.slowdown if plan else None,
        "bit_identical": losses == reference,
        "max_loss_rel_diff": rel,
        "fit_seconds": seconds,
        "emulated": not kswap.transfer.has_gpu(),
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="MobileNetV2", help="keras.applications names")
    p.add_argument("--input", default="64,64,3")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--budget", default="0.5", help="fraction, bytes or size ('200MiB')")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--link", default=None, help="a preset name; default: measured")
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--plans", default=None, help="keep AutoTune's last plans here (JSON)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    options = dict(input=args.input, batch=args.batch, budget=args.budget, steps=args.steps)
    if args.link:
        options["link"] = args.link
    if args.plans:
        options["plans"] = os.path.abspath(args.plans)
    results: dict[str, list[dict]] = {}
    rows = []
    emulated = True
    for name in args.models.split(","):
        results[name] = []
        for i in range(args.processes):
            r = run_worker(__file__, model=name, **options)
            results[name].append(r)
            emulated = r["emulated"]
            base = r["measured_baseline_bytes"]
            final = r["final_peak_bytes"]
            rounds = "; ".join(
                f"{mib(d['predicted_bytes'])}->"
                + ("-" if d["measured_bytes"] is None else mib(d["measured_bytes"]))
                for d in r["rounds"]
            )
            rows.append(
                [
                    name,
                    i + 1,
                    mib(base),
                    "-"
                    if r["estimated_baseline_bytes"] is None
                    else mib(r["estimated_baseline_bytes"]),
                    "-" if r["budget_bytes"] is None else mib(r["budget_bytes"]),
                    "-" if final is None else mib(final),
                    "-" if final is None else f"{final / base:.3f}",
                    rounds + (" (restored)" if r["restored"] else ""),
                    ", ".join(f"{n} {k}" for k, n in r["counts"].items() if n),
                    r["optimizer_state"] or "-",
                    "-" if r["slowdown"] is None else f"{r['slowdown']:.2f}",
                    "yes" if r["bit_identical"] else f"{r['max_loss_rel_diff']:.1e}",
                ]
            )
            print(f"{name} process {i + 1}: {json.dumps(r)}", flush=True)
    print(
        f"\n{args.models} {args.input}, batch {args.batch}, budget {args.budget}, "
        f"{args.steps} steps; {device_label(emulated)}\n"
    )
    print(
        table(
            [
                "model",
                "process",
                "measured baseline MiB",
                "AutoTune's baseline MiB",
                "budget MiB",
                "peak after MiB",
                "of measured baseline",
                "rounds: predicted->measured MiB",
                "actions",
                "slots",
                "predicted slowdown",
                "losses bit-identical",
            ],
            rows,
        )
    )
    for name, runs in results.items():
        fractions = [
            r["final_peak_bytes"] / r["measured_baseline_bytes"]
            for r in runs
            if r["final_peak_bytes"] is not None
        ]
        if fractions:
            print(
                f"{name}: peak after tuning / measured baseline, median "
                f"{statistics.median(fractions):.3f}, max {max(fractions):.3f}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
