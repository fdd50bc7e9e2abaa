"""The demo's chart: device memory over one training step of each run, on one axes.

Each run's line is its profiled step with the highest device peak, time as
a fraction of that step (the runs' steps last differently long), bytes as
the allocator counted them. AutoTune's budget is a dashed horizontal line.
The data drawn is written beside the picture as JSON (:func:`chart_data`).

Example:
    >>> from kswap.demo.chart import chart_data
    >>> run = {"emulated": True, "device": "CPU:0", "device_peak_bytes": 2**21,
    ...        "series": {"fraction": [0.0, 0.5, 1.0], "bytes": [2**20, 2**21, 2**21]}}
    >>> data = chart_data({"baseline": run}, budget_bytes=None)
    >>> data["series"]["baseline"]["peak_bytes"], data["emulated"]
    (2097152, True)
"""

from __future__ import annotations

import json
import os

__all__ = ["LABELS", "chart_data", "device_label", "draw_memory_chart"]

_MIB = 2**20
#: Each run's name in the legend and the tables.
LABELS = {
    "baseline": "baseline (plain model)",
    "offload": "OffloadingModel(model)",
    "autotune": "OffloadingModel(model) + AutoTune",
}
_COLORS = {"baseline": "#808080", "offload": "#1f77b4", "autotune": "#ff7f0e"}


def device_label(emulated: bool, device: str | None) -> str:
    """How device memory was measured: ``emulated on CPU:0`` or ``measured on GPU:0``."""
    return f"emulated on {device or 'CPU:0'}" if emulated else f"measured on {device or 'GPU:0'}"


def chart_data(results: dict[str, dict], budget_bytes: int | None) -> dict:
    """The series the chart draws, as JSON-ready data.

    Args:
        results: Each run's result, by run name (``series``: ``fraction``
            and ``bytes``; ``device_peak_bytes``, ``emulated``, ``device``).
        budget_bytes: AutoTune's budget, or None.

    Returns:
        ``{"emulated", "device", "budget_bytes", "series": {run: {"label",
        "peak_bytes", "fraction", "bytes"}}}``.
    """
    first = next(iter(results.values()))
    return {
        "title": "device memory over one training step",
        "emulated": any(r["emulated"] for r in results.values()),
        "device": first.get("device"),
        "budget_bytes": budget_bytes,
        "series": {
            name: {
                "label": LABELS.get(name, name),
                "peak_bytes": max(r["series"]["bytes"]),
                "fraction": r["series"]["fraction"],
                "bytes": r["series"]["bytes"],
            }
            for name, r in results.items()
        },
    }


def draw_memory_chart(data: dict, path: str | os.PathLike, *, subtitle: str = "") -> str:
    """Draws :func:`chart_data`'s series as a PNG at ``path`` and writes them beside it as JSON.

    Args:
        data: What :func:`chart_data` returns.
        path: The PNG's path; the JSON goes to the same path ending ``.json``.
        subtitle: A second title line (the model, input and batch).

    Returns:
        The PNG's path.

    Raises:
        ImportError: matplotlib is not installed.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 5.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, s in data["series"].items():
        ax.step(
            s["fraction"],
            [b / _MIB for b in s["bytes"]],
            where="post",
            color=_COLORS.get(name),
            linewidth=1.4,
            label=f"{s['label']}: peak {s['peak_bytes'] / _MIB:,.0f} MiB",
        )
    if data.get("budget_bytes"):
        ax.axhline(
            data["budget_bytes"] / _MIB,
            color="#d62728",
            linestyle="--",
            linewidth=1.2,
            label=f"AutoTune's budget {data['budget_bytes'] / _MIB:,.0f} MiB",
        )
    label = device_label(data["emulated"], data.get("device"))
    title = f"{data['title']} ({label})"
    ax.set_title(f"{title}\n{subtitle}" if subtitle else title, fontsize="medium")
    ax.set_xlabel("time in the step (fraction of the step: forward, then backward and update)")
    ax.set_ylabel("device MiB in use")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")
    with open(os.path.splitext(os.fspath(path))[0] + ".json", "w") as f:
        json.dump(data, f)
    return os.fspath(path)
