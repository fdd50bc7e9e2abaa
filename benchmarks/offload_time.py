"""Step time of offloading, variants side by side in one process.

    python benchmarks/offload_time.py --model MobileNetV2 --rounds 25
    python benchmarks/offload_time.py --model LSTM --input 100 --batch 64 \
        --variants baseline,all,all@0,all-recompute-loops,all@0-recompute-loops

``benchmarks/offload.py`` measures each variant in a fresh process, which
isolates memory but lets the machine's speed drift between processes. This
one builds every variant in one process (each from the same seed, with its
own weights), warms each up with a ``model.fit`` step and one more step, then
runs ``--rounds`` rounds of one step per variant and reports median step
times and their ratio to the first variant, and how long each variant's first
step took (tracing the training function included). Steps run fit's own
graph (``kswap.profiler.fit_steps.FitSteps``: ``train_function`` on a dataset of
one batch, batch dimension unknown as fit traces arrays). The process's CPU
time per step (all threads) is reported too: on a shared machine it drifts
less than wall time. Memory is not measured here. On a machine without a GPU
the host copies are memory copies on the same cores as the compute.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _common import table
from offload import SEQUENCE_MODELS, build_variant


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--model", default="MobileNetV2", help="a keras.applications name, or LSTM (offload.py)"
    )
    p.add_argument("--variants", default="baseline,all,all@0", help="as in offload.py")
    p.add_argument("--input", default="96,96,3")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--rounds", type=int, default=25)
    args = p.parse_args()
    if args.rounds < 1:
        p.error(f"--rounds must be >= 1. Received: {args.rounds}")

    from kswap.modelspec import synthetic_data
    from kswap.profiler.fit_steps import FitSteps

    variants = args.variants.split(",")
    steps, data, first = {}, None, {}
    for v in variants:
        model = build_variant(args.model, v, args.input)
        if data is None:
            data = synthetic_data(model, args.batch)
            if args.model in SEQUENCE_MODELS:  # token ids
                ids = np.random.default_rng(0).integers(0, 1000, data[0].shape)
                data = (ids.astype("int32"), data[1])
        steps[v] = FitSteps(model, [data])
        first[v] = steps[v].warm_up(0)  # traces the step before the next variant is built
        steps[v].run(0)
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for variant, fit in steps.items():
            cpu_start = time.process_time()
            seconds[variant].append(fit.run(0))
            cpu[variant].append(time.process_time() - cpu_start)
    base = statistics.median(seconds[variants[0]])
    cpu_base = statistics.median(cpu[variants[0]])
    rows = [
        [
            args.model,
            v,
            f"{statistics.median(seconds[v]) * 1000:.0f}",
            f"{statistics.median(seconds[v]) / base:.2f}",
            f"{statistics.median(cpu[v]) * 1000:.0f}",
            f"{statistics.median(cpu[v]) / cpu_base:.2f}",
            f"{first[v]:.1f}",
        ]
        for v in variants
    ]
    print(
        f"\ninput {args.input}, batch {args.batch}; median of {args.rounds} rounds, "
        "one step of each variant per round\n"
    )
    headers = ["model", "variant", "step ms", f"time / {variants[0]}", "CPU ms", "CPU / first"]
    print(table([*headers, "first step s"], rows))


if __name__ == "__main__":
    main()
