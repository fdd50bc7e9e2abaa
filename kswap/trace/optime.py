"""Op time of a trace: how long each layer's ops ran, per phase.

A trace's :attr:`~kswap.trace.Trace.ops` are op executions with their layer
and phase (forward, backward, transfer, update). Ops run side by side (the
host's executor runs independent ops on several threads; a GPU can run
copies beside kernels), so a layer's time can be counted two ways:

- ``overlap="share"`` (the default): wall-clock time, shared out. The
  trace's time is cut where an op starts or ends; each piece is divided
  equally among the ops running in it. A layer's time is then its part of
  the time something ran, and the layers' times add up to the time any op
  ran (:func:`busy_ns`), never to more.
- ``overlap="sum"``: every op's full duration. Adds up to more than the wall
  time when ops overlap: what a profiler's op table shows.

Op time leaves out the gaps in which no recorded op ran (the executor's own
work, ops too cheap for it to record, waiting for Python), so a step lasts
longer than its ops' busy time; :func:`busy_ns` against the step's length
says by how much.

Example:
    >>> from kswap.trace import OpInterval, Trace
    >>> trace = Trace(buffers=(), ops=(
    ...     OpInterval("m/a/Conv2D", "Conv2D", 0, 10, "t1", layer="a", phase="forward"),
    ...     OpInterval("m/b/Relu", "Relu", 6, 14, "t2", layer="b", phase="forward"),
    ... ))
    >>> time_by_layer(trace)                     # 6-10 is shared by both
    {'a': 8, 'b': 6}
    >>> time_by_layer(trace, overlap="sum"), busy_ns(trace)
    ({'a': 10, 'b': 8}, 14)
"""

from __future__ import annotations

from collections.abc import Sequence

from kswap.trace.model import PHASES, UNATTRIBUTED, UNKNOWN_PHASE, OpInterval, Trace

__all__ = ["OVERLAPS", "busy_ns", "op_shares", "select_ops", "time_by_layer", "time_by_layer_phase"]

#: How overlapping ops are counted.
OVERLAPS = ("share", "sum")


def select_ops(trace: Trace, step: int | None = None) -> tuple[OpInterval, ...]:
    """The ops of profiled step ``step`` (those that started in it), or all of them."""
    if step is None:
        return trace.ops
    if not 0 <= step < len(trace.steps):
        raise ValueError(
            f"`step` must be in [0, {len(trace.steps)}) for this trace. Received: step={step}"
        )
    return tuple(o for o in trace.ops if o.step == step)


def op_shares(ops: Sequence[OpInterval]) -> list[float]:
    """Each op's share of the wall time (ns): its time alone plus its part of shared time.

    Example:
        >>> ops = [OpInterval("a", "A", 0, 4), OpInterval("b", "B", 2, 4)]
        >>> op_shares(ops)
        [3.0, 1.0]
    """
    edges = []
    for i, o in enumerate(ops):
        if o.end_ns > o.start_ns:
            edges.append((o.start_ns, 1, i))
            edges.append((o.end_ns, 0, i))  # ends sort before starts at one instant
    edges.sort()
    shares = [0.0] * len(ops)
    active: set[int] = set()
    last = None
    for t, starts, i in edges:
        if active and last is not None and t > last:
            part = (t - last) / len(active)
            for j in active:
                shares[j] += part
        last = t
        if starts:
            active.add(i)
        else:
            active.discard(i)
    return shares


def busy_ns(trace: Trace, step: int | None = None, phase: str | None = None) -> int:
    """How long at least one op (of ``phase``, if given) was running (ns)."""
    ops = [o for o in select_ops(trace, step) if phase is None or o.phase == phase]
    total, end = 0, None
    for o in sorted(ops, key=lambda o: o.start_ns):
        if end is None or o.start_ns >= end:
            total += o.end_ns - o.start_ns
            end = o.end_ns
        elif o.end_ns > end:
            total += o.end_ns - end
            end = o.end_ns
    return total


def time_by_layer_phase(
    trace: Trace, *, step: int | None = None, overlap: str = "share"
) -> dict[str, dict[str, int]]:
    """Op time (ns) per layer and phase, largest layer first.

    Args:
        trace: A trace with :attr:`~kswap.trace.Trace.ops`.
        step: Only the ops of this profiled step; all if None.
        overlap: ``"share"`` or ``"sum"`` (see the module's docstring).

    Returns:
        ``{layer: {phase: ns}}``; ops of no layer (the loss, the input
        pipeline) are under :data:`~kswap.trace.UNATTRIBUTED`, those of no
        known phase under :data:`~kswap.trace.UNKNOWN_PHASE`.
    """
    if overlap not in OVERLAPS:
        raise ValueError(f"`overlap` must be one of {OVERLAPS}. Received: overlap={overlap!r}")
    ops = select_ops(trace, step)
    times = op_shares(ops) if overlap == "share" else [float(o.duration_ns) for o in ops]
    out: dict[str, dict[str, float]] = {}
    for o, t in zip(ops, times, strict=True):
        phases = out.setdefault(o.layer or UNATTRIBUTED, {})
        key = o.phase or UNKNOWN_PHASE
        phases[key] = phases.get(key, 0.0) + t
    order = {p: i for i, p in enumerate((*PHASES, UNKNOWN_PHASE))}
    rows = sorted(out.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    return {k: {p: round(v[p]) for p in sorted(v, key=order.__getitem__)} for k, v in rows}


def time_by_layer(
    trace: Trace, phase: str | None = None, *, step: int | None = None, overlap: str = "share"
) -> dict[str, int]:
    """Op time (ns) per layer, largest first, of one phase if given.

    Args:
        trace: A trace with :attr:`~kswap.trace.Trace.ops`.
        phase: Count only ops of this phase (one of :data:`~kswap.trace.PHASES`).
        step: Only the ops of this profiled step; all if None.
        overlap: ``"share"`` or ``"sum"`` (see the module's docstring).
    """
    if phase is not None and phase not in PHASES:
        raise ValueError(f"`phase` must be one of {PHASES}. Received: phase={phase!r}")
    out: dict[str, int] = {}
    for layer, phases in time_by_layer_phase(trace, step=step, overlap=overlap).items():
        if phase is None:
            out[layer] = sum(phases.values())
        elif phase in phases:
            out[layer] = phases[phase]
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))
