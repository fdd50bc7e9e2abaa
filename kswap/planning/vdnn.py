"""vDNN's policies (Rhu et al., MICRO 2016): swap every block, the convolutions, or search.

- ``all`` (vDNN_all): every block's saved tensors go to the host after its
  forward and come back one block ahead (prefetch 1).
- ``conv`` (vDNN_conv): only the blocks of kind ``"conv"`` are swapped.
- ``dyn`` (vDNN_dyn): vDNN profiles configurations from the fastest to the
  most memory-saving, keeping everything, ``conv``, ``all``, and the same
  with the copy back started only when the block's own backward is due
  (prefetch 0, one block's tensors on the device at a time), and takes the
  fastest one that fits.

vDNN keeps no optimizer state (it predates Adam's popularity); here each
policy is tried with the slots on the device and on the host, and the better
is taken: the faster if both fit, else the one with the lower peak.

Example:
    >>> from kswap.planning import Block, Link, Workload
    >>> from kswap.planning.vdnn import vdnn_all, vdnn_dyn
    >>> w = Workload(tuple(Block(f"b{i}", 100, 1.0, 2.0, kind="conv") for i in range(4)))
    >>> link = Link(100.0, 100.0)
    >>> [str(a) for a in vdnn_all(w, 250, link).actions]
    ['swap', 'swap', 'swap', 'swap']
    >>> plan = vdnn_dyn(w, 400, link)             # the baseline fits: keep everything
    >>> plan.counts(), plan.fits
    ({'keep': 4, 'swap': 0, 'recompute': 0}, True)
"""

from __future__ import annotations

from kswap.planning._engine import KEEP, SWAP
from kswap.planning._search import Candidate, Context
from kswap.planning.link import Link
from kswap.planning.plan import Plan
from kswap.planning.workload import Workload

__all__ = ["vdnn_all", "vdnn_conv", "vdnn_dyn", "swap_where"]


def swap_where(ctx: Context, which, prefetch: int = 1) -> tuple:
    """Codes swapping the swappable blocks for which ``which(block)`` holds."""
    return tuple(
        (SWAP, prefetch) if ctx.swappable[i] and which(b) else (KEEP, 1)
        for i, b in enumerate(ctx.workload.blocks)
    )


def _is_conv(block) -> bool:
    return block.kind == "conv"


def all_candidate(ctx: Context) -> Candidate:
    return ctx.best_tier(swap_where(ctx, lambda b: True))


def conv_candidate(ctx: Context) -> Candidate:
    return ctx.best_tier(swap_where(ctx, _is_conv))


def dyn_candidate(ctx: Context) -> Candidate:
    configurations = [ctx.keep_all]
    for prefetch in (1, 0):
        configurations.append(swap_where(ctx, _is_conv, prefetch))
        configurations.append(swap_where(ctx, lambda b: True, prefetch))
    return ctx.best([(codes, host) for codes in configurations for host in ctx.tiers])


def vdnn_all(workload: Workload, budget_bytes: int, link: Link) -> Plan:
    """vDNN_all: swap every block, prefetch 1."""
    ctx = Context(workload, budget_bytes, link)
    return ctx.plan(all_candidate(ctx), "all")


def vdnn_conv(workload: Workload, budget_bytes: int, link: Link) -> Plan:
    """vDNN_conv: swap the blocks of kind ``"conv"``, prefetch 1."""
    ctx = Context(workload, budget_bytes, link)
    return ctx.plan(conv_candidate(ctx), "conv")


def vdnn_dyn(workload: Workload, budget_bytes: int, link: Link) -> Plan:
    """vDNN_dyn: the fastest of vDNN's configurations that fits."""
    ctx = Context(workload, budget_bytes, link)
    return ctx.plan(dyn_candidate(ctx), "dyn")
