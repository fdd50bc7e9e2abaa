"""Device peak against batch size, each configuration in a fresh process.

    python benchmarks/batch_scaling.py --model keras.applications.MobileNetV2 --input 96,96,3

On a machine without a GPU, device memory is emulated on CPU:0.
"""

from __future__ import annotations

import argparse

from _common import measure_fresh, mib, table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="keras.applications.MobileNetV2")
    p.add_argument("--input", default="96,96,3")
    p.add_argument("--batches", default="8,16,32")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    rows, first = [], None
    for b in [int(s) for s in args.batches.split(",")]:
        m = measure_fresh(args.model, args.input, b, args.steps)
        first = first or (b, m)
        ratio = m["device_peak_bytes"] / first[1]["device_peak_bytes"]
        step_ratio = m["step_peak_bytes"] / first[1]["step_peak_bytes"]
        rows.append(
            [
                b,
                mib(m["device_peak_bytes"]),
                mib(m["step_peak_bytes"]),
                f"{ratio:.2f}",
                f"{step_ratio:.2f}",
                f"{b / first[0]:.0f}",
                f"{m['step_seconds'] * 1000:.0f}",
            ]
        )
    emulated = " (device memory emulated on CPU:0)" if first[1]["emulated"] else ""
    print(f"{args.model}, input {args.input}{emulated}\n")
    print(
        table(
            [
                "batch",
                "device peak MiB",
                "step peak MiB",
                "peak / first",
                "step peak / first",
                "batch / first",
                "step ms",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
