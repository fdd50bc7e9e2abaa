"""AutoTune's closed loop in a fresh process (``python -m tests.tuning.autotune_main``).

Trains ``tests.tuning.test_autotune``'s MLP plain and offloaded with
``kswap.AutoTune(BUDGET)`` from the same seed and prints, as JSON on its last
line, what the loop did and whether losses and weights are bit-identical.

With ``--logdir D`` it trains only the offloaded model, for the six steps
one round takes with no timed steps (warm-up; profiled; every block kept: traced again, profiled;
planned: traced again, measured), with
``AutoTune(logdir=D)``, and prints each round's bytes and the device and
allocator peaks of each profiled window (what the Profile plugin shows).
"""

import argparse
import dataclasses
import json
import os

import keras
import numpy as np

import kswap
from kswap.planning import smallest_budget
from kswap.profiler.session import xplane_files
from kswap.profiler.trace_reading import read_trace
from kswap.tuning import AutoTune, closed_loop, current_actions
from tests.tuning.test_autotune import BATCH, _data, _model

#: The budget of both runs: AutoTune must make a plan, whatever CPU kernels TensorFlow
#: picks (with oneDNN the smallest feasible budget of the six-batch run was 0.87 of the
#: measured baseline, and 0.85 left both runs with no round on such a CPU).
BUDGET = 0.95


def report(logdir: str) -> dict:
    tune = AutoTune(
        BUDGET, timed_steps=0, profile_steps=1, max_rounds=1, verbose=0, link="pcie4", logdir=logdir
    )
    off = kswap.OffloadingModel(_model())
    off.fit(*_data(BATCH * 6), batch_size=BATCH, shuffle=False, verbose=0, callbacks=[tune])
    rounds = [
        {
            "predicted_peak_bytes": r.plan.predicted_peak_bytes,
            "baseline_peak_bytes": r.plan.baseline_peak_bytes,
            "measured_peak_bytes": r.measured_peak_bytes,
            "blocks": list(r.plan.blocks),
        }
        for r in tune.rounds
    ]
    profiles = {}  # the profiled windows, by the Profile plugin's run name
    for path in xplane_files(logdir):
        trace = read_trace(path, off)
        one_tier = tuple(dataclasses.replace(b, tier="device") for b in trace.buffers)
        profiles[os.path.basename(os.path.dirname(path))] = {
            "device_peak_bytes": trace.peak_bytes("device"),
            # on a CPU one allocator serves both tiers: what the plugin shows
            "allocator_peak_bytes": dataclasses.replace(trace, buffers=one_tier).peak_bytes(),
        }
    return {
        "rounds": rounds,
        "profiles": profiles,
        "budget_bytes": tune.budget_bytes,
        "start_peak_bytes": tune.start_peak_bytes,
        "emulated": not kswap.transfer.has_gpu(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir")
    args = parser.parse_args()
    if args.logdir:
        print(json.dumps(report(args.logdir)))
        return
    # what the first plan was made from (a second round widens the workload, and
    # with it the allocator's extra)
    first: dict = {}
    make_first = closed_loop.first_plan

    def recorded_first_plan(workload, budget, link, **kwargs):
        first.update(kwargs, lowest=smallest_budget(workload, link))
        return make_first(workload, budget, link, **kwargs)

    closed_loop.first_plan = recorded_first_plan
    x, y = _data()
    ref = _model()
    keras.utils.set_random_seed(1)
    h_ref = ref.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0).history["loss"]
    off = kswap.OffloadingModel(_model())
    tune = AutoTune(BUDGET, timed_steps=1, profile_steps=1, max_rounds=2, verbose=0, link="pcie4")
    keras.utils.set_random_seed(1)
    h_off = off.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0, callbacks=[tune])
    closed_loop.first_plan = make_first
    target = tune.rounds[0].target_bytes if tune.rounds else None
    overhead = 1 + first.get("allocator_overhead", 0.0)
    planned = dict(zip(tune.plan.blocks, tune.plan.actions, strict=True)) if tune.plan else None
    result = {
        "rounds": len(tune.rounds),
        "start_peak_bytes": tune.start_peak_bytes or 0,
        "first_measured": bool(tune.rounds) and tune.rounds[0].measured_peak_bytes is not None,
        "actions_are_the_plan": planned is not None and current_actions(off) == planned,
        "restored": tune.restored,
        # the fraction is of the peak measured with every block kept
        "baseline_measured": bool(tune.baseline_peak_bytes)
        and bool(tune.rounds)
        and tune.budget_bytes == int(BUDGET * tune.baseline_peak_bytes)
        # the first plan leaves the headroom and the allocator's extra free where it
        # can; where no plan meets either, it is made for the smallest feasible budget
        and target
        in (
            tune.budget_bytes,
            int(tune.budget_bytes * (1 - first["headroom"]) / overhead),
            int(tune.budget_bytes / overhead),
            # where no plan meets either: the smallest feasible budget
            *([first["lowest"]] if first["lowest"] < tune.budget_bytes / overhead else []),
        ),
        "baseline": {
            "baseline_peak_bytes": tune.baseline_peak_bytes,
            "budget_bytes": tune.budget_bytes,
            "first_target_bytes": target,
            "first_plan": first,
        },
        "losses_identical": h_off.history["loss"] == h_ref,
        "weights_identical": all(
            np.array_equal(a.numpy(), b.numpy())
            for a, b in zip(ref.weights, off.weights, strict=True)
        ),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
