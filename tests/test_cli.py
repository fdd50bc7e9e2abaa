import json
import os
import re
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
    args = ["measure", "--model", "tests.test_cli:tiny", "--batch", "8", "--steps", "1"]
    assert cli.main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["device_peak_bytes"] > 0 and d["emulated"] is True and d["batch_size"] == 8
    assert isinstance(d["device_peak_bytes"], int) and d["steps"] == 1


def test_measure_prints_mib_and_ms(capsys):
    args = ["measure", "--model", "tests.test_cli:wide", "--batch", "8", "--steps", "1"]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    rows = {line[:17].strip(): line[17:] for line in text.splitlines()}
    assert rows["model"].startswith("tests.test_cli:wide  batch 8")
    for row in ("device peak", "step peak", "host peak"):
        assert re.match(r"[\d,]+\.\d MiB", rows[row]), rows[row]
    # weights, gradients and Adam's slots (a thousands separator where the process holds more)
    assert float(rows["device peak"].split()[0].replace(",", "")) >= 8.0
    assert re.match(r"[\d,]+\.\d ms  \(median of 1, unprofiled\)", rows["step time"])
    assert "_bytes" not in text and "step_seconds" not in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "no.such.module:f"], "`model` must name a callable"),
        (
            ["--model", "tests.test_cli:tiny", "--input", "64,x"],
            "`input` must be positive integers",
        ),
        (["--model", "numpy:zeros"], "`model` must name a Keras model or a function"),
        (["--model", "tests.test_cli:array"], "Received: model='tests.test_cli:array', which "),
    ],
)
def test_bad_arguments(capsys, args, message):
    assert cli.main(["profile", *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.splitlines()[-1]  # after the "[kswap] building ..." progress line, if any
    assert last.startswith("kswap: error: ") and message in last


def array():
    import numpy as np

    return np.zeros(3)


def test_a_model_that_is_not_a_keras_model_says_what_it_got(capsys):
    assert cli.main(["measure", "--model", "numpy:zeros"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert "Received: model='numpy:zeros', which cannot be called with no arguments" in err
    assert "shape" in err
    assert cli.main(["measure", "--model", "tests.test_cli:array"]) == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("Received: model='tests.test_cli:array', which returned ndarray")
    )


def broken():
    raise TypeError("a bug inside the factory")


def test_a_type_error_inside_the_factory_is_its_own():
    with pytest.raises(TypeError, match="a bug inside the factory"):
        cli.main(["measure", "--model", "tests.test_cli:broken"])


@pytest.mark.parametrize(
    "command, flag, value",
    [
        *(
            (command, flag, value)
            for command in ("profile", "measure")
            for flag, value in [
                ("--batch", "0"),
                ("--batch", "-5"),
                ("--steps", "0"),
                ("--steps", "1.5"),
                ("--classes", "0"),
                ("--classes", "ten"),
            ]
        ),
        ("profile", "--top", "-1"),
        ("profile", "--top", "0"),
    ],
)
def test_counts_must_be_positive_integers_at_parse_time(capsys, command, flag, value):
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--model", "tests.test_cli:tiny", flag, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    name = flag[2:]
    assert err.count("\n") == 1 and "usage" not in err
    assert f"argument {flag}: `{name}` must be an integer >= 1. Received: {name}={value!r}" in err


def test_measure_steps_default_is_the_api_s():
    import inspect

    import kswap

    args = cli._parser().parse_args(["measure", "--model", "m"])
    assert args.steps == inspect.signature(kswap.measure).parameters["steps"].default == 3
    args = cli._parser().parse_args(["profile", "--model", "m"])
    assert args.steps == inspect.signature(kswap.profile).parameters["steps"].default


def test_python_dash_m():
    proc = subprocess.run([sys.executable, "-m", "kswap", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "profile" in proc.stdout


_NO_TENSORFLOW = """
import os, sys
from kswap.cli import main
for argv in {argvs!r}:
    try:
        main(argv)
    except SystemExit:
        pass
    print("imported:", "tensorflow" in sys.modules, "keras" in sys.modules, flush=True)
"""


def test_help_and_argument_errors_do_not_import_tensorflow(tmp_path):
    argvs = [
        ["--help"],
        *([cmd, "--help"] for cmd in ("profile", "measure", "pack", "plan")),
        ["bogus"],
        ["profile"],
        ["profile", "--model", "m", "--batch", "0"],
        ["measure", "--model", "m", "--steps", "x"],
        ["profile", "--model", "m", "--top", "-1"],
        ["pack", str(tmp_path / "missing.json")],
    ]
    code = _NO_TENSORFLOW.format(argvs=argvs)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    imported = [line for line in proc.stdout.splitlines() if line.startswith("imported:")]
    assert imported == ["imported: False False"] * len(argvs)


_LOG_LEVEL_AT_IMPORT = """
import importlib.abc, os, sys

class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "tensorflow":
            print("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL"), flush=True)
            sys.meta_path.remove(self)
        return None

sys.meta_path.insert(0, Spy())
from kswap.cli import main
sys.exit(main(["measure", "--model", "numpy:zeros"]))
"""


def test_tensorflow_starts_with_its_log_level_set():
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run(
        [sys.executable, "-c", _LOG_LEVEL_AT_IMPORT], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.splitlines() == ["TF_CPP_MIN_LOG_LEVEL 2"]
    assert proc.stderr.splitlines()[-1].startswith("kswap: error: `model` must name a Keras")


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


@pytest.mark.parametrize(
    "content, reason",
    [
        ("[]", "Not a kswap trace: expected a JSON object. Received: list"),
        ('"hello"', "Not a kswap trace: expected a JSON object. Received: str"),
        ("not json", "Not a kswap trace: the text is not valid JSON"),
        ('{"format": "kswap.trace/1"}', "missing field(s) fields, buffers, steps"),
        (
            '{"format": "kswap.trace/1", "fields": ["size"], "buffers": [[1]], "steps": [], '
            '"duration_ns": 0, "emulated": false, "metadata": {}}',
            "buffers[0]: Allocation.__init__() missing 2 required",
        ),
        (
            '{"format": "kswap.trace/1", "fields": ["size", "start_ns", "end_ns"], '
            '"buffers": [[1, 2]], "steps": [], "duration_ns": 0, "emulated": false, '
            '"metadata": {}}',
            "buffers[0] must be a list of 3 values. Received: list of 2",
        ),
        (b"\xff\xfe\x00", "Not a kswap trace: the file is not text"),
        (None, "Not a kswap trace: there is no file"),
        ("DIR", "(Is a directory)"),
    ],
)
def test_pack_refuses_what_is_not_a_kswap_trace_in_one_line(capsys, tmp_path, content, reason):
    path = tmp_path / "t.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "DIR":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    assert cli.main(["pack", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"kswap: error: `trace` must be a kswap trace JSON file. Received: trace={str(path)!r} ("
    )
    assert reason in err


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
