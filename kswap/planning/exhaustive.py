"""The optimal plan of a small workload, by branch and bound over every combination of actions.

For each tier of the optimizer's slots, a depth-first search assigns actions
to the blocks in forward order (by default keep, swap at prefetch 1 and
recompute with inputs kept: ``3**n`` combinations) and simulates every
complete plan it cannot rule out. A partial plan is ruled out by bounds that
hold whatever the remaining blocks do, because the forward's timing does not
depend on the actions and the remaining blocks can only add bytes and time:

- memory: the device bytes at the start of each assigned block's forward
  (persistent bytes, the kept tensors of the blocks before it, its own), and
  at the start of backward (every kept tensor so far), against the budget;
- time: the compute stream's total (every forward and backward, the
  recomputes so far, the update), and for every assigned swap the chain its
  copy back starts: after its copy out (known exactly: the d2h stream serves
  the blocks in forward order) and after the backward of the blocks beyond
  its trigger, then the copy, its backward and every backward before it.

It is exact with respect to :func:`~kswap.planning.simulate` (up to a relative
1e-9 in time) and is what the tests measure the heuristics against;
``max_blocks`` keeps it small.

Example:
    >>> from kswap.planning import Block, Link, Workload
    >>> from kswap.planning.exhaustive import exhaustive
    >>> w = Workload(tuple(Block(f"b{i}", 100, 1.0, 2.0, input_bytes=10) for i in range(5)))
    >>> plan = exhaustive(w, 350, Link(100.0, 100.0))
    >>> plan.fits, plan.predicted_step_seconds
    (True, 15.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kswap.planning._engine import KEEP, RECOMPUTE, RECOMPUTE_HOST, SWAP, code_of
from kswap.planning._search import Context
from kswap.planning.actions import Action, as_action
from kswap.planning.link import Link, as_link
from kswap.planning.plan import Plan
from kswap.planning.workload import Workload

__all__ = ["exhaustive", "MAX_BLOCKS"]

#: Most blocks :func:`exhaustive` accepts by default (``3**16`` combinations).
MAX_BLOCKS = 16
#: Plans less than this much (relative) faster than the best found count as equal.
_TOLERANCE = 1e-9
#: Block-simulations spent on the first incumbent.
SEED_WORK = 20_000


def exhaustive(
    workload: Workload,
    budget_bytes: int,
    link: Link | str,
    *,
    actions: Sequence[Action | str] = ("keep", "swap", "recompute"),
    max_blocks: int = MAX_BLOCKS,
) -> Plan:
    """The fastest plan within ``budget_bytes`` over every combination of ``actions``.

    When no combination fits, returns the plan that evicts every block in the
    same way (the lowest peak of those), which does not fit.

    Raises:
        ValueError: if the workload has more than ``max_blocks`` blocks.
    """
    n = len(workload.blocks)
    if n > max_blocks:
        raise ValueError(
            f"The exhaustive search takes at most max_blocks={max_blocks} blocks. "
            f"Received: a workload of {n}"
        )
    ctx = Context(workload, budget_bytes, as_link(link))
    menu = [code_of(as_action(a)) for a in actions]
    menus = []
    for i in range(n):
        allowed = [
            c
            for c in menu
            if c[0] == KEEP
            or (c[0] == SWAP and ctx.swappable[i])
            or (c[0] in (RECOMPUTE, RECOMPUTE_HOST) and ctx.recomputable[i])
        ]
        menus.append(allowed or [(KEEP, 1)])
    best: list = [math.inf, None]  # the fastest fitting candidate's time, and it
    # a good first incumbent prunes most of the tree: a local search in the same space
    uniform = [tuple(c if c in m else (KEEP, 1) for m in menus) for c in menu]
    for host in ctx.tiers:
        start = ctx.best([(codes, host) for codes in uniform])
        found = ctx.improve(start, menus, SEED_WORK)
        if ctx.fits(*found) and ctx.cost(*found)[0] < best[0]:
            best[0], best[1] = ctx.cost(*found)[0], found
    for host in ctx.tiers:
        _search(ctx, menus, host, best)
    if best[1] is None:  # nothing fits: every block evicted, the lowest peak of the uniform plans
        uniform = [tuple(c if c in m else (KEEP, 1) for m in menus) for c in menu]
        best[1] = ctx.best([(codes, host) for codes in uniform for host in ctx.tiers])
    return ctx.plan(best[1], "exhaustive")


def _search(ctx: Context, menus: list, host: bool, best: list) -> None:
    e, n, budget = ctx.engine, ctx.n, ctx.budget
    base = e.base[host]
    update = e.workload.update_seconds
    if host and e.workload.optimizer_bytes:
        update = max(update, e.slots_in, e.slots_out)
    compute = e.backward_begin + e.backward_after[0] + update
    begin, after = e.backward_begin, e.backward_after
    codes: list = [(KEEP, 1)] * n

    def leaf() -> None:
        key = tuple(codes)
        run = e.run(key, host)
        if run.peak_bytes <= budget and run.step_seconds < best[0] * (1 - _TOLERANCE):
            best[0], best[1] = run.step_seconds, (key, host)

    def visit(i, held, d2h_free, recomputes, bound, out, copied, first) -> None:
        if i == n:
            if base + held + sum(b for end, b in out if end > begin) <= budget:
                leaf()
            return
        out = tuple((end, b) for end, b in out if end > e.fs[i])  # copies still under way
        for code in menus[i]:
            kind, prefetch = code
            # device bytes when block i's forward starts, and held until backward
            start_bytes = base + held + e.saved[i] + e.fb[i] + sum(b for _, b in out)
            o = out
            h, d, r, t, c, f = held, d2h_free, recomputes, bound, copied, first
            if kind == KEEP:
                h += e.saved[i]
            elif kind == RECOMPUTE:
                h += e.inp[i]
                start_bytes += e.inp[i]
            if kind == RECOMPUTE_HOST:
                start_bytes += e.inp[i]
            # ... and when its backward starts: its tensors, its working set, and
            # everything kept for the blocks before it
            back_bytes = base + held + e.saved[i] + (e.kbb if kind == KEEP else e.bb)[i]
            if kind >= RECOMPUTE:
                back_bytes += e.inp[i]
            if start_bytes > budget or back_bytes > budget or base + h > budget:
                continue
            if kind == SWAP or kind == RECOMPUTE_HOST:
                copy_out = e.out_saved[i] if kind == SWAP else e.out_inp[i]
                copy_in = e.in_saved[i] if kind == SWAP else e.in_inp[i]
                d = max(e.fe[i], d) + copy_out
                o = (*out, (d, e.saved[i] if kind == SWAP else e.inp[i]))
                trigger = begin + after[min(i + prefetch + 1, n)]
                own = e.rec[i] if kind == RECOMPUTE_HOST else 0.0
                done = after[0] - after[i + 1]  # backwards of blocks 0..i
                t = max(t, max(d, trigger) + copy_in + own + done + r + update)
                # copies back run one at a time after backward begins, and the
                # backwards from the first copied block down follow the last
                c += copy_in
                if f < 0:
                    f = i
                t = max(t, begin + c + after[0] - after[f + 1] + update)
            if kind >= RECOMPUTE:
                r += e.rec[i]
            if max(t, compute + r) >= best[0] * (1 - _TOLERANCE):
                continue
            codes[i] = code
            visit(i + 1, h, d, r, t, o, c, f)
        codes[i] = (KEEP, 1)

    visit(0, 0, 0.0, 0.0, 0.0, (), 0.0, -1)
