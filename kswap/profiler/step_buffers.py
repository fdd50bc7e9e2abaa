"""A profiled step's device buffers counted to its blocks: saved bytes and working sets.

:func:`block_buffers` sorts one profiled step's buffers by block, with the
step's times ``t_b`` (when the blocks' last forward op ends, the backward's
start) and ``t_e`` (when its last backward op ends):

- a forward-phase buffer alive at ``t_b`` is saved for the backward: it
  counts once, for the block whose backward frees it (the layer of the last
  backward op to end before it is freed, its last reader), or for the layer
  that made it where it outlives the backward; of no block, it is
  ``unowned``. An offloaded trace's host copies alive at ``t_b`` are saved
  bytes of their layer;
- another forward-phase buffer is in the forward working set of the block
  that made it and of the one whose forward op last read it;
- a backward- or update-phase buffer freed by ``t_e`` is in the backward
  working set of the block that made it (an update's has none) and of the
  one whose backward op ended last before it was freed;
- a backward-phase buffer that outlives the backward is a gradient the
  update reads: ``held`` by its block, or ``stray``.

An op's temporary is freed by the op itself: it counts for its own block
only. :mod:`kswap.profiler.working_sets` takes the working sets' peaks.

Example:
    >>> from kswap.trace import Allocation, OpInterval, Trace
    >>> from kswap.profiler.step_buffers import block_buffers
    >>> backward = [OpInterval("gradient_tape/m/a/MatMul", "MatMul", 20, 30, layer="a",
    ...                        phase="backward")]
    >>> trace = Trace(buffers=(
    ...     Allocation(512, 0, 30, layer="a", step=0, phase="forward"),   # read by a's backward
    ...     Allocation(256, 20, 40, layer="a", step=0, phase="backward",  # a's weight gradient
    ...                alive_at_end=True)), steps=((0, 50),))
    >>> found = block_buffers(trace, 0, backward, backward, {"a": 0}, 1, t_b=10, t_e=30)
    >>> found.saved, found.held
    ([512], [256])
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence

from kswap.trace import Allocation, OpInterval, Trace

__all__ = ["BlockBuffers", "block_buffers"]


@dataclasses.dataclass(frozen=True)
class BlockBuffers:
    """A profiled step's device buffers by block (lists by the block's index).

    Attributes:
        saved: The bytes each block's backward reads (saved at ``t_b``).
        unowned: Saved bytes of no block (the loss's).
        forward_sets: Each block's forward working set (the buffers).
        backward_sets: Each block's backward working set (freed by ``t_e``).
        held: Each block's backward buffers still alive at ``t_e``.
        stray: Those of no block.
    """

    saved: list[int]
    unowned: int
    forward_sets: list[list[Allocation]]
    backward_sets: list[list[Allocation]]
    held: list[int]
    stray: int


class _LastReader:
    """The block of the last op (of ``ops``) to end at or before a time: a buffer's last reader."""

    def __init__(self, ops: Sequence[OpInterval], index: Mapping[str, int]):
        ends = sorted(
            ((o.end_ns, index.get(o.layer) if o.layer else None) for o in ops),
            key=lambda e: e[0],
        )
        self.times = [e for e, _ in ends]
        self.blocks = [k for _, k in ends]

    def __call__(self, time_ns: int) -> int | None:
        j = bisect.bisect_right(self.times, time_ns) - 1
        return self.blocks[j] if j >= 0 else None


def _add(sets: list[list[Allocation]], b: Allocation, own: int | None, reader: int | None):
    """Counts ``b`` in the working set of the block that made it and of the one that freed it.

    An op's temporary is freed by the op itself: it counts for its own block
    only (the last op to end before it is freed may be another block's).
    """
    if b.region_type == "temp" and own is not None:
        reader = None
    for k in {own, reader} - {None}:
        sets[k].append(b)


def block_buffers(
    trace: Trace,
    step: int,
    ops: Sequence[OpInterval],
    backward: Sequence[OpInterval],
    index: Mapping[str, int],
    count: int,
    t_b: int,
    t_e: int,
) -> BlockBuffers:
    """Step ``step``'s buffers of ``trace`` by block (see the module's docstring).

    Args:
        trace: The profiled trace.
        step: Which of its steps.
        ops: The step's ops.
        backward: The step's backward ops from ``t_b`` on.
        index: Each block's index, by its trace layer name.
        count: How many blocks there are.
        t_b: When the backward starts.
        t_e: When it ends.
    """
    device = [b for b in trace.buffers if b.tier == "device" and b.step == step]
    forward = [o for o in ops if o.phase == "forward" and o.layer in index]
    last_reader = _LastReader(backward, index)
    saved = [0] * count
    unowned = 0
    sets: dict[str, list[list[Allocation]]] = {
        "forward": [[] for _ in range(count)],
        "backward": [[] for _ in range(count)],
    }
    forward_reader = _LastReader(forward, index)
    held = [0] * count  # each block's backward buffers alive when the backward ends
    stray = 0  # those of no block
    for b in device:
        if b.phase == "forward":
            own = index.get(b.layer) if b.layer else None
            if b.start_ns < t_b and (b.alive_at_end or b.end_ns > t_b):
                owner = own
                if not b.alive_at_end and b.end_ns <= t_e:
                    reader = last_reader(b.end_ns)
                    owner = reader if reader is not None else own
                if owner is None:
                    unowned += b.size
                else:
                    saved[owner] += b.size
                continue
            _add(sets["forward"], b, own, forward_reader(b.end_ns))
        elif b.phase in ("backward", "update") and not b.alive_at_end and b.end_ns <= t_e:
            # an update's buffer has no block: the one running when it is freed
            own = index.get(b.layer) if b.layer and b.phase == "backward" else None
            _add(sets["backward"], b, own, last_reader(b.end_ns))
        elif b.phase == "backward":  # outlives the backward: a gradient the update reads
            if b.layer in index:
                held[index[b.layer]] += b.size
            else:
                stray += b.size
    for b in trace.tier("host"):  # an offloaded trace: the layers' host copies
        if b.phase == "transfer" and b.start_ns < t_b < b.end_ns and b.layer in index:
            saved[index[b.layer]] += b.size
    return BlockBuffers(saved, unowned, sets["forward"], sets["backward"], held, stray)
