import pytest

from kswap.trace import RESIDENT, UNATTRIBUTED, MemoryEvent, StepMarker, build_trace, tier_of

KB = 1024


def ev(t_ns, alloc, addr, size, total, op=None, allocator="cpu_bfc"):
    return MemoryEvent(t_ns * 1000, alloc, allocator, addr, size, size, total, op)


def chain_events():
    """A hand-made chain: 1 KiB resident; a (2K) -> b (4K) -> c (1K); free a, b; c lives on.

    Allocator total after each event: 3K, 7K, 8K, 6K, 2K.
    """
    return [
        ev(100, True, 1, 2 * KB, 3 * KB, "m/l1/Relu"),
        ev(200, True, 2, 4 * KB, 7 * KB, "m/l2/MatMul"),
        ev(300, True, 3, 1 * KB, 8 * KB, "m/l3/Sum"),
        ev(400, False, 1, 2 * KB, 6 * KB),
        ev(500, False, 2, 4 * KB, 2 * KB),
    ]


def test_timeline_equals_hand_computation():
    trace = build_trace(chain_events(), emulated=True, host_scope="hs")
    tl = trace.timeline("device")
    # times relative to the first event; 1 KiB was resident before it.
    assert tl.times_ns == (0, 100, 200, 300, 400)
    assert tl.live_bytes == (3 * KB, 7 * KB, 8 * KB, 6 * KB, 2 * KB)
    assert trace.peak_bytes() == 8 * KB
    assert tl.peak_time_ns == 200
    # every kswap total equals the allocator's own running total
    for e in chain_events():
        assert tl.at((e.time_ps - 100_000) // 1000) == e.bytes_allocated


def test_lifetimes_layers_and_residents():
    layer_of = {"m/l1/Relu": "l1", "m/l2/MatMul": "l2"}.get
    trace = build_trace(
        chain_events(), emulated=True, host_scope="hs", layer_of=layer_of, residents={"l0": [100]}
    )
    by_op = {b.op: b for b in trace.buffers}
    assert (by_op["m/l1/Relu"].start_ns, by_op["m/l1/Relu"].end_ns) == (0, 300)
    assert by_op["m/l3/Sum"].alive_at_end and by_op["m/l3/Sum"].end_ns == 400
    # 1 KiB resident: 256 bytes (100 rounded up) for l0, the rest unattributed
    res = [b for b in trace.buffers if b.op == RESIDENT]
    assert sorted((b.layer or "", b.size) for b in res) == [("", 768), ("l0", 256)]
    assert trace.by_layer(time_ns=250) == {
        "l2": 4 * KB,
        "l1": 2 * KB,
        UNATTRIBUTED: KB,
        RESIDENT: 768,
        "l0": 256,
    }


def test_buffer_allocated_before_profiling_starts_at_zero():
    events = [ev(10, False, 9, 512, 0), ev(20, True, 1, 256, 256, "x")]
    trace = build_trace(events, emulated=True, host_scope="hs")
    pre = [b for b in trace.buffers if b.alive_at_start]
    assert [(b.size, b.start_ns, b.end_ns) for b in pre] == [(512, 0, 0)]
    assert trace.timeline().live_bytes == (256,)  # the 512 bytes were freed at t=0


def test_steps_and_step_peak():
    steps = [StepMarker(0, 100_000, 250_000), StepMarker(1, 250_000, 600_000)]
    trace = build_trace(chain_events(), emulated=True, host_scope="hs", steps=steps)
    assert trace.steps == ((0, 150), (150, 500))
    assert [b.step for b in trace.buffers if b.op and b.op.startswith("m/")] == [0, 0, 1]
    # step 0: starts at 1K resident, peaks at 7K; step 1 starts at 7K, peaks at 8K
    assert trace.peak_bytes(step=0) == 7 * KB
    assert trace.step_peak_bytes() == 6 * KB
    assert [trace.step_peak_bytes(step=i) for i in (0, 1)] == [6 * KB, 1 * KB]
    with pytest.raises(ValueError, match="step"):
        trace.peak_bytes(step=5)
    with pytest.raises(ValueError, match=r"`step` must be .* Received: step=2"):
        trace.step_peak_bytes(step=2)


def test_step_peak_of_the_bytes_tensors_asked_for():
    # the chain, but b asked for 2.5K of its 4K block; the 1K resident asked for its all
    events = chain_events()
    events[1] = MemoryEvent(
        200_000, True, "cpu_bfc", 2, 4 * KB, 2 * KB + 512, 7 * KB, "m/l2/MatMul"
    )
    steps = [StepMarker(0, 100_000, 250_000), StepMarker(1, 250_000, 600_000)]
    trace = build_trace(events, emulated=True, host_scope="hs", steps=steps)
    assert trace.step_peak_bytes(step=0) == 6 * KB
    # step 0 rises by a (2K) and b's 2.5K; step 1 starts with them and adds c (1K)
    assert trace.step_peak_bytes(step=0, requested=True) == 4 * KB + 512
    assert trace.step_peak_bytes(step=1, requested=True) == 1 * KB
    assert trace.step_peak_bytes(requested=True) == 4 * KB + 512


def test_emulated_host_tier_by_scope_and_gpu_tier_by_allocator():
    host = MemoryEvent(0, True, "cpu", 1, 256, 256, 256, "m/l/kswap_host_tier/DeepCopy")
    dev = MemoryEvent(0, True, "cpu", 2, 256, 256, 256, "m/l/Relu")
    assert tier_of(host, emulated=True, host_scope="kswap_host_tier") == "host"
    assert tier_of(dev, emulated=True, host_scope="kswap_host_tier") == "device"
    # TensorFlow makes a scope used twice unique: kswap_host_tier_1
    again = MemoryEvent(0, True, "cpu", 3, 256, 256, 256, "m/l/kswap_host_tier_1/DeepCopy")
    assert tier_of(again, emulated=True, host_scope="kswap_host_tier") == "host"
    other = MemoryEvent(0, True, "cpu", 4, 256, 256, 256, "m/kswap_host_tier_x/DeepCopy")
    assert tier_of(other, emulated=True, host_scope="kswap_host_tier") == "device"
    for name, tier in [
        ("GPU_0_bfc", "device"),
        ("GPU_1_bfc", "device"),
        ("gpu_host_bfc", "host"),
        ("bfc_cpu_allocator_for_gpu", "host"),
    ]:
        e = MemoryEvent(0, True, name, 1, 256, 256, 256)
        assert tier_of(e, emulated=False, host_scope="x") == tier


def test_gpu_tiers_and_host_resident():
    events = [
        ev(1, True, 1, 1024, 2048, "a", allocator="GPU_0_bfc"),
        ev(2, True, 2, 512, 512 + 256, "b", allocator="gpu_host_bfc"),
    ]
    trace = build_trace(events, emulated=False, host_scope="hs")
    assert trace.peak_bytes("device") == 2048
    assert trace.peak_bytes("host") == 768


def test_phases_of_ops_and_of_bytes_in_use_before_profiling():
    phase_of = {"m/l1/Relu": "forward", "m/l2/MatMul": "backward"}.get
    events = [ev(10, False, 9, 512, 3 * KB), *chain_events()]
    trace = build_trace(events, emulated=True, host_scope="hs", phase_of=phase_of)
    phases = {(b.op, b.alive_at_start): b.phase for b in trace.buffers}
    assert phases == {
        (None, True): "resident",  # allocated before profiling, freed during it
        ("m/l1/Relu", False): "forward",
        ("m/l2/MatMul", False): "backward",
        ("m/l3/Sum", False): None,  # phase_of does not know it
        (RESIDENT, True): "resident",
    }
    assert build_trace(chain_events(), emulated=True, host_scope="hs").buffers[0].phase is None
