"""Simulating a training step: its time and its device memory under a plan.

:func:`simulate` runs one step of a :class:`~kswap.planning.Workload` as a
discrete-event schedule over three streams, compute, device-to-host (d2h) and
host-to-device (h2d), and reports the step time, the device peak, the device
bytes over time and when each stream is busy. The model:

- **Compute** runs the blocks' forwards in order, then their backwards in
  reverse order, then the optimizer's update, one task at a time. Forwards
  never wait for copies (copies only hold memory longer); a backward waits for
  its block's copy back; a recomputed block re-runs its forward on the compute
  stream just before its backward.
- **Copies** run one at a time per direction, in the order they become
  ready. A swapped block's copy out starts when its forward ends (or when the
  d2h stream frees up) and its device buffer is freed when the copy ends. Its
  copy back becomes ready when the copy out has ended and the upstream
  gradient of the block ``prefetch`` places later in forward order exists,
  that is when the backward of block ``i + prefetch`` may start
  (``prefetch=0``: when the backward just before its own has ended); the
  device buffer is allocated when the copy starts. A copy of ``b`` bytes
  takes ``link.latency_s + b / bandwidth``.
- **Memory**: the persistent bytes (weights, gradients, other, and the
  optimizer's slots unless they are on the host) throughout; a block's
  ``saved_bytes`` from its forward's start until its backward ends (kept),
  its copy out ends (swapped; again from its copy back's start) or its
  forward ends (recomputed; again from its recompute's start); a recomputed
  block's ``input_bytes`` from its forward to its backward (or, on the host,
  like a swap); ``forward_bytes`` during a forward or recompute;
  ``backward_bytes`` during a backward (``keep_backward_bytes`` for a kept
  block); a block's ``gradient_bytes`` from its
  backward's start to the step's end. The device peak is the most of their
  sum at any instant; a buffer freed at an instant is gone before one
  allocated at the same instant arrives.
- **Optimizer slots in host memory** stream in and out over the link while
  the update runs (pipelined per weight): the update takes the longest of its
  compute and the two transfers. The device copy of one weight's slots during
  its update is not counted.

- **The allocator's blocks**: ``peak_bytes`` counts what tensors ask for.
  ``allocated_peak_bytes`` scales each byte by how much more the allocator
  held for buffers of its phase in the profiled step
  (``metadata["allocator_extra_by_phase"]``, :mod:`kswap.trace.extra`):
  the persistent bytes by the persistent rate, what the forward allocated
  (saved tensors, its working sets, inputs kept for a recompute) by the
  forward's, and what the backward allocated (copies back, recomputed
  tensors, working sets, gradients) by the backward's. A workload with one
  ``metadata["allocator_overhead"]`` gets it for all three; one with
  neither, none.

What it leaves out: which free blocks the allocator finds (its rates are
the profiled step's, each at its phase's own peak), compute slowed by concurrent copies, ops of one
block that could overlap the next, and host memory limits. Recomputing a
block whose input is also another block's saved tensor counts that tensor
twice (conservative).

Example:
    >>> from kswap.planning import Block, Link, Workload, simulate
    >>> w = Workload((Block("a", 100, 1.0, 2.0), Block("b", 100, 1.0, 2.0)))
    >>> link = Link(100.0, 100.0)                  # 100 bytes/s: one second a copy
    >>> keep = simulate(w, "keep", link)
    >>> keep.step_seconds, keep.peak_bytes
    (6.0, 200)
    >>> swap_a = simulate(w, ["swap", "keep"], link)  # out under b's forward, in under its backward
    >>> swap_a.step_seconds, swap_a.peak_bytes
    (6.0, 200)
    >>> simulate(w, ["swap:0", "keep"], link).step_seconds   # copied back only after b's backward
    7.0
    >>> [(i.stream, i.start, i.end) for i in swap_a.busy("h2d")]
    [('h2d', 2.0, 3.0)]
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kswap.planning._engine import Engine, code_of
from kswap.planning.actions import Action, as_action
from kswap.planning.link import Link, as_link
from kswap.planning.workload import TIERS, Workload

__all__ = ["Interval", "Simulation", "simulate", "resolve_actions", "STREAMS"]

#: The simulated streams.
STREAMS = ("compute", "d2h", "h2d")


@dataclasses.dataclass(frozen=True)
class Interval:
    """A stream busy with one task: ``[start, end)`` seconds from the step's start."""

    stream: str
    start: float
    end: float
    block: str | None
    what: str


@dataclasses.dataclass(frozen=True)
class Simulation:
    """The predicted step.

    Attributes:
        step_seconds: When the last task of any stream ends.
        persistent_bytes: Device bytes alive through the step (before and after it).
        peak_bytes: The most device bytes in use at any instant.
        peak_time: When that peak is first reached.
        allocated_peak_bytes: The most the allocator is predicted to hold:
            each phase's bytes with the allocator's extra the workload
            records for that phase (the module's description).
        times: Instants at which the device bytes change, ascending.
        device_bytes: Device bytes in use from ``times[i]`` on.
        intervals: Every stream's busy intervals, by stream and start.
    """

    step_seconds: float
    persistent_bytes: int
    peak_bytes: int
    peak_time: float
    times: tuple[float, ...]
    device_bytes: tuple[int, ...]
    intervals: tuple[Interval, ...]
    allocated_peak_bytes: int = 0

    def bytes_at(self, time: float) -> int:
        """Device bytes in use at ``time`` (the persistent bytes before the first change)."""
        i = bisect.bisect_right(self.times, time)
        return self.device_bytes[i - 1] if i else self.persistent_bytes

    def busy(self, stream: str) -> tuple[Interval, ...]:
        """The busy intervals of one stream, in order."""
        if stream not in STREAMS:
            raise ValueError(f"`stream` must be one of {STREAMS}. Received: stream={stream!r}")
        return tuple(i for i in self.intervals if i.stream == stream)

    def busy_seconds(self, stream: str) -> float:
        """How long one stream is busy in the step."""
        return sum(i.end - i.start for i in self.busy(stream))


def resolve_actions(workload: Workload, actions: Any) -> tuple[Action, ...]:
    """One :class:`Action` per block from the forms :func:`simulate` accepts.

    ``actions`` is one action (or its short form) for every block, a sequence
    of one per block, or a mapping from block names to actions (others keep).
    """
    n = len(workload.blocks)
    if isinstance(actions, (Action, str)):
        out = (as_action(actions),) * n
    elif isinstance(actions, Mapping):
        unknown = sorted(set(actions) - set(workload.names))
        if unknown:
            raise ValueError(f"`actions` names blocks the workload lacks: {unknown}")
        out = tuple(as_action(actions.get(name, "keep")) for name in workload.names)
    elif isinstance(actions, Sequence):
        if len(actions) != n:
            raise ValueError(
                f"`actions` must hold one action per block ({n}). Received: {len(actions)}"
            )
        out = tuple(as_action(a) for a in actions)
    else:
        raise ValueError(
            "`actions` must be an action, a sequence of actions or a mapping from block "
            f"names to actions. Received: actions={actions!r}"
        )
    for block, action in zip(workload.blocks, out, strict=True):
        if action.kind == "swap" and not block.swappable:
            raise ValueError(f"Block {block.name!r} cannot be swapped (swappable=False).")
        if action.kind == "recompute" and not block.recomputable:
            raise ValueError(f"Block {block.name!r} cannot be recomputed (recomputable=False).")
    return out


def simulate(
    workload: Workload,
    plan: Any,
    link: Link | str,
    *,
    optimizer_state: str | None = None,
) -> Simulation:
    """Predicts one training step of ``workload`` under a plan.

    Args:
        workload: The blocks and persistent bytes.
        plan: A :class:`~kswap.planning.Plan`, or actions in any form
            :func:`resolve_actions` accepts (``"keep"``, ``["swap", "keep"]``,
            ``{"conv1": "recompute"}``).
        link: A :class:`Link` or a preset's name.
        optimizer_state: ``"device"`` or ``"host"``: where the optimizer's slots
            are; defaults to the plan's, or ``"device"``.

    Returns:
        A :class:`Simulation`.
    """
    link = as_link(link)
    if hasattr(plan, "actions") and hasattr(plan, "optimizer_state"):
        actions = resolve_actions(workload, plan.actions)
        optimizer_state = optimizer_state or plan.optimizer_state
    else:
        actions = resolve_actions(workload, plan)
    optimizer_state = optimizer_state or "device"
    if optimizer_state not in TIERS:
        raise ValueError(
            f"`optimizer_state` must be one of {TIERS}. "
            f"Received: optimizer_state={optimizer_state!r}"
        )
    run = Engine(workload, link).run(
        [code_of(a) for a in actions], optimizer_state == "host", detail=True
    )
    base = workload.persistent_bytes(optimizer_state)
    times, live = [0.0], [base]
    for t, delta in run.events:
        if t == times[-1]:
            live[-1] += delta
        else:
            times.append(t)
            live.append(live[-1] + delta)
    names = workload.names
    intervals = tuple(
        Interval(stream, start, end, names[i] if i >= 0 else None, what)
        for stream, start, end, i, what in run.intervals
    )
    return Simulation(
        step_seconds=run.step_seconds,
        persistent_bytes=base,
        peak_bytes=run.peak_bytes,
        peak_time=run.peak_time,
        times=tuple(times),
        device_bytes=tuple(live),
        intervals=intervals,
        allocated_peak_bytes=_allocated_peak(run, base, phase_extra(workload)),
    )


def phase_extra(workload: Workload) -> tuple[float, float, float]:
    """The allocator's extra ``(persistent, forward, backward)`` a workload records.

    ``metadata["allocator_extra_by_phase"]`` (a mapping with those keys), else
    ``metadata["allocator_overhead"]`` for all three, else none.
    """
    meta = workload.metadata
    by_phase = meta.get("allocator_extra_by_phase")
    if isinstance(by_phase, Mapping):
        return tuple(float(by_phase.get(k, 0.0)) for k in ("persistent", "forward", "backward"))
    extra = float(meta.get("allocator_overhead", 0.0) or 0.0)
    return (extra, extra, extra)


def _allocated_peak(run, base: int, extra: tuple[float, float, float]) -> int:
    """The most of the persistent, forward and backward bytes, each with its extra."""
    p, f, b = (1 + e for e in extra)
    if p == f == b:
        return round(run.peak_bytes * p)
    live = best = base * p
    for (_, delta), backward in zip(run.events, run.backward, strict=True):
        live += delta * (b if backward else f)
        best = max(best, live)
    return round(best)
