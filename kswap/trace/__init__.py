"""The trace model and trace reading: framework-free.

``Trace`` holds buffer lifetimes and op intervals; ``read_xspace`` reads a
profiler file; ``build_trace`` turns its allocator events and op events into
a ``Trace``; ``kswap.trace.optime`` sums op time per layer and phase;
``kswap.trace.extra`` measures the allocator's extra by phase.
"""

from kswap.trace.build import build_trace, tier_of
from kswap.trace.extra import PhaseExtra, extra_by_phase
from kswap.trace.model import Trace
from kswap.trace.optime import busy_ns, time_by_layer, time_by_layer_phase
from kswap.trace.records import (
    GRANULE,
    PHASES,
    RESIDENT,
    TIERS,
    UNATTRIBUTED,
    UNKNOWN_PHASE,
    Allocation,
    OpInterval,
    Timeline,
)
from kswap.trace.xspace import (
    STEP_MARKER,
    MemoryEvent,
    OpEvent,
    StepMarker,
    XSpaceEvents,
    read_xspace,
)

__all__ = [
    "Allocation",
    "GRANULE",
    "MemoryEvent",
    "OpEvent",
    "OpInterval",
    "PhaseExtra",
    "PHASES",
    "RESIDENT",
    "STEP_MARKER",
    "StepMarker",
    "TIERS",
    "Timeline",
    "Trace",
    "UNATTRIBUTED",
    "UNKNOWN_PHASE",
    "XSpaceEvents",
    "build_trace",
    "busy_ns",
    "extra_by_phase",
    "read_xspace",
    "tier_of",
    "time_by_layer",
    "time_by_layer_phase",
]
