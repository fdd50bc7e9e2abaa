"""benchmarks/gpu.sh's driver, in its dry run: every stage's section, figures labelled."""

import os

import pytest

from tests.scripts import ROOT, run_script

DRIVER = os.path.join(ROOT, "benchmarks", "gpu_run.py")
SECTIONS = (
    "#### Device",
    "#### Host<->device copy bandwidth",
    "#### Offloading: device memory and step time",
    "#### vDNN's experiment: VGG16, batch 256, float32, against 12 GiB",
    "#### The simulator against measurement",
    "#### Exactness tests on the device",
)


def _run(*args: str, timeout: float):
    return run_script(DRIVER, *args, timeout=timeout)


@pytest.mark.slow
def test_dry_run_writes_every_stage_labelled_as_emulated(tmp_path):
    out = tmp_path / "results.md"
    proc = _run("--dry-run", "--out", str(out), timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert text.startswith("### Measured on CPU, emulated")
    for heading in SECTIONS:
        assert heading in text, heading
    sections = text.split("\n#### ")[1:]
    assert len(sections) == len(SECTIONS)
    for section in sections:
        assert "Device: CPU, emulated." in section, section[:200]
        assert "python " in section  # the command that made its figures
        # every stage ran to its end (the limited vDNN runs' out of memory is a row)
        assert "**failed**" not in section and "**timed out**" not in section, section[:2000]
    assert "device memory emulated on CPU:0" in text  # the benchmark scripts' own label
    # the plain model under the scaled limit does not train
    vdnn = next(s for s in sections if s.startswith("vDNN"))
    assert "| plain, limit" in vdnn
    assert "| plain, limit" in vdnn and "| ok |" not in vdnn.split("| plain, limit")[1][:40]


@pytest.mark.parametrize("args", [["--bogus"], ["--stages", "device,nope"]])
def test_a_bad_argument_is_one_line_and_exit_code_2(args):
    proc = _run(*args, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("gpu_run.py: error: ")
