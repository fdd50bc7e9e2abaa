"""What the strategies share: one planning problem, prefix search, local search.

A :class:`Context` is one problem (workload, budget, link) with its engine,
its baseline simulation and a memo of every simulated candidate, so that
``auto`` runs every strategy on one context without simulating a plan twice.
Candidates are ``(codes, host_slots)`` pairs in the engine's codes (see
:mod:`kswap.planning._engine`).

Work is counted in block-simulations (one simulated step of an ``n``-block
workload is ``n + 1``), never in seconds, so that a plan is the same on every
machine.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from kswap.planning._engine import KEEP, RECOMPUTE, RECOMPUTE_HOST, SWAP, Engine, Run, action_of
from kswap.planning.link import Link
from kswap.planning.plan import Plan
from kswap.planning.workload import Workload

__all__ = ["Context", "Candidate", "LOCAL_WORK"]

Code = tuple[int, int]
Candidate = tuple[tuple[Code, ...], bool]

#: Block-simulations the local search of ``auto`` may spend (about 30 steps
#: of a 1,000-block workload, thousands of a small one).
LOCAL_WORK = 30_000
#: Kicks without a better plan after which the iterated local search stops.
PATIENCE = 10
_EPS = 1e-12


class Context:
    """One planning problem and the simulations run for it so far."""

    def __init__(self, workload: Workload, budget_bytes: int, link: Link):
        self.workload, self.budget, self.link = workload, budget_bytes, link
        self.engine = Engine(workload, link)
        self.n = n = len(workload.blocks)
        self.keep_all: tuple[Code, ...] = ((KEEP, 1),) * n
        self.baseline = self.engine.run(self.keep_all, False, detail=True)
        movable = workload.optimizer_bytes and workload.optimizer_movable
        self.tiers = (False, True) if movable else (False,)
        self._memo: dict[Candidate, tuple[float, int]] = {}
        self.cache: dict = {}  # what the strategies compute once per problem
        blocks = workload.blocks
        # a block with nothing saved of its own may read another's (Block.shared)
        reads = self.engine.fetched
        self.swappable = [b.swappable and reads[i] > 0 for i, b in enumerate(blocks)]
        self.recomputable = [b.recomputable and b.saved_bytes > 0 for b in blocks]
        #: evicting block i swaps the kept readers of its shared tensors too (see couple)
        self._readers = [[j for j, _ in pairs if self.swappable[j]] for pairs in self.engine.shared]

    # --- evaluation -------------------------------------------------------------

    def couple(self, codes: Sequence[Code]) -> tuple[Code, ...]:
        """``codes`` with the kept readers of every evicted block's shared tensors swapped.

        A tensor two blocks' backwards read (``Block.shared``) stays on the
        device while either keeps it, so evicting one block alone saves
        nothing of it: the strategies' one-block moves would never find the
        pair. Candidates are evaluated, and become plans, coupled.
        """
        out = None
        for i, (kind, prefetch) in enumerate(codes):
            if kind == KEEP:
                continue
            for j in self._readers[i]:
                if (out or codes)[j][0] == KEEP:
                    out = out or list(codes)
                    out[j] = (SWAP, prefetch if kind == SWAP else 1)
        return tuple(codes) if out is None else tuple(out)

    def cost(self, codes: Sequence[Code], host: bool) -> tuple[float, int]:
        """``(step seconds, peak bytes)`` of a candidate (memoized), coupled (:meth:`couple`)."""
        key = (tuple(codes), host)
        found = self._memo.get(key)
        self.engine.work += 1  # a look-up costs a little too: a search of seen plans ends
        if found is None:
            run = self.engine.run(self.couple(key[0]), host)
            found = self._memo[key] = (run.step_seconds, run.peak_bytes)
        return found

    def fits(self, codes: Sequence[Code], host: bool) -> bool:
        return self.cost(codes, host)[1] <= self.budget

    def detail(self, codes: Sequence[Code], host: bool) -> Run:
        return self.engine.run(self.couple(codes), host, detail=True)

    def better(self, a: Candidate, b: Candidate | None, ties: str = "traffic") -> bool:
        """Whether ``a`` is better than ``b``.

        Of two that fit, the faster; at equal times, with ``ties="traffic"``,
        the one that moves or recomputes fewer bytes (a copy that hides in the
        model still loads the link), then the lower peak; with ``ties="peak"``
        (the local search, which moves along plateaus), the lower peak. Of two
        that do not fit, the lower peak. One that fits beats one that does not.
        """
        if b is None:
            return True
        (ta, pa), (tb, pb) = self.cost(*a), self.cost(*b)
        fa, fb = pa <= self.budget, pb <= self.budget
        if fa != fb:
            return fa
        if not fa:
            return pa < pb or (pa == pb and ta < tb)
        tolerance = _EPS * max(ta, tb)
        if abs(ta - tb) > tolerance:
            return ta < tb
        if ties == "peak":
            return pa < pb
        ma, mb = self.traffic(a), self.traffic(b)
        return ma < mb or (ma == mb and pa < pb)

    def traffic(self, candidate: Candidate) -> int:
        """Bytes a candidate copies over the link or recomputes per step."""
        codes, host = candidate
        e, total = self.engine, self.workload.optimizer_bytes if host else 0
        for i, (kind, _) in enumerate(codes):
            if kind == SWAP:
                total += e.saved[i]
            elif kind == RECOMPUTE:
                total += e.saved[i]
            elif kind == RECOMPUTE_HOST:
                total += e.saved[i] + e.inp[i]
        return total

    def best(self, candidates: Sequence[Candidate]) -> Candidate:
        best = None
        for c in candidates:
            if self.better(c, best):
                best = c
        assert best is not None
        return best

    def plan(self, candidate: Candidate, strategy: str) -> Plan:
        """The :class:`Plan` of a candidate."""
        codes, host = candidate
        step, peak = self.cost(codes, host)
        codes = self.couple(codes)
        actions = tuple(action_of(c) for c in codes)
        w = self.workload
        swapped = recomputed = 0
        for b, (kind, _) in zip(w.blocks, codes, strict=True):
            if kind == SWAP:
                swapped += b.saved_bytes
            elif kind in (RECOMPUTE, RECOMPUTE_HOST):
                recomputed += b.saved_bytes
                swapped += b.input_bytes if kind == RECOMPUTE_HOST else 0
        if host:
            swapped += w.optimizer_bytes
        return Plan(
            blocks=w.names,
            actions=actions,
            link=self.link,
            predicted_peak_bytes=peak,
            predicted_step_seconds=step,
            baseline_peak_bytes=self.baseline.peak_bytes,
            baseline_step_seconds=self.baseline.step_seconds,
            workload_fingerprint=w.fingerprint(),
            optimizer_state="host" if host else "device",
            strategy=strategy,
            budget_bytes=self.budget,
            swapped_bytes=swapped,
            recomputed_bytes=recomputed,
            workload_name=w.name,
        )

    # --- searches ---------------------------------------------------------------

    def best_tier(self, codes: Sequence[Code]) -> Candidate:
        """The better of the slots on the device and on the host for ``codes``."""
        codes = tuple(codes)
        return self.best([(codes, host) for host in self.tiers])

    def prefix(self, order: Sequence[tuple[int, Code]], host: bool) -> Candidate:
        """Applies the changes of ``order`` in turn; the shortest prefix that fits.

        Assumes that a longer prefix never raises the peak, as the greedy
        selections of vDNN and AutoSwap do; the full list is returned when even
        it does not fit. A prefix that removes fewer bytes than the peak is over
        the budget cannot fit, so the search starts where the removed bytes do.
        """
        if not order:
            return self.keep_all, host
        keep_all = self.keep_all

        def step(k: int) -> tuple[Code, ...]:  # the first k + 1 changes applied
            codes = list(keep_all)
            for i, code in order[: k + 1]:
                codes[i] = code
            return tuple(codes)

        if not self.fits(step(len(order) - 1), host):
            return step(len(order) - 1), host
        need = self.baseline.peak_bytes - self.budget
        if host:
            need -= self.workload.optimizer_bytes
        lo, removed = -1, 0  # steps[lo] (keep-all for -1) does not fit
        saved = self.engine.saved
        for k, (i, _) in enumerate(order):
            removed += saved[i]
            if removed >= need:
                break
            lo = k
        hi = len(order) - 1  # steps[hi] fits
        if lo == -1 and self.fits(self.keep_all, host):
            return self.keep_all, host
        # gallop up from lo, then bisect
        jump = 1
        while lo + jump < hi:
            if self.fits(step(lo + jump), host):
                hi = lo + jump
                break
            lo += jump
            jump *= 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.fits(step(mid), host):
                hi = mid
            else:
                lo = mid
        return step(hi), host

    def improve(
        self, start: Candidate, menus: Sequence[Sequence[Code]], work: int, pairs: bool = True
    ) -> Candidate:
        """Local search from ``start``: single-block changes, the slots' tier, then pairs.

        Blocks are visited round-robin; any change that makes the candidate
        better (see :meth:`better`) is taken. When no single change helps, one
        evicted block is kept again while a kept one is evicted (see
        :meth:`_pair_move`). Stops at a local optimum or when ``work``
        block-simulations are spent.
        """
        limit = self.engine.work + work
        current, n = start, self.n
        position, unchanged = 0, 0
        while self.engine.work < limit:
            codes, host = current
            found = None
            if unchanged == 0:
                for other in self.tiers:
                    if other != host and self.better((codes, other), current, "peak"):
                        found = (codes, other)
            if found is None and unchanged < n:
                i = position
                for code in menus[i]:
                    if code != codes[i]:
                        trial = (codes[:i] + (code,) + codes[i + 1 :], host)
                        if self.better(trial, current, "peak"):
                            found = trial
                            break
                position = (position + 1) % n
                if found is None:
                    unchanged += 1
                    continue
            if found is None and pairs:
                found = self._pair_move(current, menus, limit)
            if found is None:
                break
            current, unchanged = found, 0
        return current

    def search(self, start: Candidate, menus: Sequence[Sequence[Code]], work: int) -> Candidate:
        """Iterated local search: :meth:`improve`, then kicks from the best found.

        A kick gives two or three blocks random actions of their menus (from a
        fixed seed, so the search is deterministic); the kicked plan is
        improved again and kept if it beats the best. Stops when ``work``
        block-simulations are spent.
        """
        limit = self.engine.work + work
        rng = random.Random(0)
        best = self.improve(start, menus, work)
        idle = 0
        while self.engine.work < limit and idle < PATIENCE:
            idle += 1
            codes = list(best[0])
            for i in rng.sample(range(self.n), min(self.n, rng.choice((2, 3)))):
                codes[i] = rng.choice(menus[i])
            host = best[1] if rng.random() < 0.8 else rng.choice(self.tiers)
            found = self.improve((tuple(codes), host), menus, limit - self.engine.work)
            if self.better(found, best, "peak"):
                best, idle = found, 0
        return self.tidy(best, min(work // 4, max(limit - self.engine.work, 0) + work // 4))

    def tidy(self, candidate: Candidate, work: int) -> Candidate:
        """Keeps evicted blocks again, biggest first, where that costs no time.

        The local search moves along plateaus of equal time towards lower
        peaks; this takes back the evictions that bought nothing but headroom.
        """
        limit = self.engine.work + work
        current = candidate
        saved = self.engine.saved
        for i in sorted(range(self.n), key=lambda i: (-saved[i], i)):
            if self.engine.work >= limit:
                break
            codes, host = current
            if codes[i][0] != KEEP:
                trial = (codes[:i] + ((KEEP, 1),) + codes[i + 1 :], host)
                if self.better(trial, current):
                    current = trial
        return current

    def _pair_move(self, current: Candidate, menus, limit: int) -> Candidate | None:
        """Keeps one evicted block again while evicting a kept one instead.

        Only pairs that can work are simulated: keeping block ``i`` must make
        the plan faster, and block ``j``'s eviction must be able to remove the
        bytes by which keeping ``i`` overshoots the budget.
        """
        codes, host = current
        now = self.cost(codes, host)[0]
        saved, inp = self.engine.saved, self.engine.inp
        undo = []
        for i in range(self.n):
            if codes[i][0] != KEEP:
                trial = codes[:i] + ((KEEP, 1),) + codes[i + 1 :]
                t, peak = self.cost(trial, host)
                if t < now:
                    undo.append((t, i, trial, peak - self.budget))
        undo.sort()
        for _, _i, trial, over in undo:
            for j in range(self.n):
                if trial[j][0] != KEEP:
                    continue
                for code in menus[j]:
                    can = saved[j] - inp[j] if code[0] == RECOMPUTE else saved[j]
                    if code[0] == KEEP or can < over:
                        continue
                    if self.engine.work >= limit:
                        return None
                    pair = (trial[:j] + (code,) + trial[j + 1 :], host)
                    if self.better(pair, current, "peak"):
                        return pair
        return None

    def menus(self, prefetches: Sequence[int] = (0, 1, 2)) -> list[list[Code]]:
        """Every block's allowed codes: keep first, then swaps and recomputes."""
        out = []
        for i in range(self.n):
            menu: list[Code] = [(KEEP, 1)]
            if self.swappable[i]:
                menu += [(SWAP, p) for p in prefetches]
            if self.recomputable[i]:
                menu.append((RECOMPUTE, 1))
                menu += [(RECOMPUTE_HOST, p) for p in prefetches if p <= 1]
            out.append(menu)
        return out
