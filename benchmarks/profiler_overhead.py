"""Cost of a profiled training step against an unprofiled one, side by side.

    python benchmarks/profiler_overhead.py --steps 5

Each model runs in this process: warm-up, ``steps`` unprofiled steps, then
``steps`` steps under the profiler (each timed alone). Medians and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import table  # noqa: E402

import kswap  # noqa: E402,F401
from kswap.modelspec import build_model, synthetic_data  # noqa: E402
from kswap.profiler import _data  # noqa: E402
from kswap.profiler.fit_steps import run_steps  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default="ResNet50,MobileNetV2,VGG16")
    p.add_argument("--input", default="64,64,3")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    shape = tuple(int(s) for s in args.input.split(","))
    rows = []
    for name in args.models.split(","):
        model = build_model(f"keras.applications.{name}", shape)
        x, y = synthetic_data(model, args.batch)
        batches = _data.make_batches(x, y, args.batch, 2 * args.steps + 1)
        run_steps(model, batches[:1])
        plain = run_steps(model, batches[1 : args.steps + 1])
        logdir = tempfile.mkdtemp()
        tf.profiler.experimental.start(logdir)
        profiled = run_steps(model, batches[args.steps + 1 :])
        t0 = time.perf_counter()
        tf.profiler.experimental.stop()
        export = time.perf_counter() - t0
        shutil.rmtree(logdir, ignore_errors=True)
        a, b = statistics.median(plain), statistics.median(profiled)
        rows.append([name, f"{a * 1000:.0f}", f"{b * 1000:.0f}", f"{b / a:.2f}", f"{export:.2f}"])
        print(rows[-1], flush=True)
        del model
        keras.backend.clear_session()
    print(f"\ninput {args.input}, batch {args.batch}, median of {args.steps} steps, CPU\n")
    print(table(["model", "unprofiled ms", "profiled ms", "ratio", "trace export s"], rows))


if __name__ == "__main__":
    main()
