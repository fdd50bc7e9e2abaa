"""The static estimate of the baseline's device peak against the measured one.

    python benchmarks/estimate.py                     # MobileNetV2, ResNet50, VGG16
    python benchmarks/estimate.py --models ResNet50 --input 64,64,3 --batch 16 --repeats 1

For each model (built as ``benchmarks/offload.py`` builds it: keras.applications,
``weights=None``, VGG16 with ``include_top=False``, Adam), in fresh processes:

- **estimate**: ``kswap.estimate_workload(model, batch)`` (the forward pass
  traced at the batch size, nothing run) and the simulated peak of its
  baseline (every block kept, the optimizer's slots on the device);
- **measured**: ``kswap.measure`` of the plain model through ``fit``'s step
  (``benchmarks/offload.py --variants baseline``), ``--repeats`` fresh
  processes: the device peak (allocator blocks, the figure that decides
  whether training fits) and the tensor peak (the bytes tensors asked for).

Without a GPU, device memory is emulated on CPU:0. The parent process runs no
TensorFlow; the processes run one at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from _common import device_label, mib, run_worker, table

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(args) -> None:
    """Prints the estimate of one model as JSON (in a fresh process)."""
    sys.path.insert(0, HERE)
    from offload import build_variant

    import kswap
    from kswap.planning import simulate

    model = build_variant(args.model, "baseline", args.input, args.optimizer)
    work = kswap.estimate_workload(model, args.batch)
    sim = simulate(work, "keep", "cpu")
    print(
        json.dumps(
            {
                "peak_bytes": sim.peak_bytes,
                "persistent_bytes": work.persistent_bytes(),
                "saved_bytes": work.saved_bytes,
                "weight_bytes": work.weight_bytes,
                "optimizer_bytes": work.optimizer_bytes,
                "blocks": len(work.blocks),
            }
        )
    )


def _measure(args, name: str) -> dict:
    return run_worker(
        os.path.join(HERE, "offload.py"),
        model=name,
        variant="baseline",
        input=args.input,
        batch=args.batch,
        steps=args.steps,
        optimizer=args.optimizer,
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="MobileNetV2,ResNet50,VGG16")
    p.add_argument("--input", default="96,96,3")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--optimizer", default="adam")
    p.add_argument("--repeats", type=int, default=3, help="fresh measured processes per model")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    rows, emulated = [], False
    for name in args.models.split(","):
        est = run_worker(
            __file__, model=name, input=args.input, batch=args.batch, optimizer=args.optimizer
        )
        runs = [_measure(args, name) for _ in range(args.repeats)]
        emulated |= any(r.get("emulated", False) for r in runs)
        device = statistics.median(r["device_peak_bytes"] for r in runs)
        tensor = statistics.median(r["tensor_peak_bytes"] for r in runs)
        lo = min(r["device_peak_bytes"] for r in runs)
        hi = max(r["device_peak_bytes"] for r in runs)
        rows.append(
            [
                name,
                mib(est["peak_bytes"]),
                mib(est["persistent_bytes"]),
                mib(device),
                f"{mib(lo)}-{mib(hi)}",
                f"{100 * (est['peak_bytes'] / device - 1):+.1f}%",
                mib(tensor),
                f"{100 * (est['peak_bytes'] / tensor - 1):+.1f}%",
            ]
        )
        print(rows[-1], flush=True)
    print(
        f"\ninput {args.input}, batch {args.batch}, optimizer {args.optimizer}; measured: "
        f"median of {args.repeats} fresh processes through fit's step; {device_label(emulated)}\n"
    )
    print(
        table(
            [
                "model",
                "estimated peak MiB",
                "of which persistent MiB",
                "measured device peak MiB",
                "range MiB",
                "estimate vs device peak",
                "measured tensor peak MiB",
                "estimate vs tensor peak",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
