"""Inspect a training step's memory: its trace, its timeline and its packing.

``kswap.profile`` runs training steps of a compiled model under TensorFlow's
profiler and returns a ``kswap.Trace``: every buffer the step allocated, with
its size, lifetime, op, layer and phase (forward, backward, transfer,
update). The script profiles keras.applications MobileNet (64x64, batch 16,
Adam), prints the device peak, what is alive at the peak per layer and
phase, the op time per layer, then packs the step's buffers by their
lifetimes (SmartPool: the least memory the step needs) and writes to ``--out``:

- ``trace.json``: the trace (``kswap.Trace.from_json`` reads it back, no
  TensorFlow needed; ``kswap pack trace.json`` packs it from the command line);
- ``device_memory.png``: device bytes over the profiled step;
- ``packing.png``: each buffer placed at its offset in one arena over time;
- ``plugins/profile/...``: the raw profile, for ``tensorboard --logdir OUT``
  (the Profile plugin's ``memory_profile`` tool).

The pictures need matplotlib (``pip install kswap[plot]``). On a machine
without a GPU device memory is emulated on the CPU, and the figures say so.

Run:
    python examples/inspect_trace.py [--out DIR]
    tensorboard --logdir logs/inspect_trace
"""

from __future__ import annotations

import argparse
import os

import keras
import numpy as np

import kswap  # first: selects TensorFlow's CPU allocator that records memory
from kswap.allocator import pack, plot_packing

MIB = 2**20


def plot_timeline(trace: kswap.Trace, path: str, title: str) -> None:
    """Device MiB over the last profiled step, with matplotlib."""
    from matplotlib.figure import Figure

    step = len(trace.steps) - 1
    timeline = trace.timeline("device", step=step)
    start = trace.steps[step][0]
    times = [(t - start) / 1e6 for t in timeline.times_ns]
    figure = Figure(figsize=(8, 3.5))
    axes = figure.add_subplot()
    axes.step(times, [b / MIB for b in timeline.live_bytes], where="post")
    axes.set_xlabel("time in the step (ms)")
    axes.set_ylabel("device MiB")
    axes.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join("logs", "inspect_trace"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    model = keras.applications.MobileNet(weights=None, input_shape=(64, 64, 3), classes=10)
    model.compile("adam", "sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.random((32, 64, 64, 3), dtype=np.float32)
    y = rng.integers(0, 10, 32)

    trace = kswap.profile(model, x, y, steps=1, batch_size=16, logdir=args.out)
    label = " (emulated on CPU:0)" if trace.emulated else ""
    print(f"device peak: {trace.peak_bytes('device') / MIB:.1f} MiB{label}")
    print(f"step peak:   {trace.step_peak_bytes('device') / MIB:.1f} MiB{label}")
    print(f"buffers:     {len(trace.buffers)}")

    print("\nbytes alive at the device peak, by layer and phase, MiB (top 8):")
    for layer, phases in list(trace.by_layer_phase().items())[:8]:
        parts = ", ".join(f"{phase} {n / MIB:.1f}" for phase, n in phases.items() if n >= MIB / 20)
        print(f"  {layer:<28} {sum(phases.values()) / MIB:7.1f}  ({parts})")

    print("\nop time in the profiled step, by layer, ms (top 5):")
    for layer, ns in list(trace.op_time_by_layer().items())[:5]:
        print(f"  {layer:<28} {ns / 1e6:7.2f}")

    plan = pack(trace)  # the device buffers of the last profiled step, by lifetime
    plan.validate()
    print(
        f"\npacked step ({plan.algorithm}): arena {plan.arena_bytes / MIB:.1f} MiB, "
        f"lower bound {plan.lower_bound_bytes / MIB:.1f} MiB, "
        f"{len(plan.buffers)} buffers{label}"
    )

    path = os.path.join(args.out, "trace.json")
    trace.to_json(path)
    again = kswap.Trace.from_json(path)
    print(f"\nwrote {path} (reads back: same peak {again.peak_bytes() == trace.peak_bytes()})")
    try:
        plot_timeline(
            trace,
            os.path.join(args.out, "device_memory.png"),
            f"MobileNet, one training step{label}",
        )
        plot_packing(plan, os.path.join(args.out, "packing.png"))
        print(f"wrote {args.out}/device_memory.png and {args.out}/packing.png")
    except ImportError:
        print("matplotlib is not installed: no pictures (pip install kswap[plot])")
    print(f"tensorboard --logdir {args.out}   # the Profile plugin's memory_profile")


if __name__ == "__main__":
    main()
