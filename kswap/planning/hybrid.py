"""A Capuchin-like hybrid (Peng et al., ASPLOS 2020): swap where the copy hides,
recompute where it does not.

For every block, from the baseline's timings and ignoring contention on the
link:

- a swap's exposed time is what its copy back does not hide under the
  backward compute of the blocks between its trigger and its own backward
  (at the prefetch distance AutoSwap's schedule gives), plus what its copy
  out does not hide before that;
- a recompute costs its ``recompute_seconds``, with its inputs kept (it
  saves ``saved_bytes - input_bytes``) or, when their copy back hides, on
  the host (it saves ``saved_bytes``).

Each block gets its cheaper eviction (a swap when its copy hides), and blocks
are evicted in order of cost per byte saved until the simulated peak fits.
Then, as Capuchin corrects its plan with measured times, the swapped blocks
whose backward waited for their copy (the link is shared: copies that hide
one by one may not hide together) longer than their recompute would take are
recomputed instead, and the selection is made again; up to :data:`ROUNDS`
times (and :data:`ROUND_WORK` block-simulations), while the plan gets better.
When even evicting every block does not fit (copies out that end too late to
lower the peak), the swaps are recomputed instead.

Example:
    >>> from kswap.planning import Block, Link, Workload
    >>> from kswap.planning.hybrid import hybrid
    >>> w = Workload(tuple(Block(f"b{i}", 1000, 1.0, 1.0, input_bytes=10) for i in range(3)))
    >>> plan = hybrid(w, 2100, Link(100.0, 100.0))   # a 10 s copy or a 1 s recompute
    >>> [str(a) for a in plan.actions], plan.fits
    (['recompute:host', 'keep', 'keep'], True)
"""

from __future__ import annotations

from kswap.planning import autoswap
from kswap.planning._engine import RECOMPUTE, RECOMPUTE_HOST, SWAP
from kswap.planning._search import Candidate, Context
from kswap.planning.autoswap import prefetch_distance
from kswap.planning.link import Link
from kswap.planning.plan import Plan
from kswap.planning.workload import Workload

__all__ = ["hybrid", "evictions", "ROUNDS"]

#: Rounds of correction by the simulated waits, and the block-simulations they may spend.
ROUNDS = 4
ROUND_WORK = 15_000


def _hidden(ctx: Context, i: int, p: int) -> tuple[float, float]:
    """Compute time that can hide block ``i``'s copy back, and its copy out."""
    e, after = ctx.engine, ctx.engine.backward_after
    j = min(i + p + 1, ctx.n)
    return after[i + 1] - after[j], (e.backward_begin - e.fe[i]) + after[j]


def evictions(ctx: Context) -> list[tuple[float, int, tuple[int, int]]]:
    """``(cost per byte saved, block, code)`` of every block's cheaper eviction, cheapest first.

    The link is shared: blocks are visited by decreasing DOA (the longest idle
    first), and a copy counts as hidden only while the copies so far fit in
    the forward's time (out) and the backward's compute time (in).
    """
    e = ctx.engine
    if "autoswap" not in ctx.cache:
        ctx.cache["autoswap"] = autoswap.scores(ctx)
    doa = ctx.cache["autoswap"]["doa"]
    free_out, free_in = e.backward_begin, e.backward_after[0]
    out = []
    for i in sorted(range(ctx.n), key=lambda i: (-doa[i], i)):
        options = []  # (cost seconds, bytes saved, code, link seconds out, in)
        p = prefetch_distance(ctx, i)
        back, forward = _hidden(ctx, i, p)
        if ctx.swappable[i]:
            t_out, t_in = e.out_saved[i], e.in_saved[i]
            exposed = max(0.0, t_in - min(back, free_in)) + max(0.0, t_out - min(forward, free_out))
            options.append((exposed, e.saved[i], (SWAP, p), t_out, t_in))
        if ctx.recomputable[i]:
            q = prefetch_distance(ctx, i, e.in_inp[i])
            back_q, forward_q = _hidden(ctx, i, q)
            t_out, t_in = e.out_inp[i], e.in_inp[i]
            if t_in <= min(back_q, free_in) and t_out <= min(forward_q, free_out):
                options.append((e.rec[i], e.saved[i], (RECOMPUTE_HOST, q), t_out, t_in))
            elif e.saved[i] > e.inp[i]:
                options.append((e.rec[i], e.saved[i] - e.inp[i], (RECOMPUTE, 1), 0.0, 0.0))
        options = [o for o in options if o[1] > 0]
        if not options:
            continue
        swap = [o for o in options if o[2][0] == SWAP]
        if swap and swap[0][0] == 0.0:
            choice = swap[0]  # the copy hides: swap
        else:
            choice = min(options, key=lambda o: (o[0] / o[1], -o[1]))
        cost, saved, code, t_out, t_in = choice
        free_out, free_in = max(0.0, free_out - t_out), max(0.0, free_in - t_in)
        out.append((cost / saved, i, code))
    out.sort(key=lambda c: (c[0], -e.saved[c[1]], c[1]))
    return out


def _recompute(ctx: Context, i: int) -> tuple[int, int]:
    """Block ``i``'s recompute: inputs kept if that frees bytes, else sent to the host."""
    return (RECOMPUTE, 1) if ctx.engine.saved[i] > ctx.engine.inp[i] else (RECOMPUTE_HOST, 0)


def _waits(ctx: Context, found: Candidate) -> list[float]:
    """How long each swapped block's backward waited for its copy back, in the simulation."""
    run = ctx.detail(*found)
    e, starts = ctx.engine, run.backward_start
    waits = []
    for i in range(ctx.n):
        ready = e.backward_begin if i == ctx.n - 1 else starts[i + 1] + e.bwd[i + 1]
        waits.append(starts[i] - ready if found[0][i][0] == SWAP else 0.0)
    return waits


def candidate(ctx: Context) -> Candidate:
    order = [(i, code) for _, i, code in evictions(ctx)]
    found = ctx.best([ctx.prefix(order, host) for host in ctx.tiers])
    e = ctx.engine
    if not ctx.fits(*found):  # swaps that cannot free memory in time: recompute them too
        order = [
            (i, _recompute(ctx, i) if c[0] == SWAP and ctx.recomputable[i] else c) for i, c in order
        ]
        found = ctx.best([found] + [ctx.prefix(order, host) for host in ctx.tiers])
    limit = e.work + ROUND_WORK
    for _ in range(ROUNDS):  # recompute what the simulation shows waiting longer than that
        if e.work >= limit:
            break
        waits = _waits(ctx, found)
        late = {i for i in range(ctx.n) if ctx.recomputable[i] and waits[i] > e.rec[i]}
        if not late:
            break
        order = [(i, _recompute(ctx, i) if i in late else code) for i, code in order]
        again = ctx.best([ctx.prefix(order, host) for host in ctx.tiers])
        if not ctx.better(again, found):
            break
        found = again
    return found


def hybrid(workload: Workload, budget_bytes: int, link: Link) -> Plan:
    """Swap where the copy hides under compute, recompute where that is cheaper."""
    ctx = Context(workload, budget_bytes, link)
    return ctx.plan(candidate(ctx), "hybrid")
