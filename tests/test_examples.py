"""Every script in ``examples/`` runs, each in a fresh process, and shows what it says.

A fresh process each: TensorFlow's allocator counts every live tensor of the
process, and MirroredStrategy needs its logical devices set before
TensorFlow starts. Each test is a unit of its own (``tests/conftest.py``),
so the two test processes of ``make test`` share them out.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys

import pytest

from kswap.planning import Plan
from tests.scripts import ROOT, script_env

EXAMPLES = os.path.join(ROOT, "examples")
GIB = 2**30

pytestmark = pytest.mark.slow


def run(name: str, *args: str, cwd) -> str:
    """Runs ``examples/<name>.py`` with ``args`` in ``cwd``; its standard output."""
    env = script_env()
    proc = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, f"{name}.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _mib(pattern: str, out: str) -> float:
    match = re.search(pattern, out)
    assert match, (pattern, out)
    return float(match.group(1))


def test_every_example_is_tested():
    tested = {n[len("test_") :] for n in globals() if n.startswith("test_")}
    scripts = {f[: -len(".py")] for f in os.listdir(EXAMPLES) if f.endswith(".py")}
    assert scripts <= tested, scripts - tested


def test_offload_one_line(tmp_path):
    out = run("offload_one_line", cwd=tmp_path)
    assert "losses identical: True" in out
    plain = _mib(r"plain: .*, its tensors ([\d.]+) MiB", out)
    offloaded = _mib(r"kswap: .*, its tensors ([\d.]+) MiB", out)
    # Nine residual blocks of one size: the offloaded step's tensors were
    # 0.41 of the plain one's in every run (docs/benchmarks.md), so a ratio
    # near 1 means offloading stopped saving. The allocator's blocks are not
    # compared: a convolution's backward asks for one large buffer, which a
    # free block up to twice its size may take whole.
    assert offloaded < 0.6 * plain
    assert _mib(r"kswap: step peak ([\d.]+) MiB", out) > 0
    assert _mib(r"kswap: .*, ([\d.]+) MiB in the host tier", out) > 0
    assert "strip gives back the plain model: True" in out
    assert out.count("emulated on CPU:0") == 2 or "(GPU)" in out


def test_autotune_fit(tmp_path):
    out = run("autotune_fit", "--logdir", str(tmp_path / "logs"), cwd=tmp_path)
    budget = _mib(r"budget: +([\d.]+) MiB", out)
    baseline = _mib(r"baseline device peak: +([\d.]+) MiB", out)
    peak = _mib(r"measured device peak: +([\d.]+) MiB", out)
    assert budget == pytest.approx(baseline / 2, abs=0.01)
    assert peak <= budget
    assert "under the budget: True" in out
    assert (tmp_path / "logs" / "kswap").is_dir()  # AutoTune's rounds for TensorBoard
    # its plan line: the predicted peak of tensors, and of the allocator's blocks
    size = r"([\d.]+) (B|KiB|MiB|GiB)"
    line = re.search(rf"predicted peak {size} of tensors \({size} of the allocator's blocks\)", out)
    assert line, out
    units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    g = line.groups()
    tensors, blocks = float(g[0]) * units[g[1]], float(g[2]) * units[g[3]]
    assert tensors <= blocks < 2 * tensors


def test_custom_loop(tmp_path):
    out = run("custom_loop", cwd=tmp_path)
    assert "losses identical: True" in out
    assert "weights identical: True" in out


def test_mirrored_strategy(tmp_path):
    out = run("mirrored_strategy", cwd=tmp_path)
    assert "replicas: 2" in out
    assert "losses identical: True" in out


@pytest.fixture(scope="module")
def vgg16_plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("static_plan")
    return run("static_plan_vgg16", "--out", str(path), cwd=path), path


def test_static_plan_vgg16(vgg16_plan):
    out, path = vgg16_plan
    # VGG16 at batch 256 does not fit a 12 GiB K40 without a plan
    assert _mib(r"estimated baseline peak: +([\d.]+) GiB", out) > 12
    assert _mib(r"device memory: +([\d.]+) GiB", out) == 12
    plan = Plan.from_json((path / "vgg16_plan.json").read_text())
    assert plan.fits and plan.predicted_peak_bytes < plan.baseline_peak_bytes
    assert plan.counts()["keep"] < len(plan.blocks)
    # the plan meets the K40's 12 GiB: block1_conv2's backward holds three 3.06 GiB
    # tensors at once (ReluGrad writes into the upstream gradient's buffer), plus
    # weights, their gradients and the step's inputs, with Adam's slots on the host
    # (docs/benchmarks.md)
    assert "meets 12GiB:              True" in out and "no plan meets" not in out
    assert round(plan.budget_bytes / GIB, 2) == 12
    assert round(plan.predicted_peak_bytes / GIB, 2) == 11.90
    assert plan.optimizer_state == "host" and round(plan.slowdown, 3) == 1.073
    actions = dict(zip(plan.blocks, map(str, plan.actions), strict=True))
    assert actions["block1_conv2"] != "keep"


def test_static_plan_vgg16_below_its_floor_plans_for_the_smallest_feasible_budget(
    tmp_path, monkeypatch, capsys
):
    # in this process (the fresh-process run is the test above): the script builds
    # VGG16's weights and traces its forward, but runs no step
    script = os.path.join(EXAMPLES, "static_plan_vgg16.py")
    monkeypatch.setattr(sys, "argv", [script, "--out", str(tmp_path), "--budget", "10GiB"])
    runpy.run_path(script, run_name="__main__")
    out = capsys.readouterr().out
    assert "No plan meets budget='10GiB' (10 GiB). The smallest feasible budget is 10.4 GiB" in out
    plan = Plan.from_json((tmp_path / "vgg16_plan.json").read_text())
    assert round(plan.budget_bytes / GIB, 2) == round(plan.predicted_peak_bytes / GIB, 2) == 10.36


def test_keras_hub_transformer(tmp_path):
    pytest.importorskip("keras_hub")
    out = run("keras_hub_transformer", cwd=tmp_path)
    assert "losses identical: True" in out
    assert _mib(r"kswap: .*, ([\d.]+) MiB in the host tier", out) > 0


def test_inspect_trace(tmp_path):
    out = run("inspect_trace", "--out", str(tmp_path), cwd=tmp_path)
    from kswap import Trace

    trace = Trace.from_json((tmp_path / "trace.json").read_text())
    assert _mib(r"device peak: ([\d.]+) MiB", out) == round(trace.peak_bytes() / 2**20, 1)
    arena = _mib(r"arena ([\d.]+) MiB", out)
    bound = _mib(r"lower bound ([\d.]+) MiB", out)
    assert arena >= bound > 0
    assert "reads back: same peak True" in out
    assert list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))  # for TensorBoard
    if "no pictures" not in out:
        for png in ("device_memory.png", "packing.png"):
            assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ("emulated on CPU:0" in out) == trace.emulated
