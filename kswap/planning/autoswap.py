"""AutoSwap's priority scores (Zhang et al., "Efficient Memory Management for
GPU-based Deep Learning Systems", 2019) and the greedy selection they drive.

AutoSwap profiles one iteration, finds the peak of the memory load, and
scores every variable whose *absence*, the time between its last use before
the peak and its next use after it, spans the peak. Here a variable is one
block's saved tensors: last used when its forward ends (``fe``), next used
when its backward starts (``bs``), both from the baseline's simulation;
``t_out`` and ``t_in`` are its copy times over the link.

- **DOA**, duration of absence net of the transfers::

      DOA = (bs - fe) - (t_out + t_in)

- **AOA**, area of absence: ``DOA * size``; for a negative DOA (the copies
  cannot hide), ``DOA / size``, so that among those the big ones rank first
  (as AutoSwap's implementation in SINGA does).
- **WDOA**, DOA weighted by the overload: the integral of how far the
  baseline's load exceeds the limit over the window in which the tensor would
  really be off the device, once both transfers are counted::

      WDOA = integral over [fe + t_out, bs - t_in] of max(load(t) - limit, 0) dt

  A tensor whose window is empty scores its (negative) DOA.
- **vote**: the three rankings' positions added up (a Borda count), lowest
  first; ties go to the higher DOA.

Selection (AutoSwap's greedy): swap variables in score order, those spanning
the peak first, until the simulated peak is under the limit; each swap-in is
scheduled back from the next use, at the smallest prefetch distance whose
blocks' backward compute covers the copy. Each score is tried with the
optimizer's slots on the device and on the host.

Example:
    >>> from kswap.planning import Block, Link, Workload
    >>> from kswap.planning.autoswap import autoswap
    >>> w = Workload(tuple(Block(f"b{i}", 100 * (4 - i), 1.0, 2.0) for i in range(4)))
    >>> plan = autoswap(w, 800, Link(1000.0, 1000.0), "doa")
    >>> plan.fits, [str(a) for a in plan.actions]
    (True, ['swap', 'keep', 'keep', 'keep'])
"""

from __future__ import annotations

import bisect

from kswap.planning._engine import SWAP
from kswap.planning._search import Candidate, Context
from kswap.planning.link import Link
from kswap.planning.plan import Plan
from kswap.planning.workload import Workload

__all__ = ["SCORES", "autoswap", "scores", "swap_order", "prefetch_distance"]

#: AutoSwap's scores, and their vote.
SCORES = ("doa", "aoa", "wdoa", "vote")
#: Longest prefetch distance the swap-in schedule uses.
MAX_PREFETCH = 8


def _overload_integral(ctx: Context):
    """A function giving the integral of ``max(load - limit, 0)`` over ``[a, b]``."""
    times, live = [0.0], [ctx.engine.base[False]]
    for t, delta in ctx.baseline.events:
        if t == times[-1]:
            live[-1] += delta
        else:
            times.append(t)
            live.append(live[-1] + delta)
    over = [max(x - ctx.budget, 0) for x in live]
    area = [0.0]
    for k in range(1, len(times)):
        area.append(area[-1] + over[k - 1] * (times[k] - times[k - 1]))

    def at(t: float) -> float:
        k = bisect.bisect_right(times, t) - 1
        if k < 0:
            return 0.0
        return area[k] + over[k] * (t - times[k])

    return lambda a, b: at(b) - at(a) if b > a else 0.0


def scores(ctx: Context) -> dict[str, list[float]]:
    """Every block's DOA, AOA and WDOA (higher is swapped first), from the baseline."""
    e, starts = ctx.engine, ctx.baseline.backward_start
    integral = _overload_integral(ctx)
    doa, aoa, wdoa = [], [], []
    for i in range(ctx.n):
        size, t_out, t_in = e.saved[i], e.out_saved[i], e.in_saved[i]
        d = (starts[i] - e.fe[i]) - (t_out + t_in)
        doa.append(d)
        aoa.append(d * size if d >= 0 else d / max(size, 1))
        a, b = e.fe[i] + t_out, starts[i] - t_in
        wdoa.append(integral(a, b) if b > a else d)
    return {"doa": doa, "aoa": aoa, "wdoa": wdoa}


def swap_order(ctx: Context, score: str) -> list[int]:
    """The swappable blocks in AutoSwap's order for ``score``: spanning the peak first."""
    if score not in SCORES:
        raise ValueError(f"`score` must be one of {SCORES}. Received: score={score!r}")
    if "autoswap" not in ctx.cache:
        ctx.cache["autoswap"] = scores(ctx)
    s = ctx.cache["autoswap"]
    doa = s["doa"]
    if score == "vote":
        votes = [0] * ctx.n
        for name in ("doa", "aoa", "wdoa"):
            ranked = sorted(range(ctx.n), key=lambda i, v=s[name]: (-v[i], i))
            for position, i in enumerate(ranked):
                votes[i] += position
        key = [(-votes[i], doa[i]) for i in range(ctx.n)]
    else:
        key = [(s[score][i], doa[i]) for i in range(ctx.n)]
    peak = ctx.baseline.peak_time
    starts, fe = ctx.baseline.backward_start, ctx.engine.fe
    chosen = [i for i in range(ctx.n) if ctx.swappable[i]]
    return sorted(chosen, key=lambda i: (not fe[i] <= peak < starts[i], _neg(key[i]), i))


def _neg(key: tuple) -> tuple:
    return tuple(-k for k in key)


def prefetch_distance(ctx: Context, i: int, seconds: float | None = None) -> int:
    """The smallest distance whose blocks' backward compute covers a copy back for block ``i``.

    The copy is of its saved tensors unless ``seconds`` says how long it takes.
    """
    need = ctx.engine.in_saved[i] if seconds is None else seconds
    covered, p = 0.0, 1
    while i + p < ctx.n and p < MAX_PREFETCH:
        covered += ctx.engine.bwd[i + p]
        if covered >= need:
            break
        p += 1
    return p


def candidate(ctx: Context, score: str) -> Candidate:
    order = [(i, (SWAP, prefetch_distance(ctx, i))) for i in swap_order(ctx, score)]
    return ctx.best([ctx.prefix(order, host) for host in ctx.tiers])


def autoswap(workload: Workload, budget_bytes: int, link: Link, score: str = "vote") -> Plan:
    """AutoSwap's greedy selection by ``score`` (``"doa"``, ``"aoa"``, ``"wdoa"``, ``"vote"``)."""
    ctx = Context(workload, budget_bytes, link)
    return ctx.plan(candidate(ctx, score), score)
