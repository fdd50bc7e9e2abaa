import pytest

from kswap.trace import Allocation, Trace


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
    assert t.peak_bytes(requested=True) == 600 + 512 + 256
    assert t.timeline(requested=True).live_bytes == (600, 1112, 1368, 768, 256, 0)
