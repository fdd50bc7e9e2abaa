"""Drawing a packing plan (needs matplotlib, imported only when drawing).

Example:
    >>> from kswap.allocator import Buffer, pack, plot_packing
    >>> plan = pack([Buffer(1024, 0, 2), Buffer(512, 1, 3)])
    >>> plot_packing(plan, "plan.png")  # doctest: +SKIP
    'plan.png'
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kswap.allocator.packing import PackingPlan

__all__ = ["plot_packing"]

_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))
_TIME_UNITS = ((10**9, "s"), (10**6, "ms"), (10**3, "µs"), (1, "ns"))


def _unit(nbytes: int) -> tuple[int, str]:
    for scale, name in _UNITS:
        if nbytes >= 4 * scale:
            return scale, name
    return 1, "B"


def _time_axis(plan: PackingPlan) -> tuple[int, str]:
    """Divisor of the times and label of the time axis.

    A trace's times are nanoseconds (shown in ns, µs, ms or s, by the span);
    buffers given directly have times in no known unit.

    Example:
        >>> from kswap.allocator import Buffer, pack
        >>> _time_axis(pack([Buffer(1024, 0, 2)]))
        (1, 'time')
    """
    if plan.sources is None:
        return 1, "time"
    span = 0
    if plan.buffers:
        span = max(b.end for b in plan.buffers) - min(b.start for b in plan.buffers)
    for scale, name in _TIME_UNITS:
        if span >= 4 * scale:
            return scale, f"time ({name})"
    return 1, "time (ns)"


def plot_packing(
    plan: PackingPlan, path: str | os.PathLike, *, title: str | None = None
) -> str | os.PathLike:
    """Saves a PNG of ``plan``: one rectangle per buffer, time against address.

    Each buffer is drawn over ``[start, end)`` horizontally and
    ``[offset, offset + size)`` vertically; a dashed line marks the lower
    bound (the most bytes alive at one time) and a solid one the arena. The
    time axis of a trace's plan (times in nanoseconds) is labelled with its
    unit (ns, µs, ms or s, by the span); that of buffers given directly,
    whose times have no known unit, just "time".

    Args:
        plan: The plan to draw.
        path: Where to write the PNG.
        title: Title of the figure (default: algorithm, arena and bound).

    Returns:
        ``path``.

    Raises:
        ImportError: If matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import PolyCollection
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            "plot_packing needs matplotlib: install matplotlib (pip install kswap[plot])."
        ) from error

    scale, unit = _unit(max(plan.arena_bytes, plan.lower_bound_bytes, 1))
    per, time_label = _time_axis(plan)
    fig = Figure(figsize=(10, 6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    boxes = [
        (
            (b.start / per, o / scale),
            (b.end / per, o / scale),
            (b.end / per, (o + b.size) / scale),
            (b.start / per, (o + b.size) / scale),
        )
        for b, o in zip(plan.buffers, plan.offsets, strict=True)
    ]
    colors = [f"C{i % 10}" for i in range(len(boxes))]
    edge = "black" if len(boxes) <= 200 else "none"
    ax.add_collection(
        PolyCollection(boxes, facecolors=colors, edgecolors=edge, linewidths=0.3, alpha=0.8)
    )
    ax.axhline(
        plan.lower_bound_bytes / scale,
        color="black",
        linestyle="--",
        linewidth=1,
        label=f"lower bound {plan.lower_bound_bytes / scale:,.1f} {unit}",
    )
    ax.axhline(
        plan.arena_bytes / scale,
        color="red",
        linewidth=1,
        label=f"arena {plan.arena_bytes / scale:,.1f} {unit}",
    )
    if plan.buffers:
        t0 = min(b.start for b in plan.buffers)
        t1 = max(b.end for b in plan.buffers)
        ax.set_xlim(t0 / per, t1 / per)
    ax.set_ylim(0, max(plan.arena_bytes, plan.lower_bound_bytes, 1) / scale * 1.05)
    ax.set_xlabel(time_label)
    ax.set_ylabel(f"offset ({unit})")
    if title is None:
        title = (
            f"{plan.algorithm}: {len(plan.buffers)} buffers, "
            f"arena / lower bound = {plan.overhead:.4f}"
        )
    ax.set_title(title)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path
