"""What the demo prints: the side-by-side table, AutoTune's plan, the packing in plain words.

Example:
    >>> from kswap.demo.summary import compact_plan
    >>> blocks = [["a", "conv", 2**20, "swap"], ["b", "conv", 2**20, "swap"],
    ...           ["c", "dense", 0, "keep"]]
    >>> print(compact_plan(blocks))
      a .. b  2 blocks    swap (prefetch 1)       2.0 MiB
      c       1 block     keep                    0.0 MiB
"""

from __future__ import annotations

import textwrap

from kswap.demo.chart import LABELS, device_label

__all__ = ["autotune_lines", "compact_plan", "packing_lines", "table"]

_MIB = 2**20
_WIDTH = 100


def _mib(n: float) -> str:
    return f"{n / _MIB:,.1f} MiB"


def table(results: dict[str, dict], steps: int) -> str:
    """One row per run: device peak, host peak, step time, each against the baseline, memory."""
    base = results["baseline"]
    head = ("run", "device peak", "vs baseline", "host peak", "step time", "vs baseline", "memory")
    rows = [head]
    for name, r in results.items():
        peak, ms = r["device_peak_bytes"], r["step_seconds"] * 1e3
        ratio = peak / base["device_peak_bytes"]
        less = ""
        if name != "baseline":
            less = f" ({abs(1 - ratio) * 100:.1f}% {'less' if ratio <= 1 else 'more'})"
        rows.append(
            (
                LABELS.get(name, name),
                _mib(peak),
                f"{ratio:.2f}x{less}",
                _mib(r["host_peak_bytes"]),
                f"{ms:,.0f} ms ({min(r['step_seconds_all']) * 1e3:,.0f}-"
                f"{max(r['step_seconds_all']) * 1e3:,.0f})",
                f"{r['step_seconds'] / base['step_seconds']:.2f}x",
                ("emulated" if r["emulated"] else "real") + f" ({r.get('device')})",
            )
        )
    widths = [max(len(row[c]) for row in rows) for c in range(len(head))]
    right = {1, 2, 3, 4, 5}
    lines = [
        "  ".join(
            cell.rjust(widths[c]) if c in right else cell.ljust(widths[c])
            for c, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    label = device_label(base["emulated"], base.get("device"))
    notes = [
        f"device peak: the most bytes in use on the device in {len(base['step_peaks_bytes'])} "
        f"profiled steps, weights and optimizer state included (device memory {label}). "
        "host peak: kswap's copies in host memory. step time: median of "
        f"{steps} unprofiled steps of fit (in brackets the fastest and the slowest).",
    ]
    if base["emulated"]:
        notes.append(
            "Without a GPU the host copies are real copies in the same CPU memory, made by "
            "the cores that compute: step times show that cost, not a GPU's link."
        )
    lines += [textwrap.fill(n, _WIDTH) for n in notes]
    return "\n".join(lines)


def autotune_lines(r: dict) -> list[str]:
    """AutoTune's budget, its rounds and whether the run's device peak is within the budget."""
    budget = r.get("budget_bytes")
    if budget is None:
        return ["AutoTune made no plan (see its warning above): the model kept its own actions."]
    base = r.get("autotune_baseline_bytes")
    of = f"of the device peak it measured with every block kept ({_mib(base)})" if base else ""
    lines = [f"AutoTune's budget: {_mib(budget)} {of}".rstrip()]
    for i, d in enumerate(r["rounds"], 1):
        measured = "not measured" if d["measured_bytes"] is None else _mib(d["measured_bytes"])
        if d.get("tensor_bytes") is not None:
            measured += f" (its tensors {_mib(d['tensor_bytes'])})"
        lines.append(
            f"  plan {i}: for {_mib(d['target_bytes'])} of tensors, predicted "
            f"{_mib(d['predicted_bytes'])}, measured {measured}"
        )
    if r.get("restored"):
        lines.append(
            "  no plan measured under the budget: AutoTune kept the model's own actions "
            "(every block swapped), which it had measured lower"
        )
    peak = r["device_peak_bytes"]
    verdict = "within" if peak <= budget else "OVER"
    lines.append(
        f"AutoTune run's device peak {_mib(peak)}: {verdict} the budget ({peak / budget:.3f} of it)"
    )
    return lines


def compact_plan(blocks: list[list]) -> str:
    """The plan's blocks, consecutive ones with one kind of action on one line, with their MiB.

    A block's MiB are the tensors its backward reads (what swapping or
    recomputing takes off the device between its forward and backward).
    Swaps with different prefetch distances (``swap``, ``swap:2``) share a
    line, which names the distances.
    """
    groups: list[dict] = []
    for name, _kind, saved, action in blocks:
        kind, _, rest = str(action).partition(":")
        if groups and groups[-1]["kind"] == kind:
            g = groups[-1]
            g["last"], g["n"], g["saved"] = name, g["n"] + 1, g["saved"] + saved
        else:
            g = {"first": name, "last": name, "n": 1, "kind": kind, "saved": saved, "ahead": set()}
            groups.append(g)
        if kind == "swap":
            g["ahead"].add(int(rest.split(":")[-1]) if rest else 1)
    spans = [g["first"] if g["n"] == 1 else f"{g['first']} .. {g['last']}" for g in groups]
    width = max(len(s) for s in spans)
    lines = []
    for span, g in zip(spans, groups, strict=True):
        count = f"{g['n']} block" + ("s" if g["n"] > 1 else "")
        action = g["kind"]
        if g["ahead"]:
            lo, hi = min(g["ahead"]), max(g["ahead"])
            action += f" (prefetch {lo})" if lo == hi else f" (prefetch {lo}-{hi})"
        lines.append(f"  {span:<{width}}  {count:<10}  {action:<20}{_mib(g['saved']):>11}")
    return "\n".join(lines)


def packing_lines(p: dict, emulated: bool, device: str | None) -> list[str]:
    """The packing of one baseline step, and TensorFlow's allocator beside it, in plain words."""
    bound, arena, bfc = p["lower_bound_bytes"], p["arena_bytes"], p["bfc_peak_bytes"]
    asked = p["requested_peak_bytes"]
    label = device_label(emulated, device)
    paragraphs = [
        f"One baseline step has {p['buffers']:,} device buffers (device memory {label}). "
        f"The most bytes alive at once are {_mib(bound)}: no allocator can use less, this "
        "is the lower bound.",
        f"kswap's SmartPool packing ({p['algorithm']}) gives every buffer a fixed offset, "
        f"planned from the lifetimes, and needs {_mib(arena)}: "
        f"{arena / max(bound, 1):.4f}x the bound.",
        f"TensorFlow's own allocator (BFC) had {_mib(bfc)} in use at its peak in the same "
        f"step: {bfc / max(bound, 1):.4f}x the bound, {_mib(bfc - bound)} more. Those bytes "
        "are not gaps between buffers: BFC counts the blocks it hands out, and a block is "
        "larger than the tensor asked for (rounded up to 256 bytes, and a free block less "
        "than twice the size asked for is handed out whole, not split). The tensors "
        f"themselves asked for at most {_mib(asked)} at once.",
    ]
    return [textwrap.fill(t, _WIDTH) for t in paragraphs]
