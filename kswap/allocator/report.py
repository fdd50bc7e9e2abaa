"""Packing a profiled step with every algorithm, against TensorFlow's BFC allocator.

Example:
    >>> from kswap.allocator.report import compare
    >>> from kswap.trace import Allocation, Trace
    >>> trace = Trace(buffers=(Allocation(size=1024, start_ns=0, end_ns=5),
    ...                        Allocation(size=512, start_ns=3, end_ns=9)),
    ...               steps=((0, 10),), duration_ns=10)
    >>> c = compare(trace, ["greedy_size", "best"])
    >>> c.lower_bound_bytes, [r.arena_bytes for r in c.rows], c.bfc_peak_bytes
    (1536, [1536, 1536], 1536)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from kswap.allocator.packing import ALGORITHMS, PackingPlan, pack

__all__ = ["AlgorithmResult", "PackingComparison", "compare", "DEFAULT_ALGORITHMS"]

DEFAULT_ALGORITHMS = ("greedy_size", "first_fit", "multi_order", "local_search", "best")


@dataclasses.dataclass(frozen=True)
class AlgorithmResult:
    """One algorithm's plan for the step and the time it took."""

    algorithm: str
    arena_bytes: int
    seconds: float
    plan: PackingPlan = dataclasses.field(repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class PackingComparison:
    """A step's lower bound, each algorithm's arena and the BFC allocator's peak.

    Attributes:
        buffers: Device buffers packed (the last profiled step's).
        lower_bound_bytes: Most requested bytes (aligned) alive at once: no
            packing can use less.
        rows: One result per algorithm, in the order asked.
        bfc_peak_bytes: Peak bytes in use of TensorFlow's allocator in the same
            step (its blocks, rounded up).
        emulated: Device memory emulated on the CPU.
    """

    buffers: int
    lower_bound_bytes: int
    rows: tuple[AlgorithmResult, ...]
    bfc_peak_bytes: int
    emulated: bool

    @property
    def best(self) -> AlgorithmResult:
        return min(self.rows, key=lambda r: r.arena_bytes)


def compare(trace, algorithms: Sequence[str] = DEFAULT_ALGORITHMS) -> PackingComparison:
    """Packs the trace's last step with each algorithm (see :func:`pack`)."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(
            f"`algorithms` must be among {sorted(ALGORITHMS)}. Received: {list(algorithms)}"
        )
    rows = []
    plan = None
    for name in algorithms:
        t0 = time.perf_counter()
        plan = pack(trace, algorithm=name)
        rows.append(AlgorithmResult(name, plan.arena_bytes, time.perf_counter() - t0, plan))
    if plan is None:
        plan = pack(trace, algorithm="first_fit")
    step = len(trace.steps) - 1 if trace.steps else None
    return PackingComparison(
        buffers=len(plan.buffers),
        lower_bound_bytes=plan.lower_bound_bytes,
        rows=tuple(rows),
        bfc_peak_bytes=trace.peak_bytes("device", step=step),
        emulated=bool(getattr(trace, "emulated", False)),
    )


def format_comparison(c: PackingComparison) -> str:
    """The comparison as an aligned text table."""
    mib = 1024 * 1024
    label = " (emulated on CPU:0)" if c.emulated else ""
    lb = max(c.lower_bound_bytes, 1)
    lines = [
        f"device buffers of the last profiled step: {c.buffers}{label}",
        f"{'lower bound':<22}{c.lower_bound_bytes / mib:>12,.2f} MiB"
        "  (most requested bytes alive at once)",
    ]
    for r in c.rows:
        lines.append(
            f"{r.algorithm:<22}{r.arena_bytes / mib:>12,.2f} MiB  {r.arena_bytes / lb:6.4f}x"
            f"  {r.seconds:7.3f} s"
        )
    lines.append(
        f"{'BFC peak in use':<22}{c.bfc_peak_bytes / mib:>12,.2f} MiB  "
        f"{c.bfc_peak_bytes / lb:6.4f}x  (TensorFlow's allocator, same step: "
        f"+{(c.bfc_peak_bytes - c.lower_bound_bytes) / mib:,.2f} MiB over the bound)"
    )
    return "\n".join(lines)
