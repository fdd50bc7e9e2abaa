"""The simulator's core: one training step over three streams, as fast as plain Python allows.

:class:`Engine` holds a workload and a link turned into lists of numbers, so
that the strategies can simulate thousands of candidate plans; the public,
documented face of it is :func:`kswap.planning.simulate` (the model and its
assumptions are described there). Actions are given as codes, one
``(kind, prefetch)`` pair per block: ``KEEP``, ``SWAP``, ``RECOMPUTE``
(inputs kept) or ``RECOMPUTE_HOST`` (inputs swapped).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import accumulate
from operator import itemgetter
from typing import NamedTuple

from kswap.planning.actions import Action
from kswap.planning.link import Link
from kswap.planning.workload import Workload

__all__ = ["Engine", "Run", "KEEP", "SWAP", "RECOMPUTE", "RECOMPUTE_HOST", "code_of", "action_of"]

KEEP, SWAP, RECOMPUTE, RECOMPUTE_HOST = 0, 1, 2, 3
_ACTIONS = {KEEP: "keep", SWAP: "swap", RECOMPUTE: "recompute", RECOMPUTE_HOST: "recompute"}

Code = tuple[int, int]
_delta = itemgetter(1)


def code_of(action: Action) -> Code:
    """The engine's ``(kind, prefetch)`` code of an action."""
    if action.kind == "keep":
        return (KEEP, 1)
    if action.kind == "swap":
        return (SWAP, action.prefetch)
    if action.checkpoint == "host":
        return (RECOMPUTE_HOST, action.prefetch)
    return (RECOMPUTE, 1)


def action_of(code: Code) -> Action:
    """The action of an engine code."""
    kind, prefetch = code
    if kind == RECOMPUTE_HOST:
        return Action("recompute", prefetch, "host")
    return Action(_ACTIONS[kind], prefetch)


class Run(NamedTuple):
    """What one simulation found; the lists are filled only with ``detail=True``."""

    step_seconds: float
    peak_bytes: int
    peak_time: float
    events: list  # (time, bytes delta), sorted
    intervals: list  # (stream, start, end, block index or -1, what)
    backward_start: list  # per block: when its backward (after any recompute) starts
    #: per event: whether the backward allocated the bytes it adds or frees (the
    #: others are the forward's; with ``detail`` only)
    backward: list


class Engine:
    """A workload and a link prepared for many simulations.

    Attributes:
        work: Block-simulations run so far (the strategies' work budgets count it).
    """

    def __init__(self, workload: Workload, link: Link):
        self.workload, self.link = workload, link
        blocks = workload.blocks
        self.n = n = len(blocks)
        self.fwd = [b.forward_seconds for b in blocks]
        self.bwd = [b.backward_seconds for b in blocks]
        self.rec = [b.recompute_seconds for b in blocks]
        self.saved = [b.saved_bytes for b in blocks]
        self.inp = [b.input_bytes for b in blocks]
        self.fb = [b.forward_bytes for b in blocks]
        self.bb = [b.backward_bytes for b in blocks]
        self.kbb = [b.keep_backward_bytes for b in blocks]
        index = {b.name: i for i, b in enumerate(blocks)}
        #: shared[i]: (reader j, bytes) of block i's saved tensors that j's backward reads too
        self.shared = [[(index[name], size) for name, size in b.shared if size] for b in blocks]
        #: incoming[j]: bytes j's backward reads that other blocks' saved bytes hold
        self.incoming = [0] * n
        for pairs in self.shared:
            for j, size in pairs:
                self.incoming[j] += size
        # a swapped block copies out and brings back all its backward reads
        self.fetched = [s + c for s, c in zip(self.saved, self.incoming, strict=True)]
        self.gb = [b.gradient_bytes for b in blocks]
        self.out_saved = [link.seconds(s, "d2h") for s in self.fetched]
        self.in_saved = [link.seconds(s, "h2d") for s in self.fetched]
        self.out_inp = [link.seconds(s, "d2h") for s in self.inp]
        self.in_inp = [link.seconds(s, "h2d") for s in self.inp]
        # the forward's times do not depend on the actions: copies never gate it
        self.fs, self.fe, t = [0.0] * n, [0.0] * n, 0.0
        for i in range(n):
            self.fs[i] = t
            t += self.fwd[i]
            self.fe[i] = t
        self.backward_begin = t
        #: backward_after[i]: backward compute of blocks i..n-1
        self.backward_after = [0.0] * (n + 1)
        for i in range(n - 1, -1, -1):
            self.backward_after[i] = self.backward_after[i + 1] + self.bwd[i]
        self.base = {
            False: workload.persistent_bytes("device"),
            True: workload.persistent_bytes("host"),
        }
        opt = workload.optimizer_bytes
        self.slots_in, self.slots_out = link.seconds(opt, "h2d"), link.seconds(opt, "d2h")
        self.work = 0
        # the forward's events that do not depend on the actions
        self._grow = [(self.fs[i], self.saved[i]) for i in range(n)]
        self._grow += [(self.fs[i], self.fb[i]) for i in range(n) if self.fb[i]]
        self._drop = [(self.fe[i], -self.fb[i]) for i in range(n) if self.fb[i]]
        self._drop_saved = [(self.fe[i], -self.saved[i]) for i in range(n)]
        self._grow_inp = [(self.fs[i], self.inp[i]) for i in range(n)]

    def run(self, codes: Sequence[Code], host_slots: bool = False, detail: bool = False) -> Run:
        """Simulates one step with one code per block and the slots' tier."""
        n = self.n
        self.work += n + 1
        saved, inp, fb, gb = self.saved, self.inp, self.fb, self.gb
        bbs = (self.kbb, self.bb)  # a kept block's backward runs as without kswap
        fetched, incoming = self.fetched, self.incoming
        fe, rec, bwd = self.fe, self.rec, self.bwd
        out_saved, out_inp, in_saved, in_inp = (
            self.out_saved,
            self.out_inp,
            self.in_saved,
            self.in_inp,
        )
        # events (time, bytes delta) in lists that are each in time order, so that
        # sorting their concatenation merges runs; the forward's are precomputed
        grow = list(self._grow)  # forward allocations of saved tensors and workspaces
        drop = list(self._drop)  # workspaces freed at forward ends
        out: list = []  # frees at copy-out ends
        spans: list = []
        d2h_free = 0.0
        d2h_end = [0.0] * n
        heap: list = []  # copies back whose trigger has fired: (ready time, -block)
        triggers: dict[int, list[int]] = {}
        held = [0] * n  # bytes a kept block holds for another's action: freed after its backward
        begin = self.backward_begin
        shared = self.shared
        for i in range(n):
            kind, prefetch = codes[i]
            if kind == KEEP:
                continue
            e = fe[i]
            drop_i = self._drop_saved[i]
            if kind == RECOMPUTE:
                drop.append(drop_i)
                grow.append(self._grow_inp[i])
                for j, size in shared[i]:
                    if codes[j][0] == KEEP:  # TensorFlow keeps it for j's backward
                        grow.append((e, size))
                        held[j] += size
                continue
            start = e if e > d2h_free else d2h_free
            if kind == SWAP:
                d2h_free = start + out_saved[i]
                out.append((d2h_free, -saved[i]))
                freed = d2h_free
            else:
                drop.append(drop_i)
                grow.append(self._grow_inp[i])
                d2h_free = start + out_inp[i]
                out.append((d2h_free, -inp[i]))
                freed = e
            for j, size in shared[i]:
                if codes[j][0] == KEEP:  # TensorFlow keeps it for j's backward
                    out.append((freed, size))
                    held[j] += size
            d2h_end[i] = d2h_free
            if detail and d2h_free > start:
                spans.append(("d2h", start, d2h_free, i, "swap out"))
            m = i + prefetch + 1  # the copy back waits for block m's backward to end
            if m >= n:
                heap.append((begin if begin > d2h_free else d2h_free, -i))
            elif m in triggers:
                triggers[m].append(i)
            else:
                triggers[m] = [i]
        if detail:
            spans += [("compute", self.fs[i], fe[i], i, "forward") for i in range(n)]

        # backward: blocks in reverse order; copies back in the order they are ready
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        h2d_free = compute = begin
        h2d_end = [-1.0] * n
        starts = [0.0] * n if detail else []
        back: list = []  # the backward compute's allocations and frees
        fetch: list = []  # allocations at copy-back starts
        back_f: list = []  # the backward's frees of what the forward allocated
        add, add_f = back.append, back_f.append
        for j in range(n - 1, -1, -1):
            kind = codes[j][0]
            bs = compute
            if kind == SWAP or kind == RECOMPUTE_HOST:
                while h2d_end[j] < 0:
                    ready, neg = pop(heap)
                    i = -neg
                    start = ready if ready > h2d_free else h2d_free
                    if codes[i][0] == SWAP:
                        h2d_free = start + in_saved[i]
                        fetch.append((start, fetched[i]))
                    else:
                        h2d_free = start + in_inp[i]
                        fetch.append((start, inp[i]))
                    h2d_end[i] = h2d_free
                    if detail and h2d_free > start:
                        spans.append(("h2d", start, h2d_free, i, "swap in"))
                if h2d_end[j] > bs:
                    bs = h2d_end[j]
            if kind >= RECOMPUTE:
                end = bs + rec[j]
                add((bs, saved[j]))
                if fb[j]:
                    add((bs, fb[j]))
                    add((end, -fb[j]))
                if detail:
                    spans.append(("compute", bs, end, j, "recompute"))
                bs = end
            be = bs + bwd[j]
            if gb[j]:  # its weights' gradients, kept until the update
                add((bs, gb[j]))
            work = bbs[kind != KEEP][j]
            if work:
                add((bs, work))
                add((be, -work))
            (add_f if kind == KEEP else add)((be, -saved[j]))  # swapped: the copy back
            if held[j]:
                add_f((be, -held[j]))
            if kind == SWAP and incoming[j]:
                add((be, -incoming[j]))
            if kind >= RECOMPUTE:  # its input: kept from forward, or copied back
                (add if kind == RECOMPUTE_HOST else add_f)((be, -inp[j]))
            if detail:
                starts[j] = bs
                spans.append(("compute", bs, be, j, "backward"))
            if j in triggers:
                for i in triggers[j]:
                    push(heap, (be if be > d2h_end[i] else d2h_end[i], -i))
            compute = be

        # the optimizer's update; slots in host memory stream in and out as it runs
        update = self.workload.update_seconds
        end = compute + update
        if detail and update > 0:
            spans.append(("compute", compute, end, -1, "update"))
        if host_slots and self.workload.optimizer_bytes:
            a = compute if compute > h2d_free else h2d_free
            b = compute if compute > d2h_free else d2h_free
            end = max(end, a + self.slots_in, b + self.slots_out)
            h2d_free, d2h_free = a + self.slots_in, end
            if detail:
                spans.append(("h2d", a, a + self.slots_in, -1, "optimizer slots in"))
                spans.append(("d2h", end - self.slots_out, end, -1, "optimizer slots out"))
        step = max(end, h2d_free, d2h_free)

        if detail:  # each event with the phase that allocated its bytes
            tagged = [(t, d, False) for t, d in grow + drop + out + back_f]
            tagged += [(t, d, True) for t, d in back + fetch]
            tagged.sort()
            events = [(t, d) for t, d, _ in tagged]
        else:
            events = grow + drop + out + back + back_f + fetch
            events.sort()
        live = list(accumulate(map(_delta, events), initial=self.base[host_slots]))
        peak = max(live)
        i = live.index(peak)
        peak_time = events[i - 1][0] if i else 0.0
        if detail:
            spans.sort(key=lambda s: (s[0], s[1]))
            return Run(step, peak, peak_time, events, spans, starts, [b for *_, b in tagged])
        return Run(step, peak, peak_time, [], [], [], [])
