"""pack() on trace objects: duck typing, tier filter, last-step clipping."""

from __future__ import annotations

import dataclasses

import pytest

from kswap.allocator import Buffer, pack


@dataclasses.dataclass(frozen=True)
class FakeAllocation:
    size: int
    start_ns: int
    end_ns: int
    tier: str = "device"


@dataclasses.dataclass(frozen=True)
class FakeTrace:
    buffers: tuple
    steps: tuple = ()


def test_trace_without_steps_packs_every_device_buffer():
    trace = FakeTrace(
        buffers=(
            FakeAllocation(1024, 0, 10),
            FakeAllocation(4096, 0, 10, tier="host"),
            FakeAllocation(512, 5, 20),
            FakeAllocation(256, 7, 7),  # no lifetime: dropped
        )
    )
    plan = pack(trace, algorithm="greedy_size")
    assert plan.buffers == (Buffer(1024, 0, 10), Buffer(512, 5, 20))
    assert plan.sources == (0, 2)
    assert plan.offsets == (0, 1024)
    plan.validate()


def test_trace_with_steps_packs_the_last_step_clipped():
    trace = FakeTrace(
        buffers=(
            FakeAllocation(1000, 0, 200),  # weights: whole trace -> [100, 200)
            FakeAllocation(512, 10, 90),  # first step only: dropped
            FakeAllocation(512, 50, 150),  # straddles: clipped to [100, 150)
            FakeAllocation(768, 120, 180),  # inside the last step
            FakeAllocation(512, 90, 100),  # ends as the step starts: dropped
            FakeAllocation(512, 200, 250),  # after the step: dropped
            FakeAllocation(2048, 110, 130, tier="host"),  # host: dropped
            FakeAllocation(256, 130, 260),  # clipped to [130, 200)
        ),
        steps=((0, 100), (100, 200)),
    )
    plan = pack(trace)
    assert plan.buffers == (
        Buffer(1000, 100, 200),
        Buffer(512, 100, 150),
        Buffer(768, 120, 180),
        Buffer(256, 130, 200),
    )
    assert plan.sources == (0, 2, 3, 7)
    assert plan.offsets[0] == 0  # alive through the whole window: at the bottom
    assert min(plan.offsets[1:]) >= 1024
    assert plan.lower_bound_bytes == 1024 + 512 + 768 + 256
    plan.validate()


def test_trace_whose_last_step_is_empty_gives_an_empty_plan():
    trace = FakeTrace(buffers=(FakeAllocation(512, 0, 10),), steps=((0, 10), (20, 30)))
    plan = pack(trace)
    assert plan.buffers == () and plan.sources == () and plan.arena_bytes == 0


def test_trace_with_empty_steps_uses_everything():
    trace = FakeTrace(buffers=(FakeAllocation(512, 0, 10), FakeAllocation(512, 20, 30)), steps=())
    plan = pack(trace)
    assert plan.offsets == (0, 0) and plan.arena_bytes == 512


def test_trace_buffer_with_bad_size_is_reported():
    trace = FakeTrace(buffers=(FakeAllocation(1.5, 0, 10),))
    with pytest.raises(ValueError, match="`size` must be an integer"):
        pack(trace)


def test_kswap_trace():
    from kswap.trace import Allocation, Trace

    trace = Trace(
        buffers=(
            Allocation(size=1024, start_ns=0, end_ns=10, tier="device"),
            Allocation(size=512, start_ns=5, end_ns=20, tier="device"),
            Allocation(size=512, start_ns=12, end_ns=20, tier="host"),
        ),
        steps=((0, 20),),
        duration_ns=20,
    )
    plan = pack(trace)
    assert plan.sources == (0, 1)
    assert plan.arena_bytes == plan.lower_bound_bytes == 1536


def test_requested_bytes_are_what_is_packed():
    from kswap.trace import Allocation, Trace

    trace = Trace(
        buffers=(
            Allocation(size=20736, requested_bytes=16384, start_ns=0, end_ns=10),
            Allocation(size=512, start_ns=5, end_ns=10),  # no request recorded
        ),
        duration_ns=10,
    )
    plan = pack(trace)
    assert [b.size for b in plan.buffers] == [16384, 512]
    assert plan.lower_bound_bytes == 16384 + 512
