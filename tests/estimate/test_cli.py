"""``kswap plan``: the report, --json, and one-line rejections with exit code 2."""

import json
import os
import subprocess
import sys

import pytest

from kswap import cli

MODEL = ["--model", "tests.estimate.models:deep_mlp", "--input", "256", "--batch", "2048"]
BLOCKS = ["d0", "r0", "d1", "r1", "d2", "r2", "d3", "r3", "out"]


def run(capsys, args):
    try:
        code = cli.main(["plan", *args])
    except SystemExit as exit:  # argparse's own checks
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def test_report(capsys):
    code, out, err = run(capsys, [*MODEL, "--budget", "0.8", "--device", "k40"])
    assert code == 0, err
    for text in ("baseline peak", "(estimated)", "fits the device's 12 GiB", "predicted peak",
                 "within the budget", "slowdown", "nothing was run"):  # fmt: skip
        assert text in out
    table = out[out.index("block  kind") :].splitlines()
    assert [line.split()[0] for line in table[1:]] == BLOCKS
    assert "swap" in out or "recompute" in out  # the budget needs evictions


def test_json(capsys):
    code, out, _ = run(capsys, [*MODEL, "--budget", "0.8", "--device", "k40", "--json"])
    assert code == 0
    d = json.loads(out)
    for key in ("baseline_peak_bytes", "predicted_peak_bytes", "baseline_step_seconds",
                "predicted_step_seconds", "actions"):  # fmt: skip
        assert key in d
    assert d["predicted_peak_bytes"] <= d["budget_bytes"] == int(0.8 * d["baseline_peak_bytes"])
    assert len(d["actions"]) == len(BLOCKS) and d["blocks"] == BLOCKS
    assert d["device"] == "k40" and d["link"]["name"] == "pcie3" and d["fits"] is True
    assert d["batch_size"] == 2048 and d["baseline_fits_device"] is True
    assert kswap_plan(d).predicted_peak_bytes == d["predicted_peak_bytes"]


def kswap_plan(d):
    from kswap.planning import Plan

    return Plan.from_json(d)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--budget", "-2"], "`budget` must be in (0, 1] or a byte count. Received: budget='-2'"),
        (["--budget", "1.5"], "Received: budget='1.5'"),
        (["--budget", "lots"], "Received: budget='lots'"),
        (["--budget", "1KiB"], "The smallest feasible budget is"),
        (["--device", "tpu"], "Received: device='tpu'"),
        (["--link", "pcie9"], "Received: link='pcie9'"),
        (["--strategy", "best"], "Received: strategy='best'"),
        (["--batch", "abc"], "`batch` must be an integer >= 1. Received: batch='abc'"),
        (["--batch", "0"], "Received: batch='0'"),
        (["--input", "2,x"], "`input` must be positive integers"),
        (["--model", "no.such:thing"], "`model` must name a callable"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_rejections_are_one_line_with_exit_code_2(capsys, args, message):
    base = [*MODEL, "--device", "k40", "--budget", "0.5"]
    code, out, err = run(capsys, [*base, *args])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("kswap: error: "), err
    assert message in err


def test_missing_model_is_one_line(capsys):
    code, _, err = run(capsys, ["--budget", "0.5"])
    assert code == 2 and err.count("\n") == 1
    assert "the following arguments are required: --model" in err


def test_no_budget_on_a_device_of_unknown_memory(capsys):
    code, _, err = run(capsys, [*MODEL, "--device", "cpu"])
    assert code == 2 and "`budget` is needed: device 'cpu'" in err


def test_in_a_fresh_process_help_is_fast_and_a_rejection_has_no_traceback():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    code = (
        "import sys\nfrom kswap.cli import main\n"
        "try:\n    main(['plan', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('tensorflow' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.stdout.strip().endswith("False")  # --help imports no TensorFlow
    args = [*MODEL, "--device", "k40", "--budget", "1KiB"]
    proc = subprocess.run(
        [sys.executable, "-m", "kswap", "plan", *args], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("kswap")]
    assert len(lines) == 1 and "smallest feasible budget" in lines[0]
