"""The allocator's extra by when a buffer was allocated: before the step, in forward, in backward.

TensorFlow's BFC allocator hands a request a free block whole unless the
block is at least twice the request, so a buffer's block is larger than its
tensor by however much the free block it found was. Buffers allocated in the
forward pass mostly get fresh blocks; the backward's (gradients, their
scratch, copies brought back) land in the holes the forward's frees left and
waste more. On a VGG16 step (96x96, batch 32, Adam, device memory emulated on
CPU) the forward's allocations held 4-14% more than their tensors and the
backward's 19-28% (``docs/benchmarks.md``, "The simulator against
measurement"), so a plan whose peak falls in backward (a swap plan's) holds
more beyond its tensors than the plain step, whose peak ends the forward.

A phase's rate is that of its buffers alive together when it holds the most
bytes, as a plan's peak is one instant: averaged over all its allocations,
the many short-lived buffers that fit their blocks make it lower (a
MobileNetV2 step's backward: 25-36% against 53-77% at its own peak).
:func:`extra_by_phase` measures the three rates on a trace;
:func:`kswap.planning.simulate` applies them to a plan's predicted timeline
(``Simulation.allocated_peak_bytes``).

Example:
    >>> from kswap.trace import Allocation, Trace
    >>> from kswap.trace.extra import extra_by_phase
    >>> trace = Trace(buffers=(
    ...     Allocation(size=1024, start_ns=0, end_ns=30, requested_bytes=1024, phase="resident",
    ...                alive_at_start=True),
    ...     Allocation(size=2048, start_ns=1, end_ns=20, requested_bytes=2048, phase="forward"),
    ...     Allocation(size=1536, start_ns=10, end_ns=15, requested_bytes=1024, phase="backward"),
    ... ), steps=((0, 30),), duration_ns=30)
    >>> extra_by_phase(trace, step=0)
    PhaseExtra(persistent=0.0, forward=0.0, backward=0.5)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kswap.trace.model import Trace

__all__ = ["PhaseExtra", "extra_by_phase", "FORWARD_PHASES", "BACKWARD_PHASES"]

#: Phases whose buffers count as the forward's allocations.
FORWARD_PHASES = frozenset({"forward"})
#: Phases whose buffers count as the backward's (copies back are allocated in backward).
BACKWARD_PHASES = frozenset({"backward", "transfer"})
_FIELDS = ("persistent", "forward", "backward")


@dataclasses.dataclass(frozen=True)
class PhaseExtra:
    """How much more the allocator's blocks held than tensors asked for, by phase.

    Each is a fraction of the tensors' bytes (0.2: blocks 20% larger).

    Attributes:
        persistent: Buffers alive at the step's peak that the step's forward
            or backward did not allocate: weights (and the copies the
            optimizer's update made of them), slots, inputs.
        forward: Buffers the step's forward allocated, alive together when
            they were the most.
        backward: Buffers its backward allocated, copies back included,
            alive together when they were the most.
    """

    persistent: float = 0.0
    forward: float = 0.0
    backward: float = 0.0

    def __post_init__(self):
        for name in _FIELDS:
            value = getattr(self, name)
            if not value >= 0.0:
                raise ValueError(f"`{name}` must be >= 0. Received: {name}={value!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, float]) -> PhaseExtra:
        """From :meth:`to_dict`'s form."""
        return cls(**{k: float(v) for k, v in data.items()})

    def to_dict(self) -> dict[str, float]:
        """``{"persistent": ..., "forward": ..., "backward": ...}``."""
        return dataclasses.asdict(self)

    @classmethod
    def most(cls, extras: Iterable[PhaseExtra]) -> PhaseExtra:
        """The largest of ``extras`` in each phase (none for no extras)."""
        extras = list(extras)
        return cls(*(max((getattr(e, f) for e in extras), default=0.0) for f in _FIELDS))


def extra_by_phase(trace: Trace, tier: str = "device", step: int | None = None) -> PhaseExtra:
    """The allocator's extra of ``trace``'s ``step`` (the whole trace if None), by phase.

    The forward's and backward's rates are those of the phase's buffers alive
    together when the phase held the most bytes (of tensors) in the step:
    the peak is one instant, and what the allocator holds then is the blocks
    of the buffers alive then (the module's description). The persistent
    rate is over the buffers alive at the step's peak of blocks that
    neither phase allocated. A phase with no bytes gets 0.0; buffers
    without a recorded request count as their block.
    """
    from kswap.trace.model import _bytes

    lo, hi = trace._window(step)
    peak_ns = trace.timeline(tier, step).peak_time_ns
    changes: dict[str, list[tuple[int, int, int]]] = {"forward": [], "backward": []}
    persistent = [0, 0]
    for b in trace.tier(tier):
        in_step = lo <= b.start_ns < hi and not b.alive_at_start
        if in_step and b.phase in FORWARD_PHASES:
            group = "forward"
        elif in_step and b.phase in BACKWARD_PHASES:
            group = "backward"
        else:
            if peak_ns is not None and b.alive_at(peak_ns):
                persistent[0] += b.size
                persistent[1] += _bytes(b, True)
            continue
        requested = _bytes(b, True)
        changes[group].append((b.start_ns, b.size, requested))
        if not b.alive_at_end:
            changes[group].append((b.end_ns, -b.size, -requested))
    rates = {"persistent": _rate(*persistent)}
    for group, events in changes.items():
        events.sort(key=lambda e: (e[0], e[2]))  # frees first at the same instant
        blocks = tensors = best_blocks = best_tensors = 0
        for _, size, requested in events:
            blocks += size
            tensors += requested
            if tensors > best_tensors:
                best_blocks, best_tensors = blocks, tensors
        rates[group] = _rate(best_blocks, best_tensors)
    return PhaseExtra(**rates)


def _rate(blocks: int, tensors: int) -> float:
    return max(blocks / tensors - 1, 0.0) if tensors else 0.0
