"""``kswap demo``: one model trained three ways, side by side.

``make demo`` (or ``kswap demo``) trains a keras.applications model
(MobileNetV2 at 160x160, batch 32, Adam, synthetic data) with Keras's
progress bars, each way in a fresh process: the plain model,
``kswap.OffloadingModel(model)``, and that with ``kswap.AutoTune(budget=0.5)``.
Then it prints one table (device peak, host peak, step time, each against
the baseline, and whether device memory is emulated or real), AutoTune's
plan and the packing of one step, and writes to ``--out`` (``demo/``):

- ``memory.png``: device memory over one training step of each run on one
  axes, with AutoTune's budget; ``memory.json``: the data drawn;
- ``packing.png``: SmartPool's packing of one baseline step;
- ``plan.md``: AutoTune's plan; ``demo.json``: every figure;
- ``logs/``: a TensorBoard logdir (AutoTune's scalars, plan and image under
  ``logs/autotune/kswap``, each run's profiled steps for the Profile
  plugin's ``memory_profile``), and the ``tensorboard --logdir`` line.

On a machine without a GPU device memory is emulated on ``CPU:0`` and
labelled so; on a GPU machine the same command measures the GPU.

Example:
    >>> from kswap.demo import Options, run_demo
    >>> result = run_demo(Options(input=(32, 32, 3), batch=8, steps=3))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os

from kswap.demo.chart import chart_data, draw_memory_chart
from kswap.demo.runner import RUNS, Options, run_all
from kswap.demo.summary import autotune_lines, compact_plan, packing_lines, table

__all__ = ["RUNS", "Options", "run_demo"]


def run_demo(options: Options) -> dict:
    """Runs the demo: three fresh processes, then the table, plan, pictures and logdir.

    Args:
        options: What to train and where to write (checked first).

    Returns:
        What ``demo.json`` holds: the options and each run's figures.

    Raises:
        ValueError: A bad option, naming it and the value received.
        ImportError: matplotlib is missing (``pip install kswap[plot]``).
        RuntimeError: A run failed.
    """
    options.check()
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "kswap demo draws with matplotlib: pip install kswap[plot] (make demo installs it)"
        ) from error
    results = run_all(options)
    out = options.out
    tuned = results["autotune"]
    shape = "x".join(str(d) for d in options.input)
    subtitle = f"{options.model}, {shape}, batch {options.batch}, {options.optimizer}"
    data = chart_data(results, tuned.get("budget_bytes"))
    png = draw_memory_chart(data, os.path.join(out, "memory.png"), subtitle=subtitle)
    plan = tuned.get("plan")
    if plan is not None:
        with open(os.path.join(out, "plan.md"), "w") as f:
            f.write(plan["markdown"] + "\n")
    summary = {
        "options": {**vars(options), "input": list(options.input)},
        "logdir": options.logdir,
        "runs": {
            name: {k: v for k, v in r.items() if k != "series"} for name, r in results.items()
        },
    }
    with open(os.path.join(out, "demo.json"), "w") as f:
        json.dump(summary, f, indent=1)

    print(f"\n=== {subtitle}, synthetic data: three runs, each in a fresh process ===\n")
    print(table(results, options.steps))
    print("\n=== AutoTune's plan ===\n")
    print("\n".join(autotune_lines(tuned)))
    if plan is not None:
        counts = ", ".join(f"{n} {kind}" for kind, n in plan["counts"].items())
        print(
            f"plan ({plan['strategy']}): {counts}; optimizer state on the "
            f"{plan['optimizer_state']}; predicted peak of tensors "
            f"{plan['predicted_peak_bytes'] / 2**20:,.1f} MiB, "
            f"predicted step x{plan['slowdown']:.2f}"
            + (" (not kept)" if tuned.get("restored") else "")
        )
        print(
            "blocks in the model's order (consecutive ones with the same action together) and "
            "the MiB their backward reads:"
        )
        print(compact_plan(plan["blocks"]))
    packing = results["baseline"].get("packing")
    if packing:
        print(f"\n=== Packing one step: {packing['png']} ===\n")
        base = results["baseline"]
        print("\n".join(packing_lines(packing, base["emulated"], base.get("device"))))
    print("\n=== Written ===\n")
    print(f"  {png}: device memory over one step of each run, AutoTune's budget dashed")
    print(f"  {os.path.join(out, 'memory.json')}: the data drawn")
    if packing:
        print(f"  {packing['png']}: the packing of one baseline step")
    if plan is not None:
        print(f"  {os.path.join(out, 'plan.md')}: AutoTune's plan, every block")
    print(f"  {os.path.join(out, 'demo.json')}: every figure above")
    print("\nTensorBoard: kswap's scalars, plan and image (run autotune/kswap), and each run's")
    print("profiled steps in the Profile plugin (memory_profile):\n")
    print(f"  tensorboard --logdir {options.logdir}")
    return summary
