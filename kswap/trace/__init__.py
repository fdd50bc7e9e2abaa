"""The trace model and trace reading: framework-free.

``Trace`` holds buffer lifetimes; ``read_xspace`` reads a profiler file;
``build_trace`` turns its allocator events into a ``Trace``.
"""

from kswap.trace.build import build_trace, tier_of
from kswap.trace.model import (
    PHASES,
    RESIDENT,
    TIERS,
    UNATTRIBUTED,
    UNKNOWN_PHASE,
    Allocation,
    Timeline,
    Trace,
)
from kswap.trace.xspace import STEP_MARKER, MemoryEvent, StepMarker, XSpaceEvents, read_xspace

__all__ = [
    "Allocation",
    "MemoryEvent",
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
    "read_xspace",
    "tier_of",
]
