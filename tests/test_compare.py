"""benchmarks/compare.py on its tiny CNN: a row per method, failures as cells, the picture."""

import json
import os

import pytest

from tests.scripts import ROOT, run_script

SCRIPT = os.path.join(ROOT, "benchmarks", "compare.py")
#: One of each kind: kswap, a peer that fails on the TF backend, one that runs, the batch scan.
METHODS = ["baseline", "kswap-all", "remat-full", "mixed", "same-peak"]


def _run(*args: str, timeout: float):
    return run_script(SCRIPT, *args, timeout=timeout)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    proc = _run(
        "--quick", "--repeats", "1", "--methods", ",".join(METHODS), "--scan-limit", "2",
        "--out", str(out),
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, json.loads((out / "compare.json").read_text()), (out / "compare.md").read_text()


def test_a_row_per_method_in_the_json_and_the_table(quick):
    _, data, text = quick
    rows = data["rows"]
    assert [r["method"] for r in rows] == METHODS
    assert all(r["model"] == "Tiny" for r in rows)
    assert "**Tiny**" in text
    for method in METHODS:
        assert f"| {method} |" in text
    assert "device memory emulated on CPU:0" in text


def test_measured_rows_carry_the_figures(quick):
    _, data, _ = quick
    rows = {r["method"]: r for r in data["rows"]}
    for method in ("baseline", "kswap-all", "mixed"):
        row = rows[method]
        assert "error" not in row, row
        assert row["device_peak_mib"] > 0 and row["step_ms"] > 0
        assert row["samples_per_s"] == pytest.approx(row["batch"] * 1000 / row["step_ms"])
    assert rows["baseline"]["peak_ratio"] == 1.0
    assert rows["kswap-all"]["peak_ratio"] < 1.0  # offloading saves on the device
    assert rows["kswap-all"]["host_peak_mib"] > 0


def test_a_failing_method_is_an_error_cell(quick):
    _, data, text = quick
    row = next(r for r in data["rows"] if r["method"] == "remat-full")
    # keras#21207: RematScope(mode="full") on the TensorFlow backend
    assert "keywords arguments only when eager" in row["error"]
    line = next(ln for ln in text.splitlines() if ln.startswith("| remat-full |"))
    assert "| fails |" in line and "\n" not in row["error"]


def test_same_peak_runs_a_batch_that_fits_kswap_s_peak(quick):
    _, data, _ = quick
    rows = {r["method"]: r for r in data["rows"]}
    scan = data["runs"]["Tiny"]["same-peak"][0]
    if "error" in scan:  # nothing smaller fits: said so in the cell
        assert "error" in rows["same-peak"]
        return
    assert rows["same-peak"]["batch"] <= rows["baseline"]["batch"]
    assert scan["device_peak_bytes"] <= scan["target_bytes"]


def test_the_picture_is_written(quick):
    out, _, _ = quick
    png = out / "compare.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize(
    "args", [["--models", "Nope"], ["--methods", "baseline,magic"], ["--batch", "0"], ["--bogus"]]
)
def test_a_bad_argument_is_one_line_and_exit_code_2(args):
    proc = _run(*args, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("compare.py: error: ")
