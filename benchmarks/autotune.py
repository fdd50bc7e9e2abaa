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

Printed per model and process: AutoTune's baseline (measured by it with
every block kept; ``~`` marks its estimate), what the CPU's allocator held
beyond the model's variables when AutoTune's last profiled window began
(``fit``'s input arrays and the batches its pipeline had prefetched, which
AutoTune counts as host memory when the device is emulated; 0 on a GPU), the
budget it derived from it, the device peak measured after its last plan and
that peak as a fraction of the measured baseline, the rounds (each plan's
predicted peak, the measured one, and in brackets the measured peak of the
bytes the tensors asked for: the rest is what the allocator's blocks held
beyond them), the plan's actions and predicted slowdown, and whether the
losses are bit-identical (else the largest relative difference), beside the
differences that switching Grappler's remapper off and training the plain
model once more make (TensorFlow's own noise: with its default inter-op
threads, TensorFlow's CPU ``AddN`` sums a gradient's terms in an order that
changes from run to run, and Adam grows that to ~1e-2 in the loss within a
few steps at 96x96, batch 32; ``--inter-op-threads 1`` makes the plain model
repeat itself bit for bit, and then kswap must match it bit for bit);
AutoTune's warnings are in the JSON. Without a GPU, device memory is emulated on CPU:0.

``--replicas N`` trains every model under ``tf.distribute.MirroredStrategy``
over N devices (N GPUs where there are, else N logical CPUs sharing CPU:0's
allocator), at the same global batch. The budget, the baseline and the peaks
are then per replica, of the busiest one (:mod:`kswap.trace.replicas`); the
table adds the baseline of all replicas together.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import warnings

from _common import (
    device_label,
    inter_op_threads_arg,
    mib,
    run_worker,
    set_inter_op_threads,
    table,
)
from offload import build_variant


def _scope(strategy):
    """The strategy's scope, or no scope for one replica."""
    return contextlib.nullcontext() if strategy is None else strategy.scope()


def _build(name, input_shape, strategy=None):
    with _scope(strategy):
        return build_variant(name, "baseline", input_shape)


def _strategy(replicas: int):
    """MirroredStrategy over ``replicas`` GPUs, or logical CPUs; None for one replica."""
    if replicas <= 1:
        return None
    from tests.layers.helpers import mirrored_strategy

    return mirrored_strategy(replicas)


def _fit(model, x, y, batch, callbacks=()):
    import keras

    losses = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda _, logs: losses.append(float(logs["loss"]))
    )
    keras.utils.set_random_seed(1)
    model.fit(x, y, batch_size=batch, shuffle=False, verbose=0, callbacks=[*callbacks, record])
    return losses


def _baseline(r: dict) -> str:
    """AutoTune's baseline: measured with every block kept, else estimated (marked ~)."""
    if r["autotune_baseline_bytes"]:
        return mib(r["autotune_baseline_bytes"])
    est = r["estimated_baseline_bytes"]
    return "-" if est is None else "~" + mib(est)


def _deviation(losses, reference) -> float:
    """The largest relative difference of two runs' per-step losses."""
    return max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, reference, strict=True))


def worker(args) -> dict:
    import kswap
    from kswap.modelspec import synthetic_data
    from kswap.trace.replicas import replica_peaks

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.layers.exactness import remapper

    set_inter_op_threads(args.inter_op_threads)
    strategy = _strategy(args.replicas)

    def build():
        return _build(args.model, args.input, strategy)

    model = build()
    x, y = synthetic_data(model, args.batch * args.steps)
    baseline = kswap.profile(model, x, y, steps=2, batch_size=args.batch)
    last = len(baseline.steps) - 1
    budget = float(args.budget) if args.budget.replace(".", "", 1).isdigit() else args.budget
    tune = kswap.AutoTune(budget, link=args.link, profile_steps=1, verbose=1)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _scope(strategy):
            offloaded = kswap.OffloadingModel(model)
        losses = _fit(offloaded, x, y, args.batch, [tune])
    seconds = time.perf_counter() - t0
    reference = _fit(build(), x, y, args.batch)
    again = _fit(build(), x, y, args.batch)  # TensorFlow's run-to-run
    with remapper(False):  # TensorFlow's own noise: its op fusions switched off
        noise = _fit(build(), x, y, args.batch)
    plan = tune.plan
    if args.plans and plan is not None and not tune.restored:
        os.makedirs(args.plans, exist_ok=True)
        plan.to_json(os.path.join(args.plans, f"{args.model}-{os.getpid()}.json"))
    return {
        # per replica, the busiest one's (the whole trace's for one replica)
        "measured_baseline_bytes": max(replica_peaks(baseline, "device", last).values()),
        "all_replicas_baseline_bytes": baseline.peak_bytes("device", last),
        "replicas": tune.replicas,
        "estimated_baseline_bytes": plan.baseline_peak_bytes if plan else None,
        "autotune_baseline_bytes": tune.baseline_peak_bytes,
        "budget_bytes": tune.budget_bytes,
        "held_bytes": tune.held_bytes,
        "start_peak_bytes": tune.start_peak_bytes,
        "rounds": [
            {
                "target_bytes": r.target_bytes,
                "predicted_bytes": r.plan.predicted_peak_bytes,
                "measured_bytes": r.measured_peak_bytes,
                "tensor_bytes": r.measured_tensor_bytes,
            }
            for r in tune.rounds
        ],
        "final_peak_bytes": tune.start_peak_bytes if tune.restored else tune.measured_peak_bytes,
        "restored": tune.restored,
        "counts": plan.counts() if plan else {},
        "optimizer_state": plan.optimizer_state if plan else None,
        "slowdown": plan.slowdown if plan else None,
        "bit_identical": losses == reference,
        "max_loss_rel_diff": _deviation(losses, reference),
        "remapper_off_rel_diff": _deviation(noise, reference),
        "plain_again_rel_diff": _deviation(again, reference),
        "inter_op_threads": args.inter_op_threads,
        "warnings": [str(w.message) for w in caught if "kswap" in str(w.message)],
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
    p.add_argument("--steps", type=int, default=14)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--link", default=None, help="a preset name; default: measured")
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--plans", default=None, help="keep AutoTune's last plans here (JSON)")
    p.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="train under MirroredStrategy over this many GPUs or logical CPUs",
    )
    inter_op_threads_arg(
        p, ". With 1 the plain model repeats itself bit for bit, and so must kswap"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    options = dict(
        input=args.input,
        batch=args.batch,
        budget=args.budget,
        steps=args.steps,
        inter_op_threads=args.inter_op_threads,
        replicas=args.replicas,
    )
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
                + ("" if d.get("tensor_bytes") is None else f" ({mib(d['tensor_bytes'])})")
                for d in r["rounds"]
            )
            rows.append(
                [
                    name,
                    i + 1,
                    mib(base),
                    mib(r["all_replicas_baseline_bytes"]),
                    _baseline(r),
                    mib(r.get("held_bytes") or 0),
                    "-" if r["budget_bytes"] is None else mib(r["budget_bytes"]),
                    "-" if final is None else mib(final),
                    "-" if final is None else f"{final / base:.3f}",
                    rounds + (" (restored)" if r["restored"] else ""),
                    ", ".join(f"{n} {k}" for k, n in r["counts"].items() if n),
                    r["optimizer_state"] or "-",
                    "-" if r["slowdown"] is None else f"{r['slowdown']:.2f}",
                    "yes" if r["bit_identical"] else f"{r['max_loss_rel_diff']:.1e}",
                    f"{r['remapper_off_rel_diff']:.1e}",
                    f"{r['plain_again_rel_diff']:.1e}",
                ]
            )
            print(f"{name} process {i + 1}: {json.dumps(r)}", flush=True)
    print(
        f"\n{args.models} {args.input}, batch {args.batch}, budget {args.budget}, "
        f"{args.steps} steps"
        + (f", {args.replicas} replicas (figures per replica)" if args.replicas > 1 else "")
        + f"; {device_label(emulated)}\n"
    )
    print(
        table(
            [
                "model",
                "process",
                "measured baseline MiB",
                "all replicas MiB",
                "AutoTune's baseline MiB",
                "held by fit's data MiB",
                "budget MiB",
                "peak after MiB",
                "of measured baseline",
                "rounds: predicted->measured (tensors) MiB",
                "actions",
                "slots",
                "predicted slowdown",
                "losses bit-identical",
                "remapper off",
                "plain again",
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
