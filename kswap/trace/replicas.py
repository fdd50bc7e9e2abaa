"""Replicas in a trace: which one each buffer and op belongs to, and one replica's trace.

Under ``tf.distribute.MirroredStrategy`` every replica runs the same step on
its own device, so a memory budget is a budget per device. A profiled step
holds all the replicas' buffers:

- On GPUs each replica has its own allocator (``GPU_0_bfc``,
  ``GPU_1_bfc``...), which names the device a buffer lives on, its
  weights included.
- On a CPU, logical devices share one allocator. There the op says it:
  replica ``N > 0`` runs its ops under the name scope ``replica_N/`` (its
  gradients under ``gradient_tape/replica_N/``). What no replica scope names
  counts to replica 0: the first replica's ops, and what is shared or was
  allocated before profiling (every replica's weights, the input pipeline).
  Replica 0's figure is then the high one.

Plain Python, free of any framework.

Example:
    >>> from kswap.trace import Allocation, Trace
    >>> from kswap.trace.replicas import replica_peaks, replica_trace
    >>> trace = Trace(buffers=(
    ...     Allocation(size=100, start_ns=0, end_ns=10, op="model/dense/MatMul"),
    ...     Allocation(size=100, start_ns=0, end_ns=10, op="replica_1/model/dense/MatMul"),
    ... ), duration_ns=10)
    >>> trace.peak_bytes(), replica_peaks(trace)
    (200, {0: 100, 1: 100})
    >>> replica_trace(trace, 1).buffers[0].op
    'replica_1/model/dense/MatMul'
"""

from __future__ import annotations

import dataclasses
import re

from kswap.trace.model import Allocation, OpInterval, Trace

__all__ = [
    "busiest_replica",
    "first_replica_name",
    "replica_of",
    "replica_peaks",
    "replica_trace",
    "replicas",
]

# MirroredStrategy's name scope of replica N > 0, anywhere in the op's name
_SCOPE = re.compile(r"(^|/)replica_(\d+)/")
# a GPU's own allocator: the device (and so the replica) a buffer lives on
_GPU_ALLOCATOR = re.compile(r"^GPU_(\d+)_bfc$")


def replica_of(item: Allocation | OpInterval) -> int:
    """The replica a buffer or op belongs to (0 where nothing names another).

    Example:
        >>> from kswap.trace import Allocation
        >>> replica_of(Allocation(8, 0, 1, op="gradient_tape/replica_2/d/MatMul"))
        2
        >>> replica_of(Allocation(8, 0, 1, allocator="GPU_1_bfc"))
        1
    """
    allocator = getattr(item, "allocator", None)
    if allocator:
        match = _GPU_ALLOCATOR.match(allocator)
        if match:
            return int(match.group(1))
    match = _SCOPE.search(item.op or "")
    return int(match.group(2)) if match else 0


def first_replica_name(op: str) -> str:
    """``op`` as the first replica names it: every ``replica_N/`` scope removed.

    Example:
        >>> first_replica_name("gradient_tape/replica_1/model/d/MatMul")
        'gradient_tape/model/d/MatMul'
    """
    return _SCOPE.sub(r"\1", op)


def replicas(trace: Trace) -> tuple[int, ...]:
    """The replicas the trace's device buffers belong to, in order (``(0,)`` for one)."""
    found = {replica_of(b) for b in trace.buffers if b.tier == "device"}
    return tuple(sorted(found)) or (0,)


def replica_trace(trace: Trace, index: int) -> Trace:
    """The trace with only replica ``index``'s buffers and ops (the whole trace for one)."""
    if replicas(trace) == (0,) and index == 0:
        return trace
    return dataclasses.replace(
        trace,
        buffers=tuple(b for b in trace.buffers if replica_of(b) == index),
        ops=tuple(o for o in trace.ops if replica_of(o) == index),
        metadata={**trace.metadata, "replica": index},
    )


def replica_peaks(trace: Trace, tier: str = "device", step: int | None = None) -> dict[int, int]:
    """Each replica's peak bytes in ``tier`` (of ``step``; of the whole trace if None)."""
    return {r: replica_trace(trace, r).peak_bytes(tier, step) for r in replicas(trace)}


def busiest_replica(trace: Trace, tier: str = "device") -> Trace:
    """The trace of the replica with the highest peak in ``tier`` (the trace itself for one).

    Its ``metadata`` holds ``"replica"`` (the index) and ``"replicas"`` (how
    many the trace held).

    Example:
        >>> from kswap.trace import Allocation, Trace
        >>> trace = Trace(buffers=(
        ...     Allocation(size=100, start_ns=0, end_ns=10, op="d/MatMul"),
        ...     Allocation(size=300, start_ns=0, end_ns=10, op="replica_1/d/MatMul"),
        ... ), duration_ns=10)
        >>> one = busiest_replica(trace)
        >>> one.peak_bytes(), one.metadata["replica"], one.metadata["replicas"]
        (300, 1, 2)
    """
    peaks = replica_peaks(trace, tier)
    if len(peaks) == 1:
        return trace
    index = max(peaks, key=lambda r: (peaks[r], -r))
    one = replica_trace(trace, index)
    return dataclasses.replace(one, metadata={**one.metadata, "replicas": len(peaks)})
