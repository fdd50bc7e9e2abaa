"""Lifetime-aware packing of buffers into one arena (SmartPool).

After one profiled training step every buffer's size and lifetime is known;
:func:`pack` gives each an offset in a single arena so that buffers alive at
the same time never share memory, and :func:`plot_packing` draws the result.
:func:`configure` sets TensorFlow's allocator options (for instance a memory
limit sized from a plan).

Example:
    >>> from kswap.allocator import Buffer, pack
    >>> plan = pack([Buffer(1024, 0, 2), Buffer(512, 1, 3)])
    >>> plan.arena_bytes, plan.lower_bound_bytes
    (1536, 1536)
"""

from __future__ import annotations

from kswap.allocator.config import configure
from kswap.allocator.packing import ALGORITHMS, Buffer, PackingPlan, TraceLike, pack
from kswap.allocator.plot import plot_packing

__all__ = [
    "ALGORITHMS",
    "Buffer",
    "PackingPlan",
    "TraceLike",
    "configure",
    "pack",
    "plot_packing",
]
