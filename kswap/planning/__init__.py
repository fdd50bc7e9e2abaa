"""Planning what to swap, recompute or keep under a device memory budget.

Pure Python, free of any framework: a :class:`Workload` (the blocks of one
training step with their bytes and times), a :class:`Link` between device
and host memory, device presets, per-block :class:`Action` s, budgets, and a
simulator of the step over three streams (:func:`simulate`) that predicts a
:class:`Plan`'s step time and device peak.

Example:
    >>> from kswap.planning import Block, Link, Workload, parse_budget
    >>> w = Workload((Block("conv", 64 * 2**20, 0.004, 0.008, kind="conv"),), weight_bytes=2**20)
    >>> parse_budget("50%").resolve(w.persistent_bytes() + w.saved_bytes) == 65 * 2**19
    True
"""

from __future__ import annotations

from kswap.planning.actions import Action
from kswap.planning.budget import Budget, parse_budget
from kswap.planning.devices import DEVICES, Device
from kswap.planning.link import LINKS, Link
from kswap.planning.plan import Plan
from kswap.planning.simulate import Interval, Simulation, simulate
from kswap.planning.workload import Block, Workload

__all__ = [
    "Action",
    "Block",
    "Budget",
    "DEVICES",
    "Device",
    "Interval",
    "LINKS",
    "Link",
    "Plan",
    "Simulation",
    "Workload",
    "parse_budget",
    "simulate",
]
