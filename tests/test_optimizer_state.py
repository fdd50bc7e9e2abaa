"""Optimizer state in host memory: same numbers, host bytes, and back."""

import keras
import numpy as np
import pytest

import kswap
from kswap.optimizer_state import host_variables, place_optimizer_state
from kswap.profiler import OPTIMIZER
from tests.layers.helpers import assert_same_state, build, compile_, data

OPTIMIZERS = {
    "adam": lambda: keras.optimizers.Adam(1e-2),
    "sgd_momentum": lambda: keras.optimizers.SGD(1e-2, momentum=0.9),
    "rmsprop": lambda: keras.optimizers.RMSprop(1e-3),
}


def _slots(optimizer):
    return [v for v in optimizer.variables if len(v.shape) > 0]


def _fit(model, x, y, seed=5):
    keras.utils.set_random_seed(seed)
    return model.fit(x, y, batch_size=8, shuffle=False, verbose=0).history["loss"]


def _assert_same_optimizer(a, b):
    for va, vb in zip(a.variables, b.variables, strict=True):
        np.testing.assert_array_equal(vb.numpy(), va.numpy(), err_msg=va.path)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_host_state_trains_exactly(name):
    ref = compile_(build("residual"), optimizer=OPTIMIZERS[name]())
    # built before fit, as moving the slots builds the twin's (then fit traces
    # each step once, not a second time after creating the slots)
    ref.optimizer.build(ref.trainable_variables)
    off = kswap.OffloadingModel(
        compile_(build("residual"), optimizer=OPTIMIZERS[name]()), optimizer_state="host"
    )
    assert len(host_variables(off.optimizer)) == len(_slots(off.optimizer)) > 0
    x, y = data(ref)
    np.testing.assert_array_equal(_fit(off, x, y), _fit(ref, x, y))
    assert_same_state(ref, off)
    _assert_same_optimizer(ref.optimizer, off.optimizer)


def test_moves_keep_the_variables_and_their_values():
    model = compile_(build("sequential"))
    x, y = data(model)
    _fit(model, x, y)  # state worth keeping
    before = {id(v): v.numpy() for v in model.optimizer.variables}
    off = kswap.OffloadingModel(model, optimizer_state="host")
    assert off.optimizer is model.optimizer
    assert {id(v) for v in off.optimizer.variables} == set(before)
    assert kswap.OffloadingModel(off, optimizer_state="host").optimizer is off.optimizer
    plain = kswap.strip(off)
    assert host_variables(plain.optimizer) == []
    for v in plain.optimizer.variables:
        np.testing.assert_array_equal(v.numpy(), before[id(v)])


def test_steps_traced_before_the_move_are_retraced():
    model = compile_(build("sequential"))
    twin = compile_(build("sequential"))
    x, y = data(model)
    _fit(model, x, y)
    _fit(twin, x, y)
    kswap.OffloadingModel(model, optimizer_state="host")
    # the original trains on with the moved state, not with the old variables
    np.testing.assert_array_equal(_fit(model, x, y, seed=6), _fit(twin, x, y, seed=6))
    _assert_same_optimizer(twin.optimizer, model.optimizer)


def test_a_move_frees_the_old_slots_though_a_traced_step_captured_them():
    # The step fit traced holds the old slot variables' handles; without
    # releasing them, their buffers stay allocated (on a GPU: on the device).
    import tensorflow as tf

    # slots of 2 MiB, far above what else the process allocates meanwhile
    # (20 KiB once, under load: the test's own small model had 40 KiB of slots)
    model = keras.Sequential(
        [keras.Input((512,)), keras.layers.Dense(512, name="wide"), keras.layers.Dense(2)]
    )
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 512), dtype=np.float32), rng.random((32, 2), dtype=np.float32)
    _fit(model, x, y)
    slot_bytes = sum(int(np.prod(v.shape)) * 4 for v in _slots(model.optimizer))

    def live():
        return tf.config.experimental.get_memory_info("CPU:0")["current"]

    before = live()
    place_optimizer_state(model.optimizer, "host")
    # emulated tiers share CPU:0's allocator: the new host slots replace the old
    assert live() - before < slot_bytes // 2
    model.train_function = None
    _fit(model, x, y)  # the retraced step trains with the moved slots


def test_mixed_precision_moves_the_inner_optimizers_slots():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        ref = compile_(build("sequential"))
        off = kswap.OffloadingModel(compile_(build("sequential")), optimizer_state="host")
        assert isinstance(off.optimizer, keras.optimizers.LossScaleOptimizer)
        inner = off.optimizer.inner_optimizer
        assert {id(v) for v in _slots(inner)} <= {id(v) for v in host_variables(off.optimizer)}
        x, y = data(ref, 16)
        np.testing.assert_array_equal(_fit(off, x, y), _fit(ref, x, y))
        assert_same_state(ref, off)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_profile_counts_the_slots_as_host_bytes():
    model = kswap.OffloadingModel(compile_(build("sequential")), optimizer_state="host")
    x, y = data(model, 32)
    trace = kswap.profile(model, x, y, steps=1, batch_size=8)
    granule = lambda n: -(-n // 256) * 256  # noqa: E731
    slots = sum(granule(v.numpy().nbytes) for v in host_variables(model.optimizer))
    on_host = [b for b in trace.tier("host") if b.alive_at_start and b.layer == OPTIMIZER]
    on_device = [b for b in trace.tier("device") if b.alive_at_start and b.layer == OPTIMIZER]
    assert sum(b.size for b in on_host) == slots
    # what stays: the scalars (iteration count, learning rate)
    scalars = [v for v in model.optimizer.variables if len(v.shape) == 0]
    assert sum(b.size for b in on_device) == 256 * len(scalars)


def test_isolated_measure_keeps_the_state_on_the_host():
    # Adam's slots (8 MiB) move from what the device holds when a step begins
    # (its peak less the step's own) to the host tier. The whole peaks are not
    # compared: the executor's order moves the plain step's own peak by one
    # 4 MiB gradient (8.4 or 12.6 MiB), which once left the offloaded peak
    # 4 KiB above the plain one less half the slots.
    inp = keras.Input((1024,))
    model = compile_(keras.Model(inp, keras.layers.Dense(4)(keras.layers.Dense(1024)(inp))))
    x, y = data(model, 32)
    device = kswap.measure(model, x, y, steps=1, batch_size=8, isolate=True)
    off = kswap.OffloadingModel(model, optimizer_state="host", policy=lambda layer: False)
    host = kswap.measure(off, x, y, steps=1, batch_size=8, isolate=True)
    slots = sum(v.numpy().nbytes for v in host_variables(off.optimizer))
    assert host.host_peak_bytes >= slots
    held_plain = device.device_peak_bytes - device.step_peak_bytes
    held_host = host.device_peak_bytes - host.step_peak_bytes
    assert held_host <= held_plain - slots // 2, (device, host)


def test_bad_input():
    model = compile_(build("sequential"))
    with pytest.raises(ValueError, match=r"`optimizer_state` must be one of .*'gpu'"):
        kswap.OffloadingModel(model, optimizer_state="gpu")
    with pytest.raises(ValueError, match="has no optimizer.*uncompiled"):
        kswap.OffloadingModel(build("sequential"), optimizer_state="host")
    with pytest.raises(ValueError, match="not built yet.*variables=None"):
        place_optimizer_state(keras.optimizers.Adam(), "host")
    with pytest.raises(ValueError, match="`optimizer` must be a Keras optimizer"):
        place_optimizer_state("adam", "host")


def test_save_and_load_keep_the_state_values(tmp_path):
    off = kswap.OffloadingModel(compile_(build("residual")), optimizer_state="host")
    x, y = data(off)
    _fit(off, x, y)
    off.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    # the values come back; the placement is not saved (the slots load on the device)
    _assert_same_optimizer(off.optimizer, loaded.optimizer)
    assert host_variables(loaded.optimizer) == []
    # moved again, it trains on like the same file loaded plain (Keras does not
    # save seed-generator states, so compare loaded with loaded)
    again = kswap.OffloadingModel(loaded, optimizer_state="host")
    plain = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(_fit(again, x, y, seed=7), _fit(plain, x, y, seed=7))
    _assert_same_optimizer(plain.optimizer, again.optimizer)
