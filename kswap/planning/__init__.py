"""Planning what to swap, recompute or keep under a device memory budget.

Pure Python, free of any framework: a :class:`Workload` (the blocks of one
training step with their bytes and times), a :class:`Link` between device
and host memory, a simulator of the step over three streams
(:func:`simulate`), per-block :class:`Action` s, and strategies (vDNN's,
AutoSwap's, a Capuchin-like hybrid, ``auto``) that turn a budget into a
:class:`Plan`. See docs/planning.md for the model and the strategies.

Example:
    >>> from kswap.planning import Block, Workload, make_plan
    >>> w = Workload(
    ...     tuple(Block(f"layer{i}", 64 * 2**20, 0.004, 0.008, kind="conv") for i in range(8)),
    ...     weight_bytes=2**20, gradient_bytes=2**20, optimizer_bytes=2 * 2**20,
    ... )
    >>> plan = make_plan(w, 0.5, "pcie3")        # half the peak, over PCIe Gen3
    >>> plan.fits, plan.counts(), round(plan.slowdown, 3)
    (True, {'keep': 4, 'swap': 4, 'recompute': 0}, 1.002)
    >>> print(plan.table(w))
    block   kind  saved bytes  action
    layer0  conv   67,108,864  swap
    layer1  conv   67,108,864  swap
    layer2  conv   67,108,864  swap
    layer3  conv   67,108,864  swap
    layer4  conv   67,108,864  keep
    layer5  conv   67,108,864  keep
    layer6  conv   67,108,864  keep
    layer7  conv   67,108,864  keep
"""

from __future__ import annotations

from kswap.planning.actions import Action
from kswap.planning.budget import Budget, parse_budget
from kswap.planning.devices import DEVICES, Device
from kswap.planning.link import LINKS, Link
from kswap.planning.plan import Plan
from kswap.planning.simulate import Interval, Simulation, simulate
from kswap.planning.strategies import STRATEGIES, make_plan, smallest_budget
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
    "STRATEGIES",
    "Simulation",
    "Workload",
    "make_plan",
    "parse_budget",
    "simulate",
    "smallest_budget",
]
