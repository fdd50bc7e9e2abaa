"""plot_packing writes a PNG and explains a missing matplotlib."""

from __future__ import annotations

import sys

import pytest

from kswap.allocator import Buffer, pack, plot_packing

pytest.importorskip("matplotlib")


def test_plot_writes_a_png(tmp_path):
    plan = pack([Buffer(1024, 0, 2), Buffer(512, 1, 3), Buffer(2048, 2, 5)])
    path = tmp_path / "plan.png"
    assert plot_packing(plan, path, title="three buffers") == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_of_an_empty_plan(tmp_path):
    path = str(tmp_path / "empty.png")
    plot_packing(pack([]), path)
    with open(path, "rb") as f:
        assert f.read(4) == b"\x89PNG"


def test_missing_matplotlib_is_explained(tmp_path, monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install kswap\[plot\]"):
        plot_packing(pack([Buffer(1, 0, 1)]), tmp_path / "x.png")


def test_time_axis_has_a_unit(tmp_path):
    from kswap.allocator.plot import _time_axis
    from kswap.trace import Allocation, Trace

    assert _time_axis(pack([Buffer(1024, 0, 5 * 10**8)])) == (1, "time")  # no known unit
    for span, expected in [(10, (1, "time (ns)")), (50_000, (1000, "time (µs)"))]:
        trace = Trace(buffers=(Allocation(size=1024, start_ns=0, end_ns=span),), duration_ns=span)
        assert _time_axis(pack(trace)) == expected
    trace = Trace(
        buffers=(
            Allocation(size=1024, start_ns=0, end_ns=300_000_000),
            Allocation(size=512, start_ns=100_000_000, end_ns=542_926_200),
        ),
        steps=((0, 542_926_200),),
        duration_ns=542_926_200,
    )
    plan = pack(trace)
    assert _time_axis(plan) == (10**6, "time (ms)")
    assert plot_packing(plan, tmp_path / "trace.png") == tmp_path / "trace.png"
