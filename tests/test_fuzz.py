"""Random input for what reads files and arguments: a rejection is one line.

The trace readers (``Trace.from_json``, ``read_xspace``), ``kswap pack`` and the
argument checks of ``kswap profile``, ``measure`` and ``plan`` get random JSON,
bytes, mutations of a valid trace and random option values. Each either works
or rejects the input with one ValueError line (exit code 2 on the command
line, naming the argument), never another exception.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kswap import cli
from kswap.trace import Allocation, OpInterval, Trace
from kswap.trace.xspace import read_xspace

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)


def _valid_payload() -> dict:
    trace = Trace(
        buffers=(
            Allocation(size=1000, start_ns=0, end_ns=50, tier="device", layer="a", op="m/a/x"),
            Allocation(size=3000, start_ns=10, end_ns=20, tier="device", layer="b", step=0),
            Allocation(size=500, start_ns=15, end_ns=60, tier="host", layer="a"),
        ),
        steps=((0, 30), (30, 60)),
        duration_ns=60,
        emulated=True,
        metadata={"model": "m"},
        ops=(
            OpInterval(
                op="m/a/x", type="Conv2D", start_ns=0, end_ns=10, layer="a", phase="forward"
            ),
        ),
    )
    return json.loads(trace.to_json())


def _paths(payload) -> list[tuple]:
    """Every place in a JSON value, as a tuple of keys and indices."""
    out = [()]
    if isinstance(payload, dict | list):
        items = payload.items() if isinstance(payload, dict) else enumerate(payload)
        for key, value in items:
            out += [(key, *rest) for rest in _paths(value)]
    return out


_VALID = _valid_payload()
_PLACES = _paths(_VALID)


@st.composite
def mutated_traces(draw) -> str:
    """A valid trace's JSON with one place replaced by a random value, or dropped."""
    payload = json.loads(json.dumps(_VALID))
    place = draw(st.sampled_from(_PLACES[1:]))
    parent = payload
    for key in place[:-1]:
        parent = parent[key]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[place[-1]]
    else:
        parent[place[-1]] = draw(json_values)
    return json.dumps(payload)


def _check_one_line_rejection(error: ValueError) -> None:
    message = str(error)
    assert message and "\n" not in message, message


@FUZZ
@given(json_values)
def test_the_trace_reader_takes_any_json(value):
    text = json.dumps(value)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp, "t.json")
        path.write_text(text)
        for source in (text, path):  # as text and as a file
            try:
                trace = Trace.from_json(source)
            except ValueError as error:
                _check_one_line_rejection(error)
            else:
                assert isinstance(trace, Trace)


@FUZZ
@given(mutated_traces())
def test_the_trace_reader_takes_any_mutation_of_a_valid_trace(text):
    try:
        trace = Trace.from_json(text)
    except ValueError as error:
        _check_one_line_rejection(error)
    else:  # what is left is still a trace: it measures and round-trips
        assert trace.peak_bytes("device") >= 0
        assert Trace.from_json(trace.to_json()) == trace


@FUZZ
@given(st.binary(max_size=200))
def test_the_xspace_reader_takes_any_bytes(data):
    try:
        events = read_xspace(data)
    except ValueError as error:
        _check_one_line_rejection(error)
    else:
        assert all(e.allocation_bytes >= 0 for e in events.memory_events)


def _run(argv: list[str]) -> tuple[int, str]:
    """``kswap argv`` in this process: its exit code and what it wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


def _check_cli_rejection(code: int, err: str, names: list[str]) -> None:
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kswap"), err
    assert any(name in lines[0] for name in names), err


file_contents = (
    st.binary(max_size=100)
    | json_values.map(lambda v: json.dumps(v).encode())
    | mutated_traces().map(str.encode)
)


@FUZZ
@given(file_contents)
def test_kswap_pack_takes_any_file(content):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        with open(path, "wb") as f:
            f.write(content)
        code, err = _run(["pack", path, "--algorithms", "greedy_size"])
    if code != 0:
        _check_cli_rejection(code, err, ["trace"])


class _Reached(Exception):
    """Raised where a command would build its model: every check before it passed."""


@pytest.fixture(scope="module")
def no_model_is_built():
    import kswap.modelspec

    real = kswap.modelspec.build_model

    def build_model(*args, **kwargs):
        raise _Reached

    kswap.modelspec.build_model = build_model
    yield
    kswap.modelspec.build_model = real


option_values = st.one_of(
    st.integers(min_value=-5, max_value=10_000).map(str),
    st.text(alphabet="0123456789,.-+ eEiBGMKkx", max_size=8),
    st.text(max_size=8),
).filter(lambda s: not s.startswith("-") or s.lstrip("-")[:1].isdigit())

_MODEL_OPTIONS = {
    "profile": ["batch", "steps", "classes", "top", "input"],
    "measure": ["batch", "steps", "classes", "input"],
    "plan": ["batch", "classes", "input", "budget", "link", "device", "strategy"],
}


@FUZZ
@given(
    command=st.sampled_from(sorted(_MODEL_OPTIONS)),
    values=st.dictionaries(
        st.sampled_from(sorted({o for v in _MODEL_OPTIONS.values() for o in v})),
        option_values,
        min_size=1,
    ),
)
def test_model_commands_check_their_arguments_before_building_the_model(
    no_model_is_built, command, values
):
    values = {k: v for k, v in values.items() if k in _MODEL_OPTIONS[command]}
    argv = [command, "--model", "keras.applications.MobileNetV2"]
    if command == "plan" and "budget" not in values:
        argv += ["--budget", "1GiB"]  # the cpu device's capacity is unknown: a budget is needed
    for name, value in values.items():
        argv += [f"--{name}={value}"]
    try:
        code, err = _run(argv)
    except _Reached:
        for name in ("batch", "steps", "classes", "top"):
            if name in values:  # accepted: then it is an integer >= 1
                assert int(values[name]) >= 1, values
        return
    _check_cli_rejection(code, err, list(values) or ["model"])
