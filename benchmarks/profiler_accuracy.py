"""kswap's device peak against TensorFlow's allocator peak, one fresh process each.

    python benchmarks/profiler_accuracy.py

``kswap profile`` resets the allocator's peak before the profiled steps and
reads ``get_memory_info(device)["peak"]`` after them; the trace's own peak is
compared with it. On a machine without a GPU, device memory is emulated.
"""

from __future__ import annotations

from _common import device_label, mib, per_model, table

CODE = """
import json, sys, kswap, numpy as np
from kswap.modelspec import build_model, synthetic_data
model = build_model(sys.argv[1], tuple(int(s) for s in sys.argv[2].split(',')))
x, y = synthetic_data(model, 2 * int(sys.argv[3]))
t = kswap.profile(model, x, y, steps=2, batch_size=int(sys.argv[3]))
print(json.dumps({"kswap": t.peak_bytes(), "allocator": t.metadata["allocator_peak_bytes"],
                  "buffers": len(t.buffers), "emulated": t.emulated}))
"""


def main() -> None:
    models = "ResNet50,MobileNetV2,VGG16,DenseNet121"
    args, results = per_model(__doc__, CODE, models=models, input_shape="64,64,3", batch=16)
    rows = []
    for name, d in results:
        diff = 100 * (d["kswap"] - d["allocator"]) / d["allocator"]
        rows.append([name, mib(d["kswap"]), mib(d["allocator"]), f"{diff:+.2f}%", d["buffers"]])
        print(rows[-1], flush=True)
    print(
        f"\ninput {args.input}, batch {args.batch}, 2 profiled steps; "
        f"{device_label(any(d['emulated'] for _, d in results))}\n"
    )
    print(table(["model", "kswap peak MiB", "allocator peak MiB", "difference", "buffers"], rows))


if __name__ == "__main__":
    main()
