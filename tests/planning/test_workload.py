"""Workload and Block: validation, persistent bytes, fingerprint, JSON."""

import dataclasses
import json

import pytest

from kswap.planning import Block, Workload


def workload(**kwargs) -> Workload:
    blocks = (
        Block("conv", 4000, 0.002, 0.004, kind="conv", input_bytes=1000),
        Block("dense", 1000, 0.001, 0.002, recompute_seconds=0.0015, backward_bytes=500),
    )
    return Workload(blocks, weight_bytes=100, gradient_bytes=100, optimizer_bytes=200, **kwargs)


def test_block_defaults_and_fields():
    b = Block("a", 10, 1.0, 2.0)
    assert b.recompute_seconds == 1.0
    assert (b.input_bytes, b.forward_bytes, b.backward_bytes, b.kind) == (0, 0, 0, "other")
    assert b.swappable and b.recomputable
    assert Block("a", 10, 1, 2, recompute_seconds=0.5).recompute_seconds == 0.5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"saved_bytes": -1}, "`saved_bytes` must be an integer >= 0. Received: saved_bytes=-1"),
        ({"saved_bytes": 1.5}, "`saved_bytes` must be an integer >= 0. Received: saved_bytes=1.5"),
        ({"saved_bytes": True}, "`saved_bytes` must be an integer >= 0"),
        ({"forward_seconds": -1}, "`forward_seconds` must be a number >= 0"),
        ({"backward_seconds": float("nan")}, "`backward_seconds` must be a number >= 0"),
        ({"recompute_seconds": "1"}, "`recompute_seconds` must be a number >= 0"),
        ({"name": ""}, "`name` must be a non-empty string"),
        ({"kind": 3}, "`kind` must be a string"),
        ({"swappable": 1}, "`swappable` must be True or False"),
    ],
)
def test_block_rejects_bad_values(kwargs, message):
    args = {"name": "a", "saved_bytes": 1, "forward_seconds": 1.0, "backward_seconds": 1.0}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Block(**{**args, **kwargs})


def test_workload_validates_blocks():
    with pytest.raises(ValueError, match="Block names must be unique. Received: 'a' twice"):
        Workload((Block("a", 1, 1, 1), Block("a", 1, 1, 1)))
    with pytest.raises(ValueError, match="item 1 of type tuple"):
        Workload((Block("a", 1, 1, 1), ("b", 1, 1, 1)))
    with pytest.raises(ValueError, match="`optimizer_bytes` must be an integer >= 0"):
        Workload((), optimizer_bytes=-5)
    with pytest.raises(ValueError, match="`metadata` must be a mapping"):
        Workload((), metadata=[1])


def test_persistent_bytes_and_totals():
    w = workload(other_bytes=7)
    assert w.persistent_bytes() == 407 and w.persistent_bytes("host") == 207
    assert w.saved_bytes == 5000 and len(w) == 2 and w.names == ("conv", "dense")
    with pytest.raises(ValueError, match="Received: optimizer_state='disk'"):
        w.persistent_bytes("disk")


def test_fingerprint_follows_the_numbers_not_the_labels():
    w = workload()
    assert w.fingerprint() == workload(name="other", metadata={"batch": 3}).fingerprint()
    assert len(w.fingerprint()) == 16
    changed = Workload(w.blocks, weight_bytes=101, gradient_bytes=100, optimizer_bytes=200)
    assert changed.fingerprint() != w.fingerprint()


def test_json_round_trip(tmp_path):
    w = workload(name="m", metadata={"batch": 32}, update_seconds=0.01)
    assert Workload.from_json(w.to_json()) == w
    path = tmp_path / "w.json"
    w.to_json(path)
    assert Workload.from_json(path) == w
    assert Workload.from_json(str(path)) == w
    assert Workload.from_json(json.loads(w.to_json())) == w


def _payload(**changes):
    payload = json.loads(workload().to_json())
    payload.update(changes)
    return payload


@pytest.mark.parametrize(
    "source, message",
    [
        ("{not json", "Not a kswap workload: the text is not valid JSON"),
        ("[1, 2]", "Not a kswap workload: expected a JSON object. Received: list"),
        ('{"format": "kswap.trace/1"}', "expected format 'kswap.workload/1'"),
        ({"format": "kswap.workload/1"}, "missing field\\(s\\) fields, blocks"),
        (_payload(blocks=[[1, 2]]), "block 0 must be a list of 14 values"),
        (_payload(fields="x"), "`fields` and `blocks` must be lists"),
        (_payload(fields=["name", "saved_bytes"]), "blocks lack forward_seconds"),
        (_payload(fields=[*_payload()["fields"], "color"]), "unknown block field"),
        (_payload(weight_bytes=-1), "`weight_bytes` must be an integer >= 0"),
    ],
)
def test_from_json_errors_are_one_line_value_errors(source, message):
    with pytest.raises(ValueError, match=message) as info:
        Workload.from_json(source)
    assert "\n" not in str(info.value)


def test_scaled_times_scales_every_compute_time_and_nothing_else():
    w = workload(update_seconds=0.003, metadata={"step_seconds": 0.02, "transfer_seconds": 0.001})
    half = w.scaled_times(0.5)
    for a, b in zip(w.blocks, half.blocks, strict=True):
        assert b.forward_seconds == a.forward_seconds / 2
        assert b.backward_seconds == a.backward_seconds / 2
        assert b.recompute_seconds == a.recompute_seconds / 2
        assert (
            dataclasses.replace(
                b,
                forward_seconds=a.forward_seconds,
                backward_seconds=a.backward_seconds,
                recompute_seconds=a.recompute_seconds,
            )
            == a
        )
    assert half.update_seconds == 0.0015 and half.persistent_bytes() == w.persistent_bytes()
    assert half.metadata == {"step_seconds": 0.01, "transfer_seconds": 0.0005, "time_scale": 0.5}
    assert w.metadata == {"step_seconds": 0.02, "transfer_seconds": 0.001}  # not changed
    # scales compose
    assert half.scaled_times(4).metadata["time_scale"] == 2.0
    assert half.scaled_times(4).blocks[0].backward_seconds == 2 * w.blocks[0].backward_seconds


@pytest.mark.parametrize("factor", [0, -1, float("nan"), float("inf"), True, "2"])
def test_scaled_times_refuses_a_factor_that_is_not_positive_and_finite(factor):
    with pytest.raises(ValueError, match=r"`factor` must be a positive finite number. Received"):
        workload().scaled_times(factor)
