import json

import pytest

from kswap.trace import RESIDENT, UNATTRIBUTED, UNKNOWN_PHASE, Allocation, Trace


def small_trace():
    return Trace(
        buffers=(
            Allocation(size=1000, start_ns=0, end_ns=50, tier="device", layer="a", op="m/a/x"),
            Allocation(size=3000, start_ns=10, end_ns=20, tier="device", layer="b", step=0),
            Allocation(size=500, start_ns=15, end_ns=60, tier="host", layer="a"),
            Allocation(size=200, start_ns=5, end_ns=60, tier="device", alive_at_end=True),
        ),
        steps=((0, 30), (30, 60)),
        duration_ns=60,
        emulated=True,
        metadata={"model": "m"},
    )


def test_peak_timeline_and_by_layer():
    t = small_trace()
    assert t.peak_bytes("device") == 4200
    assert t.peak_bytes("host") == 500
    assert t.timeline("device").live_bytes == (1000, 1200, 4200, 1200, 200)
    assert t.by_layer() == {"b": 3000, "a": 1000, "(no layer)": 200}
    assert t.by_layer("device", time_ns=55) == {"(no layer)": 200}


def test_half_open_lifetimes():
    b = Allocation(size=1, start_ns=10, end_ns=20)
    assert b.alive_at(10) and b.alive_at(19) and not b.alive_at(20) and not b.alive_at(9)


def test_json_round_trip(tmp_path):
    t = small_trace()
    assert Trace.from_json(t.to_json()) == t
    path = tmp_path / "t.json"
    t.to_json(path)
    assert Trace.from_json(path) == t


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(size=1, start_ns=0, end_ns=1, tier="gpu"), "tier"),
        (dict(size=-1, start_ns=0, end_ns=1), "size"),
        (dict(size=1, start_ns=5, end_ns=1), "end_ns"),
    ],
)
def test_bad_allocation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Allocation(**kwargs)


def test_bad_tier_and_format():
    with pytest.raises(ValueError, match="tier='disk'"):
        small_trace().peak_bytes("disk")
    with pytest.raises(ValueError, match="Not a kswap trace"):
        Trace.from_json('{"format": "other"}')


def test_requested_bytes_peak():
    t = Trace(
        buffers=(
            Allocation(size=1024, requested_bytes=600, start_ns=0, end_ns=10),
            Allocation(size=512, requested_bytes=512, start_ns=5, end_ns=20),
            Allocation(size=256, start_ns=8, end_ns=30),  # nothing recorded: its block
        ),
        duration_ns=30,
    )
    assert t.peak_bytes() == 1024 + 512 + 256
    # each request rounded up to the allocator's 256-byte granule, as the workload counts it
    assert t.peak_bytes(requested=True) == 768 + 512 + 256
    assert t.timeline(requested=True).live_bytes == (768, 1280, 1536, 768, 256, 0)
    assert t.peak_bytes(requested=True) == t.tensor_sizes().peak_bytes()
    assert t.allocator_extra() == pytest.approx((1024 + 512 + 256) / (768 + 512 + 256) - 1)
    assert t.allocator_extra("host") == 0.0  # nothing there


def phased_trace():
    a = dict(tier="device", layer="conv")
    return Trace(
        buffers=(
            Allocation(size=100, start_ns=0, end_ns=50, phase="forward", **a),
            Allocation(size=40, start_ns=0, end_ns=50, phase="transfer", **a),
            Allocation(size=30, start_ns=0, end_ns=50, phase="backward", **a),
            Allocation(size=20, start_ns=0, end_ns=50, phase="resident", **a),
            Allocation(size=8, start_ns=0, end_ns=50, tier="device", phase="backward", layer="fc"),
            Allocation(size=5, start_ns=0, end_ns=50, tier="device"),  # no op, no phase
            Allocation(size=7, start_ns=0, end_ns=50, tier="host", layer="conv", phase="transfer"),
        ),
        duration_ns=50,
    )


def test_by_layer_phase():
    t = phased_trace()
    assert t.by_layer_phase() == {
        "conv": {"forward": 100, "backward": 30, "transfer": 40, "resident": 20},
        "fc": {"backward": 8},
        UNATTRIBUTED: {UNKNOWN_PHASE: 5},
    }
    assert list(t.by_layer_phase()["conv"]) == ["forward", "backward", "transfer", "resident"]
    assert t.by_layer_phase("host") == {"conv": {"transfer": 7}}
    assert t.by_layer_phase(time_ns=60) == {}


def test_by_layer_sums_the_phases_or_keeps_one():
    t = phased_trace()
    assert t.by_layer() == {"conv": 190, "fc": 8, UNATTRIBUTED: 5}
    assert t.by_layer(phase="backward") == {"conv": 30, "fc": 8}
    assert t.by_layer(phase="transfer") == {"conv": 40}
    assert t.by_layer(phase="update") == {}
    with pytest.raises(ValueError, match="phase='recompute'"):
        t.by_layer(phase="recompute")
    with pytest.raises(ValueError, match="phase='sideways'"):
        Allocation(size=1, start_ns=0, end_ns=1, phase="sideways")


def test_phases_round_trip_and_older_traces_load():
    t = phased_trace()
    assert Trace.from_json(t.to_json()) == t
    # a trace saved before buffers had phases
    payload = json.loads(small_trace().to_json())
    i = payload["fields"].index("phase")
    payload["fields"].pop(i)
    for row in payload["buffers"]:
        row.pop(i)
    old = Trace.from_json(json.dumps(payload))
    assert old == small_trace() and all(b.phase is None for b in old.buffers)


def test_bytes_freed_during_profiling_but_allocated_before_are_resident():
    # the profiler records no op for them (a variable's buffer replaced by its
    # update, for one): they were in use before profiling, not bytes of no layer
    t = Trace(
        buffers=(
            Allocation(size=64, start_ns=0, end_ns=30, alive_at_start=True, phase="resident"),
            Allocation(size=16, start_ns=0, end_ns=30, alive_at_start=True, layer="conv"),
            Allocation(size=8, start_ns=5, end_ns=30),
        ),
        duration_ns=30,
    )
    assert t.by_layer() == {RESIDENT: 64, "conv": 16, UNATTRIBUTED: 8}
