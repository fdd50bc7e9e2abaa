import json
import subprocess
import sys

import pytest

from kswap import cli


def tiny():
    import keras

    return keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(32, name="hidden"),
            keras.layers.Dense(4, name="out"),
        ],
        name="tiny",
    )


def test_profile_prints_peak_time_and_layers(capsys, tmp_path):
    out = tmp_path / "trace.json"
    assert (
        cli.main(["profile", "--model", "tests.test_cli:tiny", "--batch", "8", "--save", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    assert "device peak" in text and "(emulated on CPU:0)" in text and "step time" in text
    assert "hidden" in text and "out" in text
    assert "op time in the last profiled step" in text
    timed = text.split("op time in the last profiled step")[1].splitlines()
    hidden = next(r for r in timed if r.strip().startswith("hidden")).split()
    assert float(hidden[1]) > 0 and float(hidden[2]) > 0  # total, forward (ms)
    import kswap

    assert kswap.Trace.from_json(out).peak_bytes() > 0


def test_measure_json(capsys):
    assert cli.main(["measure", "--model", "tests.test_cli:tiny", "--batch", "8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["device_peak_bytes"] > 0 and d["emulated"] is True and d["batch_size"] == 8


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "no.such.module:f"], "`model` must name a callable"),
        (
            ["--model", "tests.test_cli:tiny", "--input", "64,x"],
            "`input` must be positive integers",
        ),
        (["--model", "tests.test_cli:tiny", "--steps", "0"], "`steps` must be an integer >= 1"),
    ],
)
def test_bad_arguments(capsys, args, message):
    assert cli.main(["profile", *args]) == 2
    assert message in capsys.readouterr().err


def test_python_dash_m():
    proc = subprocess.run([sys.executable, "-m", "kswap", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "profile" in proc.stdout


def test_profile_pack_and_pack_command(capsys, tmp_path):
    trace_path = tmp_path / "t.json"
    png = tmp_path / "p.png"
    args = ["profile", "--model", "tests.test_cli:tiny", "--batch", "8", "--pack"]
    assert cli.main([*args, "--save", str(trace_path)]) == 0
    text = capsys.readouterr().out
    assert "lower bound" in text and "BFC peak in use" in text and "greedy_size" in text
    assert (
        cli.main(["pack", str(trace_path), "--algorithms", "first_fit,best", "--plot", str(png)])
        == 0
    )
    text = capsys.readouterr().out
    assert "first_fit" in text and "best" in text and "greedy_size" not in text
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_pack_command_errors(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "other"}')
    assert cli.main(["pack", str(bad)]) == 2
    assert "`trace` must be a kswap trace JSON file" in capsys.readouterr().err
    assert cli.main(["pack", str(tmp_path / "missing.json")]) == 2
    assert "Received:" in capsys.readouterr().err


def test_profile_with_offloading(capsys):
    args = ["profile", "--model", "tests.test_cli:tiny", "--batch", "4096", "--offload", "all"]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "offload=all" in text
    host = [line for line in text.splitlines() if line.startswith("host peak")][0]
    assert float(host.split()[2]) > 0  # activations went to the (emulated) host tier
    assert cli.main(["profile", "--model", "tests.test_cli:tiny", "--offload", "some"]) == 2
    assert "`policy` must be one of" in capsys.readouterr().err


def wide():
    import keras

    inp = keras.Input((1024,))
    return keras.Model(inp, keras.layers.Dense(4)(keras.layers.Dense(1024)(inp)), name="wide")


def test_profile_with_the_optimizer_state_on_the_host(capsys):
    args = ["profile", "--model", "tests.test_cli:wide", "--optimizer-state", "host"]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "optimizer_state=host" in text and "offload=" not in text
    host = [line for line in text.splitlines() if line.startswith("host peak")][0]
    # no activation is offloaded: the host bytes are Adam's slots, 8 MiB
    assert float(host.split()[2]) >= 8.0
