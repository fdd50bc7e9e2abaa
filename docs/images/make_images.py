"""Draws the memory pictures of docs/how-it-works.md from real profiled steps.

Profiles keras.applications MobileNetV2 (96x96, batch 32, Adam, ``weights=None``)
through ``fit``'s step with ``kswap.profile``, each configuration in a fresh
process (TensorFlow's allocator counts every live tensor of a process):

- ``baseline``: the plain model;
- ``offloaded``: ``kswap.OffloadingModel(model)`` (every layer, ``prefetch=1``);
- ``offloaded, prefetch=0``: the same, each block's tensors brought back only
  when its own backward can start.

and writes, next to this script:

- ``device_memory.png``: device MiB over the last profiled step of each,
  with the offloaded step's host-tier MiB;
- ``phases.png``: the offloaded step's device MiB split by phase (forward,
  backward, transfer, update, resident) over the step;
- ``packing.png``: the offloaded step's device buffers packed by their
  lifetimes (``kswap.allocator.pack``, drawn by ``plot_packing``).

On a machine without a GPU device memory is emulated on the CPU, and every
picture's title says so. Needs matplotlib (``pip install kswap[plot]``).

Run:
    python docs/images/make_images.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 2**20
VARIANTS = {
    "baseline": None,
    "offloaded": 1,
    "offloaded, prefetch=0": 0,
}


def child(prefetch: int | None, path: str) -> None:
    """Profiles one configuration in this (fresh) process and saves its trace."""
    import keras
    import numpy as np

    import kswap

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10)
    model.compile("adam", "sparse_categorical_crossentropy")
    if prefetch is not None:
        model = kswap.OffloadingModel(model, prefetch=prefetch)
    rng = np.random.default_rng(0)
    x = rng.random((64, 96, 96, 3), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    kswap.profile(model, x, y, steps=2, batch_size=32).to_json(path)


def _last_step(trace):
    step = len(trace.steps) - 1
    return step, trace.steps[step][0]


def _series(trace, tier: str):
    step, start = _last_step(trace)
    timeline = trace.timeline(tier, step=step)
    return [(t - start) / 1e6 for t in timeline.times_ns], [b / MIB for b in timeline.live_bytes]


def draw(traces: dict, out: str) -> list[str]:
    from matplotlib.figure import Figure

    from kswap.allocator import pack, plot_packing

    emulated = any(t.emulated for t in traces.values())
    label = " (device memory emulated on CPU)" if emulated else ""
    written = []

    figure = Figure(figsize=(9, 4.2))
    axes = figure.add_subplot()
    for (name, trace), color in zip(
        traces.items(), ("0.45", "tab:blue", "tab:green"), strict=False
    ):
        times, mib = _series(trace, "device")
        peak = trace.peak_bytes("device", step=_last_step(trace)[0]) / MIB
        axes.step(
            times, mib, where="post", color=color, label=f"{name}: device, peak {peak:.0f} MiB"
        )
    times, mib = _series(traces["offloaded"], "host")
    axes.step(
        times, mib, where="post", color="tab:orange", linestyle="--", label="offloaded: host tier"
    )
    axes.set_xlabel("time in the step (ms)")
    axes.set_ylabel("MiB")
    axes.set_title(f"MobileNetV2 96x96, batch 32, Adam: one training step{label}", fontsize=10)
    axes.legend(fontsize=8, loc="upper right")
    figure.tight_layout()
    written.append(os.path.join(out, "device_memory.png"))
    figure.savefig(written[-1], dpi=100)

    trace = traces["offloaded"]
    step, start = _last_step(trace)
    end = trace.steps[step][1]
    phases = ("resident", "forward", "transfer", "backward", "update")
    grid = [start + (end - start) * i // 400 for i in range(401)]
    layers = {p: [0.0] * len(grid) for p in phases}
    for b in trace.buffers:
        if b.tier != "device" or b.phase not in layers:
            continue
        for i, t in enumerate(grid):
            if b.start_ns <= t < b.end_ns:
                layers[b.phase][i] += b.size / MIB
    figure = Figure(figsize=(9, 4.2))
    axes = figure.add_subplot()
    axes.stackplot([(t - start) / 1e6 for t in grid], *layers.values(), labels=phases, step="post")
    axes.set_xlabel("time in the step (ms)")
    axes.set_ylabel("device MiB")
    axes.set_title(f"Offloaded MobileNetV2: device bytes by phase{label}", fontsize=10)
    axes.legend(fontsize=8, loc="upper right")
    figure.tight_layout()
    written.append(os.path.join(out, "phases.png"))
    figure.savefig(written[-1], dpi=100)

    plan = pack(trace)
    written.append(os.path.join(out, "packing.png"))
    plot_packing(
        plan,
        written[-1],
        title=f"Offloaded MobileNetV2, one step packed: arena {plan.arena_bytes / MIB:.1f} MiB, "
        f"lower bound {plan.lower_bound_bytes / MIB:.1f} MiB{' (emulated)' if emulated else ''}",
    )
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--child", nargs=2, metavar=("PREFETCH", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        prefetch, path = args.child
        child(None if prefetch == "none" else int(prefetch), path)
        return 0
    sys.path.insert(0, ROOT)
    from kswap.trace import Trace

    traces, figures = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, prefetch in VARIANTS.items():
            path = os.path.join(tmp, f"{len(traces)}.json")
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
            arg = "none" if prefetch is None else str(prefetch)
            subprocess.run(
                [sys.executable, __file__, "--child", arg, path], check=True, env=env, cwd=ROOT
            )
            traces[name] = Trace.from_json(path)
            step = len(traces[name].steps) - 1
            figures[name] = {
                "device_peak_mib": round(traces[name].peak_bytes("device", step=step) / MIB, 1),
                "host_peak_mib": round(traces[name].peak_bytes("host", step=step) / MIB, 1),
                "emulated": traces[name].emulated,
            }
    for path in draw(traces, args.out):
        print(f"wrote {path}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
