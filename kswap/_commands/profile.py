"""``kswap profile`` and ``kswap measure``: a named model's training steps, measured.

Both build the model from ``--model`` (``kswap.modelspec``), train it a few
steps on synthetic data and print the device peak and step time
(``_measure``); ``kswap profile`` adds tables of bytes and op time per layer
and phase, and with ``--pack`` the packing report of ``kswap._commands.pack``.
"""

from __future__ import annotations

import json
import sys

from kswap._commands import pack
from kswap.allocator.report import DEFAULT_ALGORITHMS

__all__ = ["run", "run_measure"]

_MIB = 1024 * 1024


def _mib(n: int) -> str:
    return f"{n / _MIB:,.1f} MiB"


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


def run(args) -> int:
    """``kswap profile``."""
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
        pack.report(trace, DEFAULT_ALGORITHMS, args.plot)
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

    _print_top(items, top, line)


def _print_top(rows: list, top: int, line) -> None:
    """Prints the first ``top`` rows with ``line``, then one row summing the rest by phase."""
    for name, phases in rows[:top]:
        print(line(name, phases))
    if len(rows) > top:
        rest: dict[str, int] = {}
        for _, phases in rows[top:]:
            for p, n in phases.items():
                rest[p] = rest.get(p, 0) + n
        print(line(f"({len(rows) - top} more)", rest))


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

    _print_top(rows, top, line)


def run_measure(args) -> int:
    """``kswap measure``."""
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
