"""Turns allocator events into buffer lifetimes (a :class:`~kswap.trace.Trace`).

Each ``MemoryAllocation`` is paired with the next ``MemoryDeallocation`` of the
same allocator and address. Bytes already in use when profiling began are
recovered from the allocator's own running total (``bytes_allocated``): a
buffer freed during the trace but allocated before it starts at 0, and what
remains of the starting total becomes resident buffers (the model's weights
and optimizer slots where the caller names them, the rest under
:data:`~kswap.trace.RESIDENT`).

Example:
    >>> from kswap.trace.build import build_trace
    >>> from kswap.trace.xspace import MemoryEvent
    >>> events = [
    ...     MemoryEvent(1000, True, "cpu", 1, 256, 100, 512),
    ...     MemoryEvent(3000, False, "cpu", 1, 256, 100, 256),
    ... ]
    >>> trace = build_trace(events, emulated=True, host_scope="kswap_host")
    >>> trace.peak_bytes(), trace.by_layer()
    (512, {'(no layer)': 256, '(resident before profiling)': 256})
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from kswap.trace.model import RESIDENT, Allocation, OpInterval, Trace, granule_bytes
from kswap.trace.xspace import MemoryEvent, OpEvent, StepMarker

__all__ = ["build_ops", "build_trace", "in_scope", "tier_of"]

_GPU_ALLOCATOR = re.compile(r"^GPU_\d+_bfc$")


def in_scope(op: str, scope: str) -> bool:
    """Whether op name ``op`` lies inside name scope ``scope`` (or ``scope_N``)."""
    return re.search(rf"(^|/){re.escape(scope)}(_\d+)?/", op) is not None


def tier_of(event: MemoryEvent, *, emulated: bool, host_scope: str) -> str:
    """The tier of an allocation event.

    On a GPU, device buffers come from the GPUs' BFC allocators and everything
    else (pinned host pool, CPU) is host. In CPU emulation there is one
    allocator: buffers made by kswap's transfer ops (``tf_op`` inside
    ``host_scope``) are host, all others device.
    """
    if emulated:
        return "host" if in_scope(event.tf_op or "", host_scope) else "device"
    return "device" if _GPU_ALLOCATOR.match(event.allocator) else "host"


def build_trace(
    events: Sequence[MemoryEvent],
    *,
    emulated: bool,
    host_scope: str,
    steps: Sequence[StepMarker] = (),
    layer_of: Callable[[str], str | None] | None = None,
    phase_of: Callable[[str], str | None] | None = None,
    residents: Mapping[str, Iterable[int]] | None = None,
    host_residents: Mapping[str, Iterable[int]] | None = None,
    allocators: Callable[[str], bool] | None = None,
    metadata: Mapping | None = None,
    ops: Sequence[OpEvent] = (),
) -> Trace:
    """Builds a :class:`Trace` from time-sorted allocator events.

    Args:
        events: Allocator events, sorted by time.
        emulated: Whether device memory is emulated on the CPU.
        host_scope: Name scope of kswap's host-transfer ops (emulation).
        steps: kswap step markers; each buffer gets the step it started in.
        layer_of: Maps a full op name to its Keras layer, or None.
        phase_of: Maps a full op name to its phase (one of
            :data:`~kswap.trace.PHASES`), or None. Buffers in use before
            profiling began are ``"resident"``.
        residents: Layer name -> byte sizes of tensors known to be alive
            before profiling (weights, optimizer slots). They are taken out of
            the allocator's starting total, each rounded up to 256 bytes (the
            BFC allocator's granule).
        host_residents: The same for tensors kept in the host tier (optimizer
            slots in host memory). When emulated, the allocator's starting
            total holds them too, and they are moved from device to host.
        allocators: Which allocators to read (by name); all if None.
        metadata: Stored as ``Trace.metadata``.
        ops: Op executions (see :func:`build_ops`), sorted by start time; they
            get their layer and phase from ``layer_of`` and ``phase_of``.

    Returns:
        The trace; times are ns from the first event, op or step marker.
    """
    if allocators is not None:
        events = [e for e in events if allocators(e.allocator)]
    ops = _timed_ops(ops)
    origin_ps = min(
        [e.time_ps for e in events[:1]]
        + [s.start_ps for s in steps[:1]]
        + [o.start_ps for o in ops[:1]],
        default=0,
    )
    end_ps = max(
        [e.time_ps for e in events[-1:]] + [s.end_ps for s in steps[-1:]] + [o.end_ps for o in ops],
        default=0,
    )

    def ns(ps: int) -> int:
        return (ps - origin_ps) // 1000

    step_windows = tuple((ns(s.start_ps), ns(s.end_ps)) for s in steps)
    duration = ns(end_ps)

    def step_at(t: int) -> int | None:
        for i, (lo, hi) in enumerate(step_windows):
            if lo <= t < hi:
                return i
        return None

    names = _Names(layer_of, phase_of)
    buffers: list[Allocation] = []
    live: dict[tuple[str, int], tuple[MemoryEvent, int, str]] = {}
    start_total: dict[str, int] = {}
    freed_before: dict[str, int] = {}
    for e in events:
        if e.allocator not in start_total:
            delta = e.allocation_bytes if e.is_allocation else -e.allocation_bytes
            start_total[e.allocator] = e.bytes_allocated - delta
        key = (e.allocator, e.addr)
        if e.is_allocation:
            tier = tier_of(e, emulated=emulated, host_scope=host_scope)
            live[key] = (e, ns(e.time_ps), tier)
            continue
        opened = live.pop(key, None)
        if opened is None:  # allocated before profiling began
            freed_before[e.allocator] = freed_before.get(e.allocator, 0) + e.allocation_bytes
            tier = tier_of(e, emulated=emulated, host_scope=host_scope)
            buffers.append(_allocation(e, 0, ns(e.time_ps), tier, None, names, True))
        else:
            a, t0, tier = opened
            buffers.append(_allocation(a, t0, ns(e.time_ps), tier, step_at(t0), names))
    for a, t0, tier in live.values():
        buffers.append(_allocation(a, t0, duration, tier, step_at(t0), names, alive_at_end=True))
    resident = {"device": 0, "host": 0}
    for name, total in start_total.items():
        probe = MemoryEvent(0, True, name, 0, 0, 0, 0)
        tier = tier_of(probe, emulated=emulated, host_scope=host_scope)
        resident[tier] += max(total - freed_before.get(name, 0), 0)
    host_known = host_residents or {}
    if emulated:
        moved = min(sum(_granules(s) for s in host_known.values()), resident["device"])
        resident["device"] -= moved
        resident["host"] += moved
    buffers.extend(_residents(resident["device"], residents or {}, duration))
    buffers.extend(_residents(resident["host"], host_known, duration, tier="host"))
    buffers.sort(key=lambda b: (b.start_ns, b.end_ns))
    return Trace(
        buffers=tuple(buffers),
        steps=step_windows,
        duration_ns=duration,
        emulated=emulated,
        metadata=dict(metadata or {}),
        ops=build_ops(ops, origin_ps, step_at, names),
    )


def _timed_ops(ops: Sequence[OpEvent]) -> list[OpEvent]:
    """The ops that measure compute: a GPU's kernels and copies if any, else the host's.

    On a GPU the host's op events are the launches of the kernels (and the
    ops that run on the host); the device's time is in its kernels.
    """
    device = [o for o in ops if o.on_device]
    return sorted(device or ops, key=lambda o: (o.start_ps, o.end_ps))


def build_ops(
    ops: Sequence[OpEvent],
    origin_ps: int,
    step_at: Callable[[int], int | None],
    names: Callable[[str | None], tuple[str | None, str | None]],
) -> tuple[OpInterval, ...]:
    """:class:`OpInterval` per op event: times in ns from ``origin_ps``, layer and phase.

    Args:
        ops: Op events, sorted by start time.
        origin_ps: The trace's time 0 (ps).
        step_at: Start time (ns) -> the profiled step it lies in, or None.
        names: Op name -> ``(layer, phase)``.

    Example:
        >>> from kswap.trace.xspace import OpEvent
        >>> build_ops([OpEvent("m/d/MatMul", "MatMul", 5000, 9000)], 1000,
        ...           lambda t: 0, lambda op: ("d", "forward"))
        (OpInterval(op='m/d/MatMul', type='MatMul', start_ns=4, end_ns=8, line='', \
on_device=False, layer='d', phase='forward', step=0),)
    """
    out = []
    for o in ops:
        start = (o.start_ps - origin_ps) // 1000
        layer, phase = names(o.op)
        out.append(
            OpInterval(
                op=o.op,
                type=o.type,
                start_ns=start,
                end_ns=max((o.end_ps - origin_ps) // 1000, start),
                line=o.line,
                on_device=o.on_device,
                layer=layer,
                phase=phase,
                step=step_at(start),
            )
        )
    return tuple(out)


class _Names:
    """Layer and phase of op names, each name looked up once."""

    def __init__(self, layer_of, phase_of):
        self.layer_of, self.phase_of = layer_of, phase_of
        self.cache: dict[str, tuple[str | None, str | None]] = {}

    def __call__(self, op: str | None) -> tuple[str | None, str | None]:
        if not op:
            return None, None
        if op not in self.cache:
            self.cache[op] = (
                self.layer_of(op) if self.layer_of else None,
                self.phase_of(op) if self.phase_of else None,
            )
        return self.cache[op]


def _allocation(
    e: MemoryEvent,
    start: int,
    end: int,
    tier: str,
    step: int | None,
    names: _Names,
    alive_at_start: bool = False,
    alive_at_end: bool = False,
) -> Allocation:
    op = e.tf_op
    layer, phase = names(op)
    return Allocation(
        size=e.allocation_bytes,
        start_ns=start,
        end_ns=end,
        tier=tier,
        op=op,
        layer=layer,
        phase="resident" if alive_at_start else phase,
        step=step,
        requested_bytes=e.requested_bytes,
        allocator=e.allocator,
        shape=e.shape,
        region_type=e.region_type,
        alive_at_start=alive_at_start,
        alive_at_end=alive_at_end,
    )


def _granules(sizes: Iterable[int]) -> int:
    """Bytes of tensors of ``sizes``, each rounded up to the BFC granule."""
    return sum(granule_bytes(s) for s in sizes)


def _residents(
    total: int, known: Mapping[str, Iterable[int]], end: int, tier: str = "device"
) -> list[Allocation]:
    """Splits the resident bytes into named layers' tensors and the remainder."""
    out = []
    for layer, sizes in known.items():
        size = min(_granules(sizes), total)
        if size > 0:
            out.append(_resident(size, end, layer, tier))
            total -= size
    if total > 0:
        out.append(_resident(total, end, None, tier))
    return out


def _resident(size: int, end: int, layer: str | None, tier: str = "device") -> Allocation:
    return Allocation(
        size=size,
        start_ns=0,
        end_ns=end,
        tier=tier,
        op=RESIDENT,
        layer=layer,
        phase="resident",
        alive_at_start=True,
        alive_at_end=True,
    )
