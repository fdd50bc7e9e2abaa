"""AutoTune's TensorBoard report: the event files it writes, and TensorBoard serving them."""

import dataclasses
import glob
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from kswap.planning import Block, Plan, Workload, simulate
from kswap.trace import Allocation, Trace
from kswap.tuning.report import (
    MEASURED_SCALARS,
    PLAN_SCALARS,
    SUBDIR,
    memory_chart,
    write_measurement,
    write_plan,
)
from tests.tensorboard import get, get_bytes, memory_profile_peaks, tensorboard
from tests.tuning.test_autotune import run_main

MiB = 2**20
MS = 1_000_000  # ns


def _round():
    w = Workload(
        (
            Block("a", 4 * MiB, 1e-3, 2e-3, kind="dense"),
            Block("b", 2 * MiB, 1e-3, 2e-3, input_bytes=MiB),
            Block("c", 1 * MiB, 1e-3, 2e-3),
        ),
        weight_bytes=MiB,
    )
    plan = Plan.evaluate(w, ["swap", "recompute", "keep"], "pcie4", budget_bytes=6 * MiB)
    before = Trace(
        buffers=(Allocation(MiB, 0, 10 * MS), Allocation(7 * MiB, 2 * MS, 8 * MS)),
        steps=((0, 10 * MS),),
        duration_ns=10 * MS,
        emulated=True,
    )
    after = Trace(
        buffers=(Allocation(MiB, 0, 12 * MS), Allocation(5 * MiB, 5 * MS, 9 * MS)),
        steps=((0, 4 * MS), (4 * MS, 12 * MS)),
        duration_ns=12 * MS,
        emulated=True,
    )
    return w, plan, before, after


def _events(path):
    """{(step, tag): summary value} of every event file under ``path``."""
    out = {}
    for name in sorted(glob.glob(os.path.join(path, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(name):
            for value in event.summary.value:
                assert (event.step, value.tag) not in out, "written twice"
                out[event.step, value.tag] = value
    return out


def test_a_round_writes_its_scalars_plan_and_image(tmp_path):
    w, plan, before, after = _round()
    assert write_plan(tmp_path, 1, plan, w, 5 * MiB) == str(tmp_path / SUBDIR)
    write_measurement(tmp_path, 1, plan, w, 5 * MiB, before, after)
    real = [dataclasses.replace(t, emulated=False) for t in (before, after)]
    write_measurement(tmp_path, 2, plan, w, 5 * MiB, *real)
    events = _events(str(tmp_path / SUBDIR))
    assert {tag for step, tag in events if step == 1} == {
        *PLAN_SCALARS,
        *MEASURED_SCALARS,
        "plan",
        "device_memory",
    }
    assert {tag for step, tag in events if step == 2} == {*MEASURED_SCALARS, "device_memory"}

    def scalar(tag, step=1):
        value = events[step, tag]
        assert value.metadata.plugin_data.plugin_name == "scalars"
        return float(tf.make_ndarray(value.tensor))

    expected = {
        "baseline_peak_mib": plan.baseline_peak_bytes / MiB,
        "budget_mib": 5.0,
        "target_mib": 6.0,
        "predicted_peak_mib": plan.predicted_peak_bytes / MiB,
        "swapped_mib": 4.0,  # a's saved bytes
        "recomputed_mib": 2.0,  # b's
        "predicted_step_ms": plan.predicted_step_seconds * 1e3,
        "measured_peak_mib": 6.0,  # 1 + 5 MiB, over both steps
        "measured_step_ms": 8.0,  # the last step
    }
    assert {t: scalar(t) for t in expected} == pytest.approx(expected, rel=1e-6)

    text = events[1, "plan"]
    assert text.metadata.plugin_data.plugin_name == "text"
    table = tf.make_ndarray(text.tensor).item().decode()
    assert "| `a` | dense | 4.00 | swap |" in table
    assert "| `b` | other | 2.00 | recompute |" in table.replace("recompute:device", "recompute")
    assert "| `c` | other | 1.00 | keep |" in table

    for step, emulated in ((1, True), (2, False)):
        image = events[step, "device_memory"]
        assert image.metadata.plugin_data.plugin_name == "images"
        assert ("(emulated on CPU)" in image.metadata.summary_description) == emulated
        width, height, png = tf.make_ndarray(image.tensor)
        assert (int(width), int(height)) == (800, 400)
        assert tf.io.decode_png(png).shape == (400, 800, 3)


def test_without_matplotlib_the_chart_is_drawn_with_numpy(monkeypatch):
    w, plan, before, after = _round()
    drawn = memory_chart(plan, w, 5 * MiB, before, after)
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    plain = memory_chart(plan, w, 5 * MiB, before, after)
    assert plain.shape == drawn.shape == (400, 800, 3) and plain.dtype == np.uint8
    assert not np.array_equal(plain, drawn)
    colors = {tuple(c) for c in plain.reshape(-1, 3)}
    gray, blue, orange, red = (128, 128, 128), (31, 119, 180), (255, 127, 14), (214, 39, 40)
    assert {gray, blue, orange, red} <= colors  # before, predicted, after, budget
    rows = np.nonzero((plain == red).all(axis=2))[0]
    assert len(set(rows)) == 1  # the budget: one horizontal line
    # the predicted line reaches higher (a smaller row) than the budget iff its peak is over it
    top = np.nonzero((plain == blue).all(axis=2))[0].min()
    assert (top < rows[0]) == (simulate(w, plan, plan.link).peak_bytes > 5 * MiB)


@pytest.mark.slow
def test_tensorboard_serves_autotunes_scalars_plan_image_and_memory_profile(tmp_path):
    pytest.importorskip("tensorboard_plugin_profile")
    result = run_main("--logdir", str(tmp_path))
    (tuned,) = result["rounds"]
    assert tuned["measured_peak_bytes"], result
    with tensorboard(tmp_path) as base:
        listing = get(f"{base}/plugins_listing")
        for plugin in ("scalars", "text", "images", "profile"):
            assert listing[plugin]["enabled"], plugin

        tags = get(f"{base}/plugin/scalars/tags")
        assert set(tags[SUBDIR]) == {*PLAN_SCALARS, *MEASURED_SCALARS}
        for tag, nbytes in (
            ("predicted_peak_mib", tuned["predicted_peak_bytes"]),
            ("baseline_peak_mib", tuned["baseline_peak_bytes"]),
            ("measured_peak_mib", tuned["measured_peak_bytes"]),
            ("budget_mib", result["budget_bytes"]),
        ):
            ((_, step, value),) = get(f"{base}/plugin/scalars/scalars?run={SUBDIR}&tag={tag}")
            assert step == 1 and value == pytest.approx(nbytes / MiB, rel=1e-6), tag

        assert get(f"{base}/plugin/text/tags")[SUBDIR] == ["plan"]
        (text,) = get(f"{base}/plugin/text/text?run={SUBDIR}&tag=plan")
        assert text["step"] == 1 and "<table>" in text["text"]
        assert all(f"<code>{b}</code>" in text["text"] for b in tuned["blocks"])

        image = get(f"{base}/plugin/images/tags")[SUBDIR]["device_memory"]
        assert image["samples"] == 1
        assert ("emulated on CPU" in image["description"]) == result["emulated"]
        (entry,) = get(f"{base}/plugin/images/images?run={SUBDIR}&tag=device_memory")
        png = get_bytes(f"{base}/plugin/images/individualImage?{entry['query']}")
        assert tf.io.decode_png(png).shape == (400, 800, 3)

        # the profiled windows (the model as it came, every block kept, under the plan)
        runs = get(f"{base}/plugin/profile/runs")
        assert sorted(runs) == sorted(result["profiles"]) and len(runs) == 3, runs
        key = "allocator_peak_bytes" if result["emulated"] else "device_peak_bytes"
        for run in runs:
            want = result["profiles"][run][key]
            peaks = memory_profile_peaks(base, run)
            assert any(abs(p - want) <= 0.02 * want for p in peaks.values()), (want, peaks)
