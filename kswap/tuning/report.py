"""AutoTune's TensorBoard report: its rounds as scalars, the plan as text, device memory as images.

With ``kswap.AutoTune(logdir=D)``, each round is written with ``tf.summary``
under ``D/kswap`` (the run ``kswap`` in TensorBoard), the round's number
(1, 2...) as the summary step:

- when a plan is applied (:func:`write_plan`): the scalars in
  :data:`PLAN_SCALARS` (MiB and ms) and the plan as a markdown table (text
  ``plan``);
- when the step after it is measured (:func:`write_measurement`): the scalars
  in :data:`MEASURED_SCALARS` and one image, ``device_memory``, of the device
  bytes over one step (:func:`memory_chart`): before (the first profiled
  step, the model's own actions), as the simulator predicts the plan, and as
  measured under it, with the budget as a horizontal line.

The profiler's traces AutoTune takes are in ``D/plugins/profile``, for the
Profile plugin (``memory_profile``). The chart uses matplotlib where it is
installed (``pip install kswap[plot]``); without it, the same lines drawn with
numpy, without text. Device memory on a machine without a GPU is emulated.

Example:
    >>> from kswap.planning import Block, Plan, Workload
    >>> from kswap.trace import Allocation, Trace
    >>> w = Workload((Block("a", 2**20, 1e-3, 2e-3), Block("b", 2**20, 1e-3, 2e-3)))
    >>> plan = Plan.evaluate(w, ["swap", "keep"], "pcie4", budget_bytes=2**20)
    >>> print(plan_markdown(plan, w).splitlines()[-1])
    | `b` | other | 1.00 | keep |
    >>> step = Trace(buffers=(Allocation(2**21, 0, 5_000_000),), steps=((0, 6_000_000),))
    >>> memory_chart(plan, w, 2**20, step).shape
    (400, 800, 3)
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from kswap.planning import Plan, Workload, simulate
from kswap.planning.budget import format_bytes
from kswap.trace import Trace

__all__ = [
    "MEASURED_SCALARS",
    "PLAN_SCALARS",
    "SUBDIR",
    "memory_chart",
    "plan_markdown",
    "write_measurement",
    "write_plan",
]

#: The subdirectory of the logdir the summaries go to (TensorBoard's run name).
SUBDIR = "kswap"
#: Scalars written when a plan is applied.
PLAN_SCALARS = (
    "baseline_peak_mib",
    "budget_mib",
    "target_mib",
    "predicted_peak_mib",
    "swapped_mib",
    "recomputed_mib",
    "predicted_step_ms",
)
#: Scalars written when the step under the plan is measured.
MEASURED_SCALARS = ("measured_peak_mib", "measured_step_ms")

_MIB = 2**20
# before (gray), predicted (blue), measured (orange), budget (red)
_COLORS = ((128, 128, 128), (31, 119, 180), (255, 127, 14), (214, 39, 40))


def plan_markdown(plan: Plan, workload: Workload) -> str:
    """The plan as markdown: one line of totals, then a table of its blocks.

    Args:
        plan: The plan.
        workload: The workload it was made for (the blocks' kinds and bytes).

    Returns:
        Markdown text, one row per block (name, kind, saved MiB, action).
    """
    counts = ", ".join(f"{n} {kind}" for kind, n in plan.counts().items())
    lines = [
        f"**{plan.strategy}** plan for {format_bytes(plan.budget_bytes or 0)}: {counts}; "
        f"optimizer state on the {plan.optimizer_state}; predicted peak "
        f"{format_bytes(plan.predicted_peak_bytes)} (baseline "
        f"{format_bytes(plan.baseline_peak_bytes)}), step x{plan.slowdown:.2f}",
        "",
        "| block | kind | saved MiB | action |",
        "| --- | --- | ---: | --- |",
    ]
    for block, action in zip(workload.blocks, plan.actions, strict=True):
        name = block.name.replace("`", "'").replace("|", "\\|")
        lines.append(f"| `{name}` | {block.kind} | {block.saved_bytes / _MIB:.2f} | {action} |")
    return "\n".join(lines)


def write_plan(
    logdir: str | os.PathLike, number: int, plan: Plan, workload: Workload, budget_bytes: int
) -> str:
    """Writes a round's plan: the :data:`PLAN_SCALARS` and the text ``plan``.

    Args:
        logdir: AutoTune's logdir; the summaries go to its :data:`SUBDIR`.
        number: The round's number (1 for the first plan): the summary step.
        plan: The plan applied.
        workload: The workload it was made for.
        budget_bytes: The user's budget (the plan's own, ``target_mib``, may
            be lower after a round over it).

    Returns:
        The directory written to.
    """
    by_action = {"swap": 0, "recompute": 0}
    for block, action in zip(workload.blocks, plan.actions, strict=True):
        if action.kind in by_action:
            by_action[action.kind] += block.saved_bytes
    values = {
        "baseline_peak_mib": plan.baseline_peak_bytes / _MIB,
        "budget_mib": budget_bytes / _MIB,
        "target_mib": (plan.budget_bytes or budget_bytes) / _MIB,
        "predicted_peak_mib": plan.predicted_peak_bytes / _MIB,
        "swapped_mib": by_action["swap"] / _MIB,
        "recomputed_mib": by_action["recompute"] / _MIB,
        "predicted_step_ms": plan.predicted_step_seconds * 1e3,
    }
    return _write(logdir, number, values, text=plan_markdown(plan, workload))


def write_measurement(
    logdir: str | os.PathLike,
    number: int,
    plan: Plan,
    workload: Workload,
    budget_bytes: int,
    before: Trace,
    after: Trace,
) -> str:
    """Writes a round's measurement: the :data:`MEASURED_SCALARS` and the image ``device_memory``.

    Args:
        logdir: AutoTune's logdir; the summaries go to its :data:`SUBDIR`.
        number: The round's number: the summary step.
        plan: The plan the step ran under.
        workload: The workload it was made for (simulated on ``plan.link``).
        budget_bytes: The user's budget, drawn as a line.
        before: The first profiled trace (the model's own actions).
        after: The trace of the step under the plan.

    Returns:
        The directory written to.
    """
    values = {"measured_peak_mib": after.peak_bytes("device") / _MIB}
    if after.steps:
        lo, hi = after.steps[-1]
        values["measured_step_ms"] = (hi - lo) / 1e6
    title = _title(number, before, after)
    image = memory_chart(plan, workload, budget_bytes, before, after, title=title)
    return _write(logdir, number, values, image=(image, title))


def _title(number: int, *traces: Trace) -> str:
    """The chart's title and the image's description, saying whether the device was emulated."""
    emulated = " (emulated on CPU)" if any(t is not None and t.emulated for t in traces) else ""
    return f"round {number}: device memory over one step{emulated}"


def memory_chart(
    plan: Plan,
    workload: Workload,
    budget_bytes: int,
    before: Trace,
    after: Trace | None = None,
    *,
    title: str = "device memory over one step",
) -> np.ndarray:
    """Device bytes over one step (the last of each trace) before, predicted and after.

    Args:
        plan: The plan (its prediction: :func:`kswap.planning.simulate`).
        workload: The workload it was made for.
        budget_bytes: Drawn as a horizontal line.
        before: The trace of the step before the plan.
        after: The trace of the step under it, if measured.
        title: The chart's title (not drawn without matplotlib).

    Returns:
        An RGB image, ``uint8`` of shape ``(400, 800, 3)``.
    """
    sim = simulate(workload, plan, plan.link)
    series = [_measured("before: own actions, measured", before)]
    times = np.array((0.0, *sim.times, sim.step_seconds)) * 1e3
    mib = np.array((sim.persistent_bytes, *sim.device_bytes, sim.device_bytes[-1])) / _MIB
    series.append((f"plan: predicted ({format_bytes(sim.peak_bytes)})", times, mib))
    if after is not None:
        series.append(_measured("plan: measured", after))
    budget = (f"budget {format_bytes(budget_bytes)}", budget_bytes / _MIB)
    try:
        return _matplotlib_chart(series, budget, title)
    except ImportError:
        return _numpy_chart(series, budget)


def _measured(label: str, trace: Trace) -> tuple[str, np.ndarray, np.ndarray]:
    """A trace's last step: the label with its peak, times (ms from its start), device MiB."""
    step = len(trace.steps) - 1 if trace.steps else None
    lo, hi = trace.steps[-1] if trace.steps else (0, trace.duration_ns)
    line = trace.timeline("device", step)
    times = np.array((*line.times_ns, hi), dtype=np.float64) - lo
    live = np.array((*line.live_bytes, line.live_bytes[-1] if line.live_bytes else 0))
    return f"{label} ({format_bytes(line.peak_bytes)})", times / 1e6, live / _MIB


def _matplotlib_chart(series: list, budget: tuple[str, float], title: str) -> np.ndarray:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4), dpi=100)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for (label, times, mib), color in zip(series, _COLORS, strict=False):
        ax.step(times, mib, where="post", label=label, color=np.array(color) / 255)
    ax.axhline(budget[1], color=np.array(_COLORS[3]) / 255, linestyle="--", label=budget[0])
    ax.set(title=title, xlabel="time in the step (ms)", ylabel="device MiB")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def _numpy_chart(
    series: list, budget: tuple[str, float], width: int = 800, height: int = 400
) -> np.ndarray:
    """The same lines on white, without text: axes at the left and bottom."""
    image = np.full((height, width, 3), 255, np.uint8)
    x0, x1, top, bottom = 40, width - 20, 20, height - 30
    t_max = max(float(t[-1]) for _, t, _ in series) or 1.0
    y_max = max(budget[1], *(float(m.max()) for _, _, m in series)) * 1.05 or 1.0

    def row(mib: np.ndarray) -> np.ndarray:
        return np.round(bottom - np.asarray(mib) / y_max * (bottom - top)).astype(int)

    image[top : bottom + 1, x0] = image[bottom, x0 : x1 + 1] = 0
    dashes = np.arange(x0, x1) % 12 < 6
    image[row(budget[1]), np.arange(x0, x1)[dashes]] = _COLORS[3]
    for (_, times, mib), color in zip(series, _COLORS, strict=False):
        columns = np.arange(x0, x0 + int(round((x1 - x0) * times[-1] / t_max)) + 1)
        at = (columns - x0) / (x1 - x0) * t_max
        rows = row(mib[np.clip(np.searchsorted(times, at, side="right") - 1, 0, None)])
        previous = np.concatenate((rows[:1], rows[:-1]))
        for c, a, b in zip(columns, previous, rows, strict=True):  # vertical steps joined
            image[min(a, b) : max(a, b) + 1, c] = color
    return image


def _write(
    logdir: str | os.PathLike,
    number: int,
    scalars: dict[str, float],
    *,
    text: str | None = None,
    image: tuple[np.ndarray, str] | None = None,
) -> str:
    path = os.path.join(os.fspath(logdir), SUBDIR)
    writer = tf.summary.create_file_writer(path)
    try:
        with writer.as_default(step=number), tf.summary.record_if(True):
            for tag, value in scalars.items():
                tf.summary.scalar(tag, value)
            if text is not None:
                tf.summary.text("plan", text)
            if image is not None:
                tf.summary.image("device_memory", image[0][None], description=image[1])
    finally:
        writer.close()
    return path
