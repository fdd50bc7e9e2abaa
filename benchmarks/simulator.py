"""The simulator against measurement: predicted and measured device peak and step time.

    python benchmarks/simulator.py                         # MobileNetV2, ResNet50, VGG16
    python benchmarks/simulator.py --models MobileNetV2 --repeats 1

For each model, ``--repeats`` rounds of three fresh processes (variants
interleaved): ``baseline`` (the plain model), ``all`` and ``conv``
(``kswap.OffloadingModel(model, policy=...)``), each measured by
``kswap.measure`` (warm-up, ``--steps`` timed steps, ``--steps`` profiled
steps) as ``benchmarks/offload.py`` does. The baseline's process also
measures the link (``kswap.transfer.measure_link``) and builds the planner's
workload from its own trace (``kswap.profiler.workload.workload_from_trace``,
last profiled step) and simulates three plans on it with that link:
everything kept, every block swapped (``all``) and the blocks of kind
``"conv"`` swapped (``conv``), prefetch 1, optimizer state on the device. A
block kswap wraps runs its backward ops one at a time, so the workload of
each plan counts the wrapped blocks' backward working sets that way
(``ordered_backward``): none for ``keep``, all for ``all``, the conv blocks
for ``conv``.

Predicted figures are medians over the baseline's processes, measured ones
over each variant's processes. "time / baseline" is the median of the
per-repeat ratios (measured) and the simulated ratio (predicted). Without a
GPU, device memory is emulated on CPU:0 and the copies are memory copies on
the same cores as the compute (the simulator runs them on streams of their
own); "copy ms" is the time the offloaded step's compute threads spent in
kswap's copies (shared wall time of its transfer ops, last profiled step).
"""

from __future__ import annotations

import argparse
import json
import statistics

from _common import device_label, mib, run_json, table
from offload import build_variant

PLANS = ("keep", "all", "conv")


def _predict(trace, model) -> dict:
    from kswap import transfer
    from kswap.planning import simulate
    from kswap.profiler.workload import workload_from_trace

    link = transfer.measure_link()
    out = {"link": link.to_dict()}
    base = workload_from_trace(trace, model, ordered_backward=False)
    conv = [b.name for b in base.blocks if b.kind == "conv"]
    for plan in PLANS:
        ordered = {"keep": False, "all": True, "conv": conv}[plan]
        work = workload_from_trace(trace, model, ordered_backward=ordered)
        actions = {
            "keep": "keep",
            "all": "swap",
            "conv": ["swap" if b.kind == "conv" else "keep" for b in work.blocks],
        }[plan]
        sim = simulate(work, actions, link, optimizer_state="device")
        out[plan] = {"peak_bytes": sim.peak_bytes, "step_seconds": sim.step_seconds}
    out["profiled_step_seconds"] = base.metadata["step_seconds"]
    out["blocks"] = len(base.blocks)
    out["saved_bytes"] = base.saved_bytes
    return out


def worker(args) -> None:
    import kswap
    from kswap.modelspec import synthetic_data
    from kswap.trace import busy_ns

    model = build_variant(args.model, args.variant, args.input)
    x, y = synthetic_data(model, 2 * args.batch)
    m = kswap.measure(model, x, y, steps=args.steps, batch_size=args.batch)
    out = m.to_dict()
    out.pop("trace", None)
    last = len(m.trace.steps) - 1
    out["copy_seconds"] = busy_ns(m.trace, last, "transfer") / 1e9
    if args.variant == "baseline":
        out["predicted"] = _predict(m.trace, model)
    print(json.dumps(out, default=str))


def _run(args, name: str, variant: str) -> dict:
    return run_json(
        [
            __file__,
            "--worker",
            "--model",
            name,
            "--variant",
            variant,
            "--input",
            args.input,
            "--batch",
            str(args.batch),
            "--steps",
            str(args.steps),
        ]
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
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    variants = ("baseline", "all", "conv")
    rows, links, emulated = [], [], False
    med = statistics.median
    for name in args.models.split(","):
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for _ in range(args.repeats):
            for v in variants:
                runs[v].append(_run(args, name, v))
                print(name, v, json.dumps(runs[v][-1])[:300], flush=True)
        base = runs["baseline"]
        emulated |= any(r.get("emulated", False) for r in base)
        links += [r["predicted"]["link"] for r in base]
        for v, plan in zip(variants, PLANS, strict=True):
            peak = med(r["device_peak_bytes"] for r in runs[v])
            seconds = med(r["step_seconds"] for r in runs[v])
            p_peak = med(r["predicted"][plan]["peak_bytes"] for r in base)
            p_seconds = med(r["predicted"][plan]["step_seconds"] for r in base)
            ratio = med(
                r["step_seconds"] / b["step_seconds"] for r, b in zip(runs[v], base, strict=True)
            )
            p_ratio = med(
                r["predicted"][plan]["step_seconds"] / r["predicted"]["keep"]["step_seconds"]
                for r in base
            )
            peaks = [r["device_peak_bytes"] for r in runs[v]]
            rows.append(
                [
                    name,
                    v,
                    mib(p_peak),
                    mib(peak),
                    f"{mib(min(peaks))}-{mib(max(peaks))}",
                    _pct(p_peak, peak),
                    f"{p_seconds * 1000:.0f}",
                    f"{seconds * 1000:.0f}",
                    _pct(p_seconds, seconds),
                    f"{p_ratio:.2f}",
                    f"{ratio:.2f}",
                    f"{med(r['copy_seconds'] for r in runs[v]) * 1000:.0f}",
                ]
            )
            print(rows[-1], flush=True)
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
        "predicted peak MiB",
        "measured peak MiB",
        "range MiB",
        "peak error",
        "predicted step ms",
        "measured step ms",
        "time error",
        "predicted time / baseline",
        "measured time / baseline",
        "copy ms",
    ]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
