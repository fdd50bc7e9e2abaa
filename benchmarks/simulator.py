"""The simulator against measurement: predicted and measured device peak and step time.

    python benchmarks/simulator.py                         # MobileNetV2, ResNet50, VGG16
    python benchmarks/simulator.py --models MobileNetV2 --repeats 1 --rounds 5

**Memory.** For each model, ``--repeats`` rounds of four fresh processes
(variants interleaved): ``baseline`` (the plain model), ``all`` and ``conv``
(``kswap.OffloadingModel(model, policy=...)``) and ``autotune`` (the first
plan ``kswap.AutoTune(--fraction)`` makes, made in the variant's own process
as ``benchmarks/offload.py``'s ``autotune@F`` makes it, and predicted by the
workload it was made from), each measured by
``kswap.measure`` (warm-up, ``--steps`` timed steps, ``--steps`` profiled
steps) as ``benchmarks/offload.py`` does. The baseline's process also
measures the link (``kswap.transfer.measure_link``), builds the planner's
workload from its own trace (``kswap.profiler.workload.workload_from_trace``,
last profiled step; it counts the bytes tensors ask for, and records how
much more the allocator's blocks held at the step's peak) and simulates
three plans on it with that link:
everything kept, every block swapped (``all``) and the blocks of kind
``"conv"`` swapped (``conv``), prefetch 1, optimizer state on the device. A
block kswap swaps runs its backward ops one at a time and a kept one runs
them side by side; the workload holds both working sets (``backward_bytes``
and ``keep_backward_bytes``) and the simulator takes each block's from its
action. Predicted peaks are medians over the baseline's processes,
measured ones over each variant's processes. Each plan's predicted peak of
tensors is held against the measured peak of the bytes tensors asked for;
the simulator's ``allocated_peak_bytes`` (each byte with the allocator's
extra of its phase in the profiled step: persistent, forward, backward;
:mod:`kswap.trace.extra`) against the allocator's measured device peak,
beside the prediction plus the step's one extra at its peak.

**Time.** Separate processes on a shared machine drift apart, so step times
come from one process per model that builds the four variants, profiles
each (``kswap.profile``, 5 steps) halfway through ``--rounds`` rounds of
``IN_A_ROW`` steps in a row of each variant (fit's graph, ``FitSteps``; the
round counts their median: fit runs one model's steps one after another,
and a step right after another model's runs in a colder cache), measures the link,
simulates the plans on the workload of the baseline's median profiled step,
its times scaled to the median of ``TIMED`` unprofiled steps run right after
the profile, as ``kswap.AutoTune`` scales them (AutoTune's plan: its own
prediction, made the same way), and reports the rounds' medians. Predicted times are
the simulator's; "serial" is the baseline's predicted step plus every copy
of the plan at the measured link one after another, as if the copies ran on
the compute stream. The process's speed drifts between the profile (and
AutoTune's, at its start) and the rounds; "ratio error" compares the
predicted slowdown over the plain model with the measured one in the same
rounds, which that drift leaves alone. Without a GPU, device memory is
emulated on CPU:0 and the copies are memory copies on the same cores as the compute (the
simulator runs them on streams of their own); "copy ms" is the time the
offloaded step's ops spent in kswap's copies (their shared wall time, last
profiled step of the in-process profile).

Where ``--fraction`` is under the smallest feasible budget, which AutoTune
refuses, AutoTune's plan is made for the smallest instead and a line after
the tables says so: on a CPU without oneDNN a small CNN's floor is its
convolution gradients' scratch (24-27 MiB each, whatever the batch), which
no plan moves (the GPU script's dry run, TinyVGG at 32x32).
"""

from __future__ import annotations

import argparse
import json
import statistics

from _common import device_label, mib, run_worker, table
from offload import autotuned, build_variant

PLANS = ("keep", "all", "conv")
VARIANTS = ("baseline", "all", "conv", "autotune")
#: Profiled steps per variant in the time process (the baseline's median one is planned).
PROFILED = 5
#: Steps of one variant in a row in each round of the time process (their median counts).
IN_A_ROW = 3
#: Unprofiled steps timed right after them, which the workload's times are scaled to.
TIMED = 3


def _predict(trace, model, link=None, step=None, step_seconds=None) -> dict:
    from kswap import transfer
    from kswap.planning import simulate
    from kswap.profiler.workload import workload_from_trace

    link = link or transfer.measure_link()
    out = {"link": link.to_dict()}
    work = workload_from_trace(trace, model, step=step, step_seconds=step_seconds)
    for plan in PLANS:
        actions = {
            "keep": "keep",
            "all": "swap",
            "conv": ["swap" if b.kind == "conv" else "keep" for b in work.blocks],
        }[plan]
        sim = simulate(work, actions, link, optimizer_state="device")
        swapped = [b for b in work.blocks if plan == "all" or (plan == "conv" and b.kind == "conv")]
        copies = sum(
            link.seconds(b.saved_bytes, "d2h") + link.seconds(b.saved_bytes, "h2d") for b in swapped
        )
        out[plan] = {
            "peak_bytes": sim.peak_bytes,
            "allocated_peak_bytes": sim.allocated_peak_bytes,
            "step_seconds": sim.step_seconds,
            "copy_seconds": copies,
        }
    out["profiled_step_seconds"] = work.metadata["profiled_step_seconds"]
    out["unprofiled_step_seconds"] = step_seconds
    out["time_scale"] = work.metadata.get("time_scale", 1.0)
    out["allocator_overhead"] = work.metadata["allocator_overhead"]
    out["blocks"] = len(work.blocks)
    out["saved_bytes"] = work.saved_bytes
    return out


def worker(args) -> None:
    import kswap
    from kswap.modelspec import synthetic_data
    from kswap.trace import busy_ns

    # AutoTune's plan is made on the plain model
    model = build_variant(args.model, _built_as(args.variant), args.input)
    x, y = synthetic_data(model, 2 * args.batch)
    tuned = None
    if args.variant == "autotune":
        model, plan, tune = autotuned(model, args.fraction, x, y, args.batch, feasible=True)
        tuned = _tuned(plan, tune)
    m = kswap.measure(model, x, y, steps=args.steps, batch_size=args.batch)
    out = m.to_dict()
    out.pop("trace", None)
    last = len(m.trace.steps) - 1
    out["copy_seconds"] = busy_ns(m.trace, last, "transfer") / 1e9
    out["tensor_peak_bytes"] = m.trace.peak_bytes("device", requested=True)
    if args.variant == "baseline":
        out["predicted"] = _predict(m.trace, model, step_seconds=m.step_seconds)
    if tuned is not None:
        out["predicted"] = tuned
    print(json.dumps(out, default=str))


def _built_as(variant: str) -> str:
    """The variant ``build_variant`` builds: AutoTune's plan starts from the plain model."""
    return "baseline" if variant == "autotune" else variant


def _tuned(plan, tune) -> dict:
    """AutoTune's plan as the workload it was made from predicts it."""
    from kswap.planning import simulate

    link = plan.link
    copies = link.seconds(plan.swapped_bytes, "d2h") + link.seconds(plan.swapped_bytes, "h2d")
    return {
        "autotune": {
            "peak_bytes": plan.predicted_peak_bytes,
            # the allocator's extra by phase of the workload AutoTune planned on
            "allocated_peak_bytes": simulate(tune.workload, plan, link).allocated_peak_bytes,
            "step_seconds": plan.predicted_step_seconds,
            "keep_step_seconds": plan.baseline_step_seconds,
            "copy_seconds": copies,
            "counts": plan.counts(),
            "optimizer_state": plan.optimizer_state,
            "budget_bytes": tune.budget_bytes,
            "budget_raised": tune.budget_raised,
            "time_scale": tune.workload.metadata.get("time_scale", 1.0),
        },
        "allocator_overhead": tune.allocator_overhead,
    }


def time_worker(args) -> None:
    """Step times of the four variants side by side in this one process, and predictions."""
    import statistics as st

    import kswap
    from kswap import transfer
    from kswap.modelspec import synthetic_data
    from kswap.profiler.fit_steps import FitSteps
    from kswap.trace import busy_ns

    models, steps, data, tuned = {}, {}, None, None
    # AutoTune's plan first, while no other variant's weights are in the allocator
    for v in ("autotune", "baseline", "all", "conv"):
        models[v] = build_variant(args.model, _built_as(v), args.input)
        if data is None:
            data = synthetic_data(models[v], (PROFILED + 1) * args.batch)
        if v == "autotune":
            x, y = data[0][: 2 * args.batch], data[1][: 2 * args.batch]
            models[v], plan, tune = autotuned(
                models[v], args.fraction, x, y, args.batch, feasible=True
            )
            tuned = _tuned(plan, tune)
        steps[v] = FitSteps(models[v], [(data[0][: args.batch], data[1][: args.batch])])
        steps[v].warm_up(0)  # traces the step before the next variant is built
        steps[v].run(0)
    seconds: dict[str, list[float]] = {v: [] for v in models}

    def timed(fit: FitSteps, n: int) -> float:
        return st.median(fit.run(0) for _ in range(n))

    def rounds(n: int) -> None:
        for _ in range(n):
            for v, fit in steps.items():  # a few steps in a row, as fit runs them
                seconds[v].append(timed(fit, IN_A_ROW))

    # half the rounds, the profiles, the other half: a slow spell hits both
    rounds(args.rounds // 2)
    out = {"copy_seconds": {}}
    link = transfer.measure_link()
    for v, model in models.items():
        trace = kswap.profile(model, *data[:2], steps=PROFILED, batch_size=args.batch)
        lengths = [hi - lo for lo, hi in trace.steps]
        median_step = sorted(range(len(lengths)), key=lengths.__getitem__)[len(lengths) // 2]
        out["copy_seconds"][v] = st.median(
            busy_ns(trace, i, "transfer") / 1e9 for i in range(len(trace.steps))
        )
        if v == "baseline":
            unprofiled = timed(steps[v], TIMED)  # as AutoTune times steps right after its profile
            out["predicted"] = _predict(trace, model, link, median_step, unprofiled)
            out["profiled_steps_seconds"] = [n / 1e9 for n in lengths]
    out["predicted"]["autotune"] = tuned["autotune"]
    rounds(args.rounds - args.rounds // 2)
    out["step_seconds"] = {v: st.median(t) for v, t in seconds.items()}
    out["emulated"] = not transfer.has_gpu()
    print(json.dumps(out))


def _run(args, name: str, variant: str) -> dict:
    return run_worker(
        __file__,
        model=name,
        variant=variant,
        input=args.input,
        batch=args.batch,
        steps=args.steps,
        rounds=args.rounds,
        fraction=args.fraction,
    )


def _pct(predicted: float, measured: float) -> str:
    return f"{100 * (predicted / measured - 1):+.1f}%"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="MobileNetV2,ResNet50,VGG16")
    p.add_argument("--input", default="64,64,3")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per variant")
    p.add_argument("--rounds", type=int, default=10, help="timed rounds in the time process")
    p.add_argument("--parts", default="memory,time", help="memory, time or both")
    p.add_argument(
        "--fraction", type=float, default=0.5, help="AutoTune's budget, of the baseline's peak"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return time_worker(args) if args.variant == "time" else worker(args)
    variants = VARIANTS
    rows, time_rows, links, emulated, raised = [], [], [], False, {}
    med = statistics.median
    parts = set(args.parts.split(","))
    for name in args.models.split(","):
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for _ in range(args.repeats if "memory" in parts else 0):
            for v in variants:
                runs[v].append(_run(args, name, v))
                print(name, v, json.dumps(runs[v][-1]), flush=True)
        base = runs["baseline"]
        emulated |= any(r.get("emulated", False) for r in base)
        links += [r["predicted"]["link"] for r in base]
        for v, plan in zip(variants, (*PLANS, "autotune"), strict=True):
            if not base:
                break
            # AutoTune's plan: predicted by the workload of its own process
            source = runs[v] if v == "autotune" else base
            if v == "autotune":
                raised.update(_raised(name, source))
            peak = med(r["device_peak_bytes"] for r in runs[v])
            tensors = med(r["tensor_peak_bytes"] for r in runs[v])
            p_peak = med(r["predicted"][plan]["peak_bytes"] for r in source)
            extra = med(r["predicted"]["allocator_overhead"] for r in source)
            p_alloc = med(r["predicted"][plan]["allocated_peak_bytes"] for r in source)
            peaks = [r["device_peak_bytes"] for r in runs[v]]
            rows.append(
                [
                    name,
                    v,
                    mib(p_peak),
                    mib(tensors),
                    _pct(p_peak, tensors),
                    f"{mib(p_alloc)} (+{p_alloc / p_peak - 1:.0%})",
                    f"{mib(p_peak * (1 + extra))} (+{extra:.0%})",
                    mib(peak),
                    f"{mib(min(peaks))}-{mib(max(peaks))}",
                    _pct(p_alloc, peak),
                    _pct(p_peak * (1 + extra), peak),
                ]
            )
            print(rows[-1], flush=True)
        if "time" not in parts:
            continue
        timed = _run(args, name, "time")
        print(name, "time", json.dumps(timed), flush=True)
        emulated |= timed.get("emulated", False)
        links.append(timed["predicted"]["link"])
        pred, measured = timed["predicted"], timed["step_seconds"]
        raised.update(_raised(name, [timed]))
        for v, plan in zip(variants, (*PLANS, "autotune"), strict=True):
            p_seconds = pred[plan]["step_seconds"]
            keep = pred[plan].get("keep_step_seconds", pred["keep"]["step_seconds"])
            serial = keep + pred[plan]["copy_seconds"]
            scale = pred[plan].get("time_scale", pred["time_scale"])
            time_rows.append(
                [
                    name,
                    v,
                    f"{p_seconds * 1000:.0f}",
                    f"{serial * 1000:.0f}",
                    f"{measured[v] * 1000:.0f}",
                    _pct(p_seconds, measured[v]),
                    _pct(serial, measured[v]),
                    f"{p_seconds / keep:.2f}",
                    f"{measured[v] / measured['baseline']:.2f}",
                    _pct(p_seconds / keep, measured[v] / measured["baseline"]),
                    f"{timed['copy_seconds'][v] * 1000:.0f}",
                    f"{scale:.2f}",
                ]
            )
            print(time_rows[-1], flush=True)
    h2d = med(link["h2d_bytes_per_s"] for link in links) / 1e9
    d2h = med(link["d2h_bytes_per_s"] for link in links) / 1e9
    latency = med(link["latency_s"] for link in links) * 1e6
    print(
        f"\ninput {args.input}, batch {args.batch}, Adam; medians of {args.repeats} fresh "
        f"processes per variant, variants interleaved, {args.steps} timed steps each; "
        f"{device_label(emulated)}; measured link: h2d {h2d:.2f} GB/s, d2h {d2h:.2f} GB/s, "
        f"latency {latency:.0f} us (median of {len(links)})\n"
    )
    headers = [
        "model",
        "plan",
        "predicted tensors MiB",
        "measured tensors MiB",
        "error",
        "with the allocator's extra by phase MiB",
        "with one extra MiB",
        "measured device peak MiB",
        "range MiB",
        "error",
        "error with one extra",
    ]
    print(table(headers, rows))
    print(
        f"\nstep times in one process per model, median of {args.rounds} rounds; "
        "predicted from the baseline's profiled step, its times scaled to unprofiled steps "
        "(AutoTune's plan: from its own)\n"
    )
    headers = [
        "model",
        "plan",
        "predicted ms",
        "serial ms",
        "measured ms",
        "error",
        "serial error",
        "predicted / baseline",
        "measured / baseline",
        "ratio error",
        "copy ms",
        "time scale",
    ]
    print(table(headers, time_rows))
    for name, budget in raised.items():
        print(
            f"\n{name}: AutoTune refuses --fraction {args.fraction} (under the smallest "
            f"feasible budget); its plan here is for the smallest, {mib(budget)} MiB"
        )


def _raised(name: str, runs: list[dict]) -> dict[str, int]:
    """``{name: budget}`` if AutoTune's plan in ``runs`` was made for a raised budget."""
    tuned = [r["predicted"]["autotune"] for r in runs if "autotune" in r.get("predicted", {})]
    budgets = [t["budget_bytes"] for t in tuned if t.get("budget_raised")]
    return {name: statistics.median(budgets)} if budgets else {}


if __name__ == "__main__":
    main()
