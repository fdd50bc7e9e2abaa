import glob
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from kswap import transfer
from kswap.profiler.session import new_xplane, xplane_files
from kswap.trace import read_xspace
from tests.profiler.models import chain, cnn_data, data, small_cnn


def test_peak_matches_allocator_and_timeline_matches_every_event(tmp_path):
    model = chain()
    x, y = data(model)
    trace = kswap.profile(model, x, y, steps=2, batch_size=32, logdir=str(tmp_path))
    assert trace.emulated and len(trace.steps) == 2
    allocator_peak = trace.metadata["allocator_peak_bytes"]
    assert abs(trace.peak_bytes("device") - allocator_peak) <= 0.02 * allocator_peak
    # kswap's live bytes equal the allocator's own running total after each event
    space = read_xspace(trace.metadata["xplane"])
    origin = min(space.memory_events[0].time_ps, space.steps[0].start_ps)
    tl = trace.timeline("device")
    mismatches = [
        e for e in space.memory_events if tl.at((e.time_ps - origin) // 1000) != e.bytes_allocated
    ]
    assert len(mismatches) <= 0.01 * len(space.memory_events)


def test_hand_computed_activations_of_a_chain():
    widths, batch, inputs = (256, 512, 384), 32, 128
    model = chain(widths, inputs)
    x, y = data(model)
    trace = kswap.profile(model, x, y, steps=1, batch_size=batch)
    forward = [
        b
        for b in trace.buffers
        if b.op and b.op.startswith("chain_1/d") and b.op.endswith("/MatMul")
    ]
    # one activation per layer, in order, of batch * units * 4 bytes
    assert [b.layer for b in forward] == ["d1", "d2", "d3"]
    assert [b.requested_bytes for b in forward] == [batch * w * 4 for w in widths]
    assert all(b.size >= b.requested_bytes for b in forward)
    # d1's and d2's outputs are kept for backward: each lives until the weight
    # gradient of the next layer (which reads it) has been computed
    for i, act in enumerate(forward[:2]):
        nxt = f"d{i + 2}"
        grads = [
            b
            for b in trace.buffers
            if b.layer == nxt
            and b.op.startswith("gradient_tape/")
            and b.requested_bytes == widths[i] * widths[i + 1] * 4
        ]
        assert grads, f"no weight gradient of {nxt}"
        assert act.start_ns < grads[0].start_ns < act.end_ns
    # weights are resident and attributed to their layers
    residents = {b.layer: b.size for b in trace.buffers if b.alive_at_start and b.layer}
    assert residents["d2"] == widths[0] * widths[1] * 4


def test_profile_leaves_model_state_untouched():
    keras.utils.set_random_seed(1)
    model = small_cnn()
    x, y = cnn_data()
    keras.utils.set_random_seed(2)
    reference = small_cnn(name="ref")
    reference.set_weights(model.get_weights())
    kswap.profile(model, x, y, steps=2, batch_size=16)
    for a, b in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    # training afterwards gives what it gives without kswap (same seed)
    keras.utils.set_random_seed(3)
    h1 = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"]
    keras.utils.set_random_seed(3)
    h2 = reference.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(h1, h2, rtol=1e-6)
    for a, b in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_by_layer_and_json_round_trip():
    model = small_cnn()
    x, y = cnn_data()
    trace = kswap.profile(model, x, y, steps=1, batch_size=16)
    layers = trace.by_layer()
    assert sum(layers.values()) == trace.peak_bytes()
    assert list(layers.values()) == sorted(layers.values(), reverse=True)
    assert {"conv", "head"} <= set(layers) | {b.layer for b in trace.buffers}
    assert kswap.Trace.from_json(trace.to_json()) == trace


def test_dataset_input():
    model = chain()
    x, y = data(model)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    trace = kswap.profile(model, ds, steps=2)
    assert trace.metadata["batch_size"] == 16


def test_host_tier_from_transfer_ops():
    @tf.function
    def step(t):
        h = transfer.to_host(t * 2.0)
        return transfer.to_device(h) + 1.0

    t = tf.ones((256, 256))
    np.testing.assert_array_equal(step(t).numpy(), np.full((256, 256), 3.0))
    with tf.name_scope("outer"):
        h = transfer.to_host(t)
    assert not transfer.has_gpu()
    assert h.numpy().sum() == 256 * 256


def test_xprof_converter_agrees(tmp_path):
    xprof = pytest.importorskip("xprof.convert.raw_to_tool_data")
    model = chain()
    x, y = data(model)
    trace = kswap.profile(model, x, y, steps=2, batch_size=32, logdir=str(tmp_path))
    path = glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.xplane.pb"))
    assert path == [trace.metadata["xplane"]]
    raw, _ = xprof.xspace_to_tool_data(path, "memory_profile", {})
    profile = json.loads(raw)["memoryProfilePerAllocator"]
    (allocator,) = profile
    theirs = int(profile[allocator]["profileSummary"]["peakStats"]["peakBytesInUse"])
    ours = trace.peak_bytes("device")
    assert abs(theirs - ours) <= 0.02 * ours


def test_a_trace_rewritten_at_the_same_path_is_new(tmp_path):
    # The profiler names a run's folder after the second it started: two runs
    # within one second write the same path, and the second is still new.
    run = tmp_path / "plugins" / "profile" / "2026_12_01_18_00_00"
    run.mkdir(parents=True)
    path = run / "host.xplane.pb"
    path.write_bytes(b"first")
    before = xplane_files(str(tmp_path))
    with pytest.raises(RuntimeError, match="wrote no trace"):
        new_xplane(str(tmp_path), before)
    stat = path.stat()
    path.write_bytes(b"second")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert new_xplane(str(tmp_path), before) == str(path)
