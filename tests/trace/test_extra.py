"""The allocator's extra by phase (``kswap.trace.extra``): pure, no TensorFlow."""

import pytest

from kswap.trace import Allocation, PhaseExtra, Trace, extra_by_phase

KIB = 1024


def _buffer(size, start, end, phase, requested=None, **kw):
    return Allocation(size, start, end, requested_bytes=requested, phase=phase, **kw)


def _one_step(*buffers, end):
    """A trace of one profiled step, ``[0, end)``."""
    return Trace(buffers=buffers, steps=((0, end),), duration_ns=end)


def test_each_phase_gets_its_own_rate():
    trace = Trace(
        buffers=(
            # a weight alive before the step: persistent, 25% over
            _buffer(5 * KIB, 0, 100, "resident", 4 * KIB, alive_at_start=True),
            # the forward's: 10% over in all
            _buffer(11 * KIB, 10, 60, "forward", 10 * KIB),
            _buffer(10 * KIB, 15, 40, "forward", 10 * KIB),
            _buffer(12 * KIB, 20, 55, "forward", 10 * KIB),
            # the backward's and a copy back: 50% over in all
            _buffer(16 * KIB, 50, 70, "backward", 8 * KIB),
            _buffer(8 * KIB, 52, 58, "transfer", 8 * KIB),
            # the update's, after the peak: neither phase, not alive at the peak
            _buffer(9 * KIB, 80, 90, "update", 4 * KIB),
            # another step's: ignored
            _buffer(64 * KIB, 110, 120, "backward", 8 * KIB),
        ),
        steps=((0, 100), (100, 200)),
        duration_ns=200,
    )
    found = extra_by_phase(trace, step=0)
    assert found.persistent == pytest.approx(0.25)
    assert found.forward == pytest.approx(0.1)
    assert found.backward == pytest.approx(0.5)
    # the host tier has nothing: no extra
    assert extra_by_phase(trace, "host", step=0) == PhaseExtra()


def test_a_phase_gets_the_rate_of_its_buffers_alive_together_at_its_own_peak():
    trace = _one_step(
        # twenty short-lived gradients that fit their blocks: 0% over
        *(_buffer(8 * KIB, 10 + 2 * i, 11 + 2 * i, "backward", 8 * KIB) for i in range(20)),
        # then two alive together (the backward's most bytes): 75% over
        _buffer(20 * KIB, 60, 90, "backward", 12 * KIB),
        _buffer(8 * KIB, 70, 80, "transfer", 4 * KIB),
        end=100,
    )
    # over all its allocations the backward is 7% over; at its peak, 75%
    assert extra_by_phase(trace, step=0).backward == pytest.approx(0.75)
    # a free and an allocation at the same instant: the free first
    trace = _one_step(
        _buffer(8 * KIB, 0, 10, "forward", 4 * KIB),
        _buffer(4 * KIB, 10, 20, "forward", 4 * KIB),
        end=20,
    )
    assert extra_by_phase(trace, step=0).forward == pytest.approx(1.0)


def test_a_buffer_without_a_request_counts_as_its_block_and_the_larger_of_two_is_kept():
    trace = _one_step(
        _buffer(4 * KIB, 0, 10, "forward"), _buffer(6 * KIB, 2, 8, "backward", 4 * KIB), end=10
    )
    found = extra_by_phase(trace, step=0)
    assert found == PhaseExtra(0.0, 0.0, 0.5)
    assert PhaseExtra.most([found, PhaseExtra(0.1, 0.2, 0.3)]) == PhaseExtra(0.1, 0.2, 0.5)
    assert PhaseExtra.most([]) == PhaseExtra()
    assert PhaseExtra.from_dict(found.to_dict()) == found


def test_a_negative_extra_is_refused():
    with pytest.raises(ValueError, match=r"`backward` must be >= 0. Received: backward=-0.1"):
        PhaseExtra(backward=-0.1)
