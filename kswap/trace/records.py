"""The records of a trace: buffers, op executions and live bytes over time.

An :class:`Allocation` is one buffer the allocators handed out (or bytes that
were already in use when profiling began): its size, lifetime, producing op,
Keras layer, memory tier and training step. An :class:`OpInterval` is one op
execution: when it ran, on which thread or stream, its layer and phase. A
:class:`Timeline` is one tier's live bytes over time. The constants name the
tiers, the phases and the layer keys of bytes that belong to no layer. A
:class:`kswap.trace.Trace` (:mod:`kswap.trace.model`) holds the records of one
profiling session. Plain Python, free of any framework.

Example:
    >>> from kswap.trace.records import Allocation, Timeline
    >>> Allocation(size=1024, start_ns=0, end_ns=10).alive_at(5)
    True
    >>> Timeline(times_ns=(0, 5), live_bytes=(1024, 1536)).at(7)
    1536
"""

from __future__ import annotations

import bisect
import dataclasses

__all__ = [
    "Allocation",
    "OpInterval",
    "Timeline",
    "GRANULE",
    "TIERS",
    "PHASES",
    "RESIDENT",
    "UNATTRIBUTED",
    "UNKNOWN_PHASE",
    "granule_bytes",
]


#: The memory tiers a buffer can live in.
TIERS = ("device", "host")
#: ``Allocation.op`` of bytes already in use when profiling began.
RESIDENT = "(resident before profiling)"
#: Bytes TensorFlow's BFC allocator rounds every block up to a multiple of.
GRANULE = 256


def granule_bytes(size: int) -> int:
    """``size`` bytes rounded up to a whole number of :data:`GRANULE` s."""
    return -(-int(size) // GRANULE) * GRANULE


#: ``by_layer`` key for bytes that belong to no Keras layer.
UNATTRIBUTED = "(no layer)"
#: What a buffer's op was doing: running a layer (or the loss) forward,
#: computing gradients (a layer recomputed for its backward included),
#: copying between the tiers (host copies and swap-ins), updating the weights,
#: or nothing: the buffer was in use before profiling began.
PHASES = ("forward", "backward", "transfer", "update", "resident")
#: ``by_layer_phase`` key for bytes whose phase is not known (no op recorded).
UNKNOWN_PHASE = "(unknown)"


@dataclasses.dataclass(frozen=True)
class Allocation:
    """One buffer's lifetime.

    Attributes:
        size: Bytes the allocator set aside for it (its block size).
        start_ns: When it was allocated, in ns from the start of the trace.
        end_ns: When it was freed; the end of the trace if it outlived it.
        tier: ``"device"`` or ``"host"``.
        op: Full name of the op that allocated it, if known.
        layer: The Keras layer that op belongs to (``"outer/inner"`` for nested
            models), if any.
        step: Index of the profiled step it was allocated in, if any.
        requested_bytes: Bytes the op asked for (``size`` is rounded up).
        allocator: Name of the allocator that served it.
        shape: Tensor shape as text, if recorded.
        region_type: ``"output"``, ``"temp"``..., if recorded.
        alive_at_start: Already allocated when profiling began.
        alive_at_end: Still allocated when profiling ended.
        phase: One of :data:`PHASES`, if known.
    """

    size: int
    start_ns: int
    end_ns: int
    tier: str = "device"
    op: str | None = None
    layer: str | None = None
    step: int | None = None
    requested_bytes: int | None = None
    allocator: str | None = None
    shape: str | None = None
    region_type: str | None = None
    alive_at_start: bool = False
    alive_at_end: bool = False
    phase: str | None = None

    def __post_init__(self):
        if self.tier not in TIERS:
            raise ValueError(f"`tier` must be one of {TIERS}. Received: tier={self.tier!r}")
        if self.phase is not None and self.phase not in PHASES:
            raise ValueError(
                f"`phase` must be one of {PHASES} or None. Received: phase={self.phase!r}"
            )
        if self.size < 0:
            raise ValueError(f"`size` must be >= 0. Received: size={self.size}")
        if self.end_ns < self.start_ns:
            raise ValueError(
                "`end_ns` must be >= `start_ns`. "
                f"Received: start_ns={self.start_ns}, end_ns={self.end_ns}"
            )

    def alive_at(self, time_ns: int) -> bool:
        """Whether the buffer holds memory at ``time_ns`` (half-open lifetime)."""
        if self.alive_at_end and time_ns >= self.end_ns:
            return True
        return self.start_ns <= time_ns < self.end_ns


@dataclasses.dataclass(frozen=True)
class OpInterval:
    """One execution of an op: ``[start_ns, end_ns)`` from the start of the trace.

    Attributes:
        op: The op's full name in the training step's graph.
        type: The op's type (``"Conv2D"``, ``"DeepCopy"``...).
        start_ns: When it started.
        end_ns: When it ended.
        line: Where it ran: a host thread's line or a GPU stream's.
        on_device: True for a GPU's kernel or copy, False for an op the host ran.
        layer: The Keras layer it belongs to, if any (as for buffers).
        phase: ``"forward"``, ``"backward"``, ``"transfer"`` or ``"update"``, if known.
        step: Index of the profiled step it started in, if any.
    """

    op: str
    type: str
    start_ns: int
    end_ns: int
    line: str = ""
    on_device: bool = False
    layer: str | None = None
    phase: str | None = None
    step: int | None = None

    def __post_init__(self):
        if self.end_ns < self.start_ns:
            raise ValueError(
                "`end_ns` must be >= `start_ns`. "
                f"Received: start_ns={self.start_ns}, end_ns={self.end_ns}"
            )
        if self.phase is not None and self.phase not in PHASES:
            raise ValueError(
                f"`phase` must be one of {PHASES} or None. Received: phase={self.phase!r}"
            )

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclasses.dataclass(frozen=True)
class Timeline:
    """Live bytes of one tier over time: ``live_bytes[i]`` from ``times_ns[i]`` on."""

    times_ns: tuple[int, ...]
    live_bytes: tuple[int, ...]

    @property
    def peak_bytes(self) -> int:
        return max(self.live_bytes, default=0)

    @property
    def peak_time_ns(self) -> int | None:
        if not self.live_bytes:
            return None
        return self.times_ns[self.live_bytes.index(self.peak_bytes)]

    def at(self, time_ns: int) -> int:
        """Live bytes at ``time_ns`` (0 before the first change)."""
        i = bisect.bisect_right(self.times_ns, time_ns)
        return self.live_bytes[i - 1] if i else 0
