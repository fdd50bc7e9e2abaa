"""SmartPool packing of real training steps against TensorFlow's BFC allocator.

    python benchmarks/packing_models.py

Each keras.applications model (weights=None, Adam) is profiled for one step
in a fresh process; the step's device buffers are packed by every algorithm.
"lower bound" is the most requested bytes (aligned to 256) alive at once;
"BFC peak" is TensorFlow's allocator's peak in use during the same step.
Without a GPU, device memory is emulated on CPU:0.
"""

from __future__ import annotations

from _common import device_label, mib, per_model, table

CODE = """
import json, sys, kswap
from kswap.allocator.report import compare
from kswap.modelspec import build_model, synthetic_data
model = build_model(sys.argv[1], tuple(int(s) for s in sys.argv[2].split(',')))
x, y = synthetic_data(model, int(sys.argv[3]))
trace = kswap.profile(model, x, y, steps=1, batch_size=int(sys.argv[3]))
c = compare(trace)
print(json.dumps({"emulated": trace.emulated, "buffers": c.buffers,
                  "lower": c.lower_bound_bytes, "bfc": c.bfc_peak_bytes,
                  "rows": [[r.algorithm, r.arena_bytes, r.seconds] for r in c.rows]}))
"""


def main() -> None:
    models = "ResNet50,MobileNetV2,VGG16,DenseNet121"
    args, results = per_model(__doc__, CODE, models=models, input_shape="64,64,3", batch=16)
    rows = []
    for name, d in results:
        lb = d["lower"]
        arena = {a: b for a, b, _ in d["rows"]}
        rows.append(
            [
                name,
                d["buffers"],
                mib(lb),
                *[
                    f"{mib(arena[a])} ({arena[a] / lb:.4f}x)"
                    for a in ("greedy_size", "first_fit", "best")
                ],
                f"{mib(d['bfc'])} ({d['bfc'] / lb:.4f}x)",
                f"{[s for a, _, s in d['rows'] if a == 'best'][0]:.2f}",
            ]
        )
        print(rows[-1], flush=True)
    print(
        f"\ninput {args.input}, batch {args.batch}, one profiled step; "
        f"{device_label(any(d['emulated'] for _, d in results))}\n"
    )
    print(
        table(
            [
                "model",
                "buffers",
                "lower bound MiB",
                "greedy_size (SmartPool)",
                "first_fit",
                "best",
                "BFC peak in use",
                "best s",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
