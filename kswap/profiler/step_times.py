"""A profiled step's wall time shared out among its ops, and among the blocks.

The step's time is shared out among its ops (:func:`step_seconds_by_op`):
each op gets its share of the time it ran (ops running together split it
equally, :func:`kswap.trace.optime.op_shares`) and the idle time before it
(the executor dispatching it; the step's first op also gets the time before
it, its last the time after it), so the times add up to the step's length.
:func:`block_times` adds them up by block and phase: an op of no block (the
input pipeline, the loss, a Keras operation between layers) counts for the
block whose op of the same phase started last before it (the first one, if
none did); the optimizer's ops (phase ``update``) and the transfer ops (an
offloaded trace's copies) are in no block.

Example:
    >>> from kswap.trace import OpInterval
    >>> from kswap.profiler.step_times import block_times
    >>> ops = [OpInterval("m/a/MatMul", "MatMul", 0, 10, layer="a", phase="forward"),
    ...        OpInterval("m/loss/Sub", "Sub", 10, 20, phase="forward"),
    ...        OpInterval("gradient_tape/m/a/MatMul", "MatMul", 20, 40, layer="a",
    ...                   phase="backward"),
    ...        OpInterval("adam/Mul", "Mul", 40, 50, phase="update")]
    >>> times = block_times(ops, {"a": 0}, 1, t_b=10, start_ns=0, end_ns=50)
    >>> [round(t * 1e9) for t in times.forward + times.backward], round(times.update * 1e9)
    ([20, 20], 10)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kswap.trace import OpInterval
from kswap.trace.optime import op_shares

__all__ = ["BlockTimes", "block_times", "step_seconds_by_op"]


def step_seconds_by_op(ops: Sequence[OpInterval], start_ns: int, end_ns: int) -> list[float]:
    """The step's wall time ``[start_ns, end_ns)`` shared out among ``ops`` (seconds each).

    Each op gets its share of the time it ran and the idle time before it;
    the first op also the time before it, the last the time after it.

    Example:
        >>> ops = [OpInterval("a", "A", 10, 20), OpInterval("b", "B", 30, 40)]
        >>> [round(t * 1e9) for t in step_seconds_by_op(ops, 0, 50)]
        [20, 30]
    """
    if not ops:
        return []
    order = sorted(range(len(ops)), key=lambda i: ops[i].start_ns)
    times = op_shares(ops)
    covered = start_ns
    for i in order:
        o = ops[i]
        if o.start_ns > covered:
            times[i] += o.start_ns - covered
        covered = max(covered, o.end_ns)
    if end_ns > covered:
        times[order[-1]] += end_ns - covered
    return [t / 1e9 for t in times]


@dataclasses.dataclass(frozen=True)
class BlockTimes:
    """A profiled step's time by block, in seconds, and each block's ops by phase.

    Attributes:
        forward: Each block's forward time (by its index).
        backward: Each block's backward time.
        update: The optimizer's ops' time, wherever they ran.
        transfer: The transfer ops' time (an offloaded trace's copies).
        ops: The ops of block ``k``: under ``"forward:k"`` its forward ops,
            under ``"backward:k"`` its backward ops from ``t_b`` on, under
            ``"backward+:k"`` the backward ops of no block from ``t_b`` on
            that counted for it (ops its gradient made).
    """

    forward: list[float]
    backward: list[float]
    update: float
    transfer: float
    ops: dict[str, list[OpInterval]]


def block_times(
    ops: Sequence[OpInterval],
    index: Mapping[str, int],
    count: int,
    t_b: int,
    start_ns: int,
    end_ns: int,
) -> BlockTimes:
    """The step ``[start_ns, end_ns)``'s time shared out among its ``count`` blocks.

    Args:
        ops: The step's ops.
        index: Each block's index, by its trace layer name.
        count: How many blocks there are.
        t_b: When the backward starts: a block's backward op that starts
            before it (a shape computation the executor runs during the
            forward) counts for the block's time, not for its ops.
        start_ns: The step's start.
        end_ns: The step's end.
    """
    seconds = step_seconds_by_op(ops, start_ns, end_ns)
    fwd, bwd = [0.0] * count, [0.0] * count
    update = transfer = 0.0
    last: dict[str, int | None] = {"forward": None, "backward": None}
    pending = {"forward": 0.0, "backward": 0.0}
    by_phase: dict[str, list[OpInterval]] = {}
    for i in sorted(range(len(ops)), key=lambda i: ops[i].start_ns):
        o, t = ops[i], seconds[i]
        if o.phase == "update":
            update += t
            continue
        if o.phase == "transfer":
            transfer += t
            continue
        phase = "backward" if o.phase == "backward" else "forward"
        k = index.get(o.layer) if o.layer else None
        if k is not None:
            if phase == "forward" or o.start_ns >= t_b:
                by_phase.setdefault(f"{phase}:{k}", []).append(o)
                last[phase] = k
        elif last[phase] is not None:
            k = last[phase]
            if phase == "backward" and o.start_ns >= t_b:  # an op the block's gradient made
                by_phase.setdefault(f"backward+:{k}", []).append(o)
        if k is None:
            pending[phase] += t
            continue
        target = fwd if phase == "forward" else bwd
        if pending[phase]:
            target[k] += pending[phase]
            pending[phase] = 0.0
        target[k] += t
    if count:
        fwd[0] += pending["forward"]
        bwd[-1] += pending["backward"]
    return BlockTimes(fwd, bwd, update, transfer, by_phase)
