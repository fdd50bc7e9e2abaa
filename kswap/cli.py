"""The ``kswap`` command line.

Example:
    kswap profile --model keras.applications.ResNet50 --input 64,64,3 --batch 16
    kswap profile --model keras.applications.ResNet50 --input 64,64,3 --pack --save t.json
    kswap pack t.json --plot packing.png
    kswap measure --model keras.applications.VGG16 --input 64,64,3 --batch 8 --json
    kswap plan --model keras.applications.VGG16 --input 224,224,3 --batch 256 --classes 1000 \
        --budget 13.5GiB --link pcie3 --device k40
    kswap demo --out demo
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["main"]

_MIB = 1024 * 1024
_ALGORITHMS = ("greedy_size", "first_fit", "multi_order", "local_search", "best")
#: Default ``--steps`` of ``kswap profile`` and ``kswap measure``: those of
#: ``kswap.profile`` and ``kswap.measure`` (not read from their signatures here,
#: which would import TensorFlow before the arguments are parsed).
_PROFILE_STEPS = 2
_MEASURE_STEPS = 3


def _mib(n: int) -> str:
    return f"{n / _MIB:,.1f} MiB"


def _positive_arg(name: str):
    """An argparse ``type`` for an integer >= 1: ``_positive_int`` as a parse error."""

    def parse(text: str) -> int:
        try:
            return _positive_int(text, name)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _add_model_args(p: argparse.ArgumentParser, steps: int, steps_help: str) -> None:
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.add_argument(
        "--model", required=True, help="keras.applications.ResNet50 or package.module:factory"
    )
    p.add_argument("--input", default=None, help="input shape without batch, e.g. 64,64,3")
    p.add_argument(
        "--batch", type=_positive_arg("batch"), default=16, help="batch size (default 16)"
    )
    p.add_argument(
        "--steps",
        type=_positive_arg("steps"),
        default=steps,
        help=f"{steps_help} (default {steps})",
    )
    p.add_argument(
        "--classes", type=_positive_arg("classes"), default=10, help="classes of a classifier (10)"
    )
    p.add_argument("--optimizer", default="adam", help="optimizer name (default adam)")
    p.add_argument(
        "--offload",
        default=None,
        metavar="POLICY",
        help="train through kswap.OffloadingModel(model, policy=POLICY): all, conv",
    )
    p.add_argument(
        "--optimizer-state",
        default="device",
        choices=("device", "host"),
        help="where the optimizer's slots live (default device)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kswap", description="Memory profiling and offloading for Keras training."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("profile", help="device peak, step time and bytes per layer")
    _add_model_args(p, _PROFILE_STEPS, "timed and profiled steps")
    p.add_argument("--logdir", default=None, help="keep the raw trace here for TensorBoard")
    p.add_argument(
        "--top", type=_positive_arg("top"), default=20, help="layers to list (default 20)"
    )
    p.add_argument("--save", default=None, help="write the kswap trace as JSON")
    p.add_argument("--pack", action="store_true", help="also pack the step (SmartPool)")
    p.add_argument("--plot", default=None, help="with --pack: draw the best packing (PNG)")
    k = sub.add_parser("pack", help="pack a saved trace's step; compare with the BFC allocator")
    k.error = _one_line_error(k)  # type: ignore[method-assign]
    k.add_argument("trace", help="a trace saved by `kswap profile --save` or Trace.to_json")
    k.add_argument("--algorithms", default=",".join(_ALGORITHMS), help="comma-separated")
    k.add_argument("--plot", default=None, help="draw the best packing (PNG)")
    m = sub.add_parser("measure", help="device peak and step time (--json: as JSON)")
    _add_model_args(m, _MEASURE_STEPS, "timed and profiled steps, as kswap.measure")
    m.add_argument("--json", action="store_true", help="print one JSON object (bytes, seconds)")
    _add_plan_parser(sub)
    _add_demo_parser(sub)
    return parser


def _add_demo_parser(sub) -> None:
    from kswap.demo.runner import Options

    d = Options()
    p = sub.add_parser(
        "demo",
        help="train a keras.applications model three ways: plain, offloaded, with AutoTune",
        description="Trains a model with Keras's progress bars in three fresh processes: "
        "the plain model, kswap.OffloadingModel(model) and that with kswap.AutoTune(budget). "
        "Prints one table, AutoTune's plan and the packing of one step; writes the charts "
        "and a TensorBoard logdir to --out.",
    )
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.add_argument("--model", default=d.model, help=f"model to train (default {d.model})")
    shape = ",".join(map(str, d.input))
    p.add_argument("--input", default=shape, help=f"input shape without batch ({shape})")
    p.add_argument(
        "--batch", type=_positive_arg("batch"), default=d.batch, help=f"batch size ({d.batch})"
    )
    p.add_argument(
        "--steps",
        type=_positive_arg("steps"),
        default=d.steps,
        help=f"timed steps per run, their median is the step time ({d.steps})",
    )
    p.add_argument(
        "--budget", default=d.budget, help=f"AutoTune's budget: 0.5, 50%%, 300MiB ({d.budget})"
    )
    p.add_argument("--out", default=d.out, help=f"output directory, rewritten ({d.out})")


def _one_line_error(parser: argparse.ArgumentParser):
    """``parser.error`` that prints one line (no usage) and exits with status 2."""

    def error(message: str):
        print(f"kswap: error: {message} (see {parser.prog} --help)", file=sys.stderr)
        raise SystemExit(2)

    return error


def _add_plan_parser(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="plan swap/recompute under a memory budget from the model's shapes (no run)",
        description="Estimates one training step of a model from its shapes and a device "
        "preset (nothing is run or downloaded) and plans what to swap, recompute or keep "
        "under a memory budget.",
    )
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.add_argument(
        "--model", required=True, help="keras.applications.VGG16 or package.module:factory"
    )
    p.add_argument("--input", default=None, help="input shape without batch, e.g. 224,224,3")
    p.add_argument("--batch", default="16", help="batch size (default 16)")
    p.add_argument("--classes", default="10", help="classes of a classifier (10)")
    p.add_argument("--optimizer", default="adam", help="optimizer name (default adam)")
    p.add_argument(
        "--budget", default=None, help="12GiB, 500MB, 0.5 or 50%% (default: the device's memory)"
    )
    p.add_argument("--device", default="cpu", help="k40, v100, a100, h100, h200 or cpu")
    p.add_argument("--link", default=None, help="pcie3, pcie4, pcie5, nvlink-c2c or cpu")
    p.add_argument("--strategy", default="auto", help="auto (default), all, conv, dyn, ...")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")


def _log(msg: str) -> None:
    print(f"[kswap] {msg}", file=sys.stderr, flush=True)


def _measure(args, logdir=None):
    import kswap  # noqa: F401  (environment first)
    from kswap.modelspec import build_model, parse_shape, synthetic_data
    from kswap.profiler import _data
    from kswap.profiler.measure import measure_batches
    from kswap.profiler.profile import _check_allocator

    shape = parse_shape(args.input) if args.input else None
    steps = _data.check_steps(args.steps)
    _log(f"building {args.model} (weights=None, input={shape}, batch={args.batch})")
    model = build_model(args.model, shape, classes=args.classes, optimizer=args.optimizer)
    if args.offload or args.optimizer_state == "host":
        policy = args.offload or (lambda layer: False)
        model = kswap.OffloadingModel(model, policy, optimizer_state=args.optimizer_state)
        _log(f"offloading (policy={args.offload!r}, optimizer_state={args.optimizer_state!r})")
    x, y = synthetic_data(model, args.batch)
    batches = _data.make_batches(x, y, args.batch, 2 * steps + 1)
    _check_allocator()
    return model, measure_batches(model, batches, steps, logdir, progress=_log)


def _profile(args) -> int:
    model, m = _measure(args, args.logdir)
    trace = m.trace
    label = " (emulated on CPU:0)" if m.emulated else ""
    offload = f"  offload={args.offload}" if args.offload else ""
    if args.optimizer_state == "host":
        offload += "  optimizer_state=host"
    print(f"model            {model.name}  batch {m.batch_size}{offload}")
    print(f"device peak      {_mib(m.device_peak_bytes)}{label}")
    print(f"step peak        {_mib(m.step_peak_bytes)}  (peak minus bytes in use at step start)")
    print(f"host peak        {_mib(m.host_peak_bytes)}")
    print(f"step time        {m.step_seconds * 1000:,.1f} ms  (median of {m.steps}, unprofiled)")
    print()
    print(f"bytes alive at the device peak, by layer and phase, MiB (top {args.top}):")
    _layer_table(trace.by_layer_phase("device"), m.device_peak_bytes, args.top)
    if trace.ops and trace.steps:
        _time_table(trace, args.top)
    if args.logdir:
        print(f"\nraw trace: tensorboard --logdir {args.logdir}  (Profile > memory_profile)")
    if args.save:
        trace.to_json(args.save)
        print(f"kswap trace: {args.save}")
    if args.pack:
        print()
        _pack_report(trace, _ALGORITHMS, args.plot)
    return 0


_PHASE_COLUMNS = ("forward", "backward", "transfer")


def _layer_table(rows: dict, peak: int, top: int) -> None:
    """Prints bytes per layer and phase: total, share of the peak, phases, the rest.

    ``other`` is the rest: weights and optimizer state in use before the step
    (resident), the optimizer's update, and buffers of no known op.
    """
    items = list(rows.items())
    width = max([len(k) for k, _ in items[:top]] + [5])
    head = "".join(f"{c:>10}" for c in (*_PHASE_COLUMNS, "other"))
    print(f"  {'layer':<{width}}  {'total':>9}  {'share':>6}{head}")

    def line(name: str, phases: dict) -> str:
        total = sum(phases.values())
        cells = [phases.get(c, 0) for c in _PHASE_COLUMNS]
        cells.append(total - sum(cells))
        share = 100.0 * total / max(peak, 1)
        parts = "".join(f"{c / _MIB:>10,.1f}" for c in cells)
        return f"  {name:<{width}}  {total / _MIB:>9,.1f}  {share:5.1f}%{parts}"

    for name, phases in items[:top]:
        print(line(name, phases))
    if len(items) > top:
        rest: dict[str, int] = {}
        for _, phases in items[top:]:
            for p, size in phases.items():
                rest[p] = rest.get(p, 0) + size
        print(line(f"({len(items) - top} more)", rest))


_TIME_COLUMNS = ("forward", "backward", "transfer", "update")


def _time_table(trace, top: int) -> None:
    """Prints op time per layer and phase in the last profiled step, ms, largest first.

    Ops running together share the time they overlap, so the rows add up to
    the time any op ran (less than the step: the executor's own gaps).
    """
    from kswap.trace import busy_ns

    step = len(trace.steps) - 1
    lo, hi = trace.steps[step]
    rows = list(trace.op_time_by_layer_phase(step=step).items())
    print(
        f"\nop time in the last profiled step, by layer and phase, ms (top {top}; "
        f"ops ran {busy_ns(trace, step) / 1e6:,.1f} of its {(hi - lo) / 1e6:,.1f} ms, "
        "overlapping ops sharing their time):"
    )
    width = max([len(k) for k, _ in rows[:top]] + [5])
    head = "".join(f"{c:>10}" for c in _TIME_COLUMNS)
    print(f"  {'layer':<{width}}  {'total':>9}{head}")

    def line(name: str, phases: dict) -> str:
        cells = "".join(f"{phases.get(c, 0) / 1e6:>10,.2f}" for c in _TIME_COLUMNS)
        return f"  {name:<{width}}  {sum(phases.values()) / 1e6:>9,.2f}{cells}"

    for name, phases in rows[:top]:
        print(line(name, phases))
    if len(rows) > top:
        rest: dict[str, int] = {}
        for _, phases in rows[top:]:
            for p, ns in phases.items():
                rest[p] = rest.get(p, 0) + ns
        print(line(f"({len(rows) - top} more)", rest))


def _pack_report(trace, algorithms, plot) -> None:
    from kswap.allocator import plot_packing
    from kswap.allocator.report import compare, format_comparison

    comparison = compare(trace, algorithms)
    print(format_comparison(comparison))
    if plot:
        best = comparison.best
        plot_packing(
            best.plan, plot, title=f"{trace.metadata.get('model', 'trace')}: {best.algorithm}"
        )
        print(f"packing drawn: {plot}")


def _pack_cmd(args) -> int:
    from kswap.trace import Trace

    try:
        trace = Trace.from_json(args.trace)
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ValueError(
            f"`trace` must be a kswap trace JSON file. Received: trace={args.trace!r} ({reason})"
        ) from None
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    _pack_report(trace, algorithms, args.plot)
    return 0


def _measure_cmd(args) -> int:
    model, m = _measure(args)
    d = m.to_dict()
    d["model"] = args.model
    d["input"] = args.input
    if args.json:
        print(json.dumps(d))
        return 0
    label = " (emulated on CPU:0)" if m.emulated else ""
    print(f"model            {args.model}  batch {m.batch_size}  input {args.input or 'default'}")
    print(f"device peak      {_mib(m.device_peak_bytes)}{label}")
    print(f"step peak        {_mib(m.step_peak_bytes)}  (peak minus bytes in use at step start)")
    print(f"host peak        {_mib(m.host_peak_bytes)}")
    print(f"step time        {m.step_seconds * 1000:,.1f} ms  (median of {m.steps}, unprofiled)")
    return 0


def _positive_int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1. Received: {name}={text!r}")
    return value


def _plan_cmd(args) -> int:
    from kswap.planning.budget import format_bytes

    # everything that needs no model is checked first, before TensorFlow starts
    batch = _positive_int(args.batch, "batch")
    classes = _positive_int(args.classes, "classes")
    from kswap.estimate.plan import check_plan_arguments, static_plan

    _, link, device = check_plan_arguments(args.budget, args.link, args.device, args.strategy)
    from kswap.modelspec import build_model, parse_shape

    shape = parse_shape(args.input) if args.input else None
    model = build_model(args.model, shape, classes=classes, optimizer=args.optimizer)
    result = static_plan(
        model, batch, args.budget, link=link, device=device, strategy=args.strategy
    )
    plan, work = result.plan, result.workload
    if args.json:
        out = result.to_dict()
        out["model"], out["input"] = args.model, args.input
        print(json.dumps(out))
        return 0
    gib = format_bytes
    capacity = device.memory_bytes
    fits = result.baseline_fits_device
    verdict = (
        "capacity unknown"
        if fits is None
        else f"{'fits' if fits else 'does not fit'} the device's {gib(capacity)}"
    )
    counts = plan.counts()
    tier = "host" if plan.optimizer_state == "host" else "device"
    print(f"model            {model.name}  batch {batch}  input {args.input or 'default'}")
    print(f"device           {device.name} ({device.description})  link {link.name}")
    print(
        f"persistent       weights {gib(work.weight_bytes)}, gradients {gib(work.gradient_bytes)}, "
        f"optimizer {gib(work.optimizer_bytes)} ({work.metadata.get('optimizer')})"
    )
    print(f"baseline peak    {gib(plan.baseline_peak_bytes)} (estimated); {verdict}")
    print(f"budget           {gib(plan.budget_bytes or 0)}")
    print(
        f"plan             {plan.strategy}: {counts['swap']} swapped, "
        f"{counts['recompute']} recomputed, {counts['keep']} kept; optimizer state on the {tier}"
    )
    print(
        f"predicted peak   {gib(plan.predicted_peak_bytes)} "
        f"({'within' if plan.fits else 'over'} the budget)"
    )
    print(
        f"step time        {plan.baseline_step_seconds * 1000:,.1f} ms baseline, "
        f"{plan.predicted_step_seconds * 1000:,.1f} ms planned: slowdown {plan.slowdown:.3f}x"
    )
    print("(static estimate from shapes and the device preset; nothing was run)")
    print()
    print(plan.table(work))
    return 0


def _demo_cmd(args) -> int:
    from kswap.demo import Options, run_demo
    from kswap.demo.runner import parse_input

    options = Options(
        model=args.model,
        input=parse_input(args.input),
        batch=args.batch,
        steps=args.steps,
        budget=args.budget,
        out=args.out,
    ).check()
    from kswap.modelspec import resolve

    resolve(options.model)  # names a callable (imports it: Keras, not a TensorFlow op)
    try:
        run_demo(options)
    except (RuntimeError, ImportError) as e:
        print(f"kswap: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command == "plan":
            print(f"kswap: error: unrecognized arguments: {' '.join(extra)}", file=sys.stderr)
            return 2
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up quiet
    try:
        if args.command == "profile":
            return _profile(args)
        if args.command == "pack":
            return _pack_cmd(args)
        if args.command == "plan":
            return _plan_cmd(args)
        if args.command == "demo":
            return _demo_cmd(args)
        return _measure_cmd(args)
    except ValueError as e:
        message = " ".join(str(e).split())  # one line
        print(f"kswap: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
