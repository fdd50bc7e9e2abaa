"""OffloadingModel / strip / Offload: the Keras contract."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from kswap.layers import Offload
from tests.layers.helpers import assert_same_state, build, compile_, data


def _offloaded(model):
    return [layer for layer in model._flatten_layers() if isinstance(layer, Offload)]


def test_shares_weights_and_optimizer():
    model = compile_(build("residual"))
    off = kswap.OffloadingModel(model)
    assert {id(v) for v in off.weights} == {id(v) for v in model.weights}
    assert off.optimizer is model.optimizer
    assert off.get_layer("c1").layer is model.get_layer("c1")


def _traces_of_one_fit(model, x, y) -> int:
    """How many times ``fit`` traces ``model``'s train step (Python runs only when tracing)."""
    count = [0]
    step = model.train_step

    def counted(data):
        count[0] += 1
        return step(data)

    model.train_step = counted
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    return count[0]


def test_the_optimizer_is_built_so_fit_traces_the_step_once():
    ref = compile_(build("residual"))
    off = kswap.OffloadingModel(compile_(build("residual")))
    assert not ref.optimizer.built and off.optimizer.built
    x, y = data(ref)
    keras.utils.set_random_seed(1)
    # the plain model's optimizer is built in its first trace, so tf.function traces again
    assert _traces_of_one_fit(ref, x, y) == 2
    keras.utils.set_random_seed(1)
    assert _traces_of_one_fit(off, x, y) == 1
    assert_same_state(ref, off)
    for a, b in zip(ref.optimizer.variables, off.optimizer.variables, strict=True):
        np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=a.path)  # slots, step


def test_nested_models_are_wrapped_inside():
    model = compile_(build("nested"))
    off = kswap.OffloadingModel(model)
    inner = off.get_layer("inner")
    assert isinstance(inner, keras.Model)
    assert isinstance(inner.get_layer("inner_d"), Offload)


def test_idempotent_and_strip_inverts():
    model = compile_(build("sequential"))
    once = kswap.OffloadingModel(model)
    twice = kswap.OffloadingModel(once)
    assert [type(layer).__name__ for layer in twice.layers] == [
        type(layer).__name__ for layer in once.layers
    ]
    assert all(not isinstance(o.layer, Offload) for o in _offloaded(twice))
    plain = kswap.strip(twice)
    assert not _offloaded(plain)
    assert [layer.name for layer in plain.layers] == [layer.name for layer in model.layers]
    assert all(a is b for a, b in zip(plain.layers, model.layers, strict=True))


def test_conv_policy_wraps_convolutions_and_their_input_producers():
    off = kswap.OffloadingModel(compile_(build("sequential")), policy="conv")
    # pool produces dw's input; bn1 (which reads its own input) is left alone
    assert sorted(o.name for o in _offloaded(off)) == ["c1", "dw", "pool", "sep"]
    res = kswap.OffloadingModel(compile_(build("residual")), policy="conv")
    assert sorted(o.name for o in _offloaded(res)) == ["add", "branch", "c1", "c2", "pad", "r1"]


def test_save_and_load_round_trip(tmp_path):
    model = compile_(build("residual"))
    off = kswap.OffloadingModel(model)
    x, y = data(model, 16)
    off.fit(x, y, batch_size=8, verbose=0)
    path = tmp_path / "m.keras"
    off.save(path)
    loaded = keras.models.load_model(path)
    assert len(_offloaded(loaded)) == len(_offloaded(off))
    for a, b in zip(off.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), off.predict(x, verbose=0))
    # it trains on exactly like the plain model saved at the same point (Keras
    # does not save seed-generator states, so compare loaded with loaded)
    kswap.strip(off).save(tmp_path / "plain.keras")
    plain = keras.models.load_model(tmp_path / "plain.keras")
    keras.utils.set_random_seed(2)
    h1 = plain.fit(x, y, batch_size=8, verbose=0, shuffle=False).history["loss"]
    keras.utils.set_random_seed(2)
    h2 = loaded.fit(x, y, batch_size=8, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_array_equal(h2, h1)
    assert_same_state(plain, loaded)


def test_custom_gradient_tape_loop():
    ref = build("residual")
    off = kswap.OffloadingModel(build("residual"))
    x, y = data(ref, 8)
    results = []
    for model in (ref, off):
        opt = keras.optimizers.SGD(0.1)

        @tf.function
        def step(model=model, opt=opt):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
            grads = tape.gradient(loss, model.trainable_weights)
            opt.apply_gradients(zip(grads, model.trainable_weights, strict=True))
            return loss

        keras.utils.set_random_seed(4)
        results.append([float(step()) for _ in range(3)])
    assert results[0] == results[1]
    assert_same_state(ref, off)


@pytest.mark.parametrize("policy_name", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision(policy_name):
    keras.mixed_precision.set_global_policy(policy_name)
    try:
        ref = compile_(build("sequential"), optimizer="sgd")
        off = kswap.OffloadingModel(compile_(build("sequential"), optimizer="sgd"))
        x, y = data(ref, 16)
        keras.utils.set_random_seed(6)
        h1 = ref.fit(x, y, batch_size=8, verbose=0, shuffle=False).history["loss"]
        keras.utils.set_random_seed(6)
        h2 = off.fit(x, y, batch_size=8, verbose=0, shuffle=False).history["loss"]
        np.testing.assert_array_equal(h2, h1)
        assert_same_state(ref, off)
        assert not any(o.fallbacks for o in _offloaded(off))
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_run_eagerly_warns_and_recomputes_exactly():
    ref = compile_(build("sequential"))
    off = kswap.OffloadingModel(compile_(build("sequential")))
    off.compile(optimizer=off.optimizer, loss="mse", run_eagerly=True)
    ref.compile(optimizer=ref.optimizer, loss="mse", run_eagerly=True)
    x, y = data(ref, 16)
    import kswap.layers.offload as offload_module

    offload_module._warned_eager = False
    keras.utils.set_random_seed(8)
    h1 = ref.fit(x, y, batch_size=8, verbose=0, shuffle=False).history["loss"]
    keras.utils.set_random_seed(8)
    with pytest.warns(UserWarning, match="synchronous"):
        h2 = off.fit(x, y, batch_size=8, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(h2, h1, rtol=1e-6)
    assert_same_state(ref, off, rtol=1e-6)


def test_jit_compile_true_is_refused():
    model = build("sequential")
    model.compile("sgd", "mse", jit_compile=True)
    with pytest.raises(ValueError, match="jit_compile=True"):
        kswap.OffloadingModel(model)
    off = kswap.OffloadingModel(compile_(build("sequential")))
    assert all(o.supports_jit is False for o in _offloaded(off))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(policy="everything"), r"`policy` must be one of .* Received: policy='everything'"),
        (dict(policy=3), r"`policy` must be .* Received: policy=3 of type int"),
        (dict(policy=["c1", "nope"]), r"names layers the model does not have: \['nope'\]"),
        (dict(prefetch=-1), r"`prefetch` must be an integer >= 0. Received: prefetch=-1"),
        (dict(prefetch=1.5), r"Received: prefetch=1.5"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kswap.OffloadingModel(build("sequential"), **kwargs)


def test_subclassed_and_non_models():
    class Sub(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(2)

        def call(self, x):
            return self.d(x)

    with pytest.raises(ValueError, match="supports Sequential and functional models"):
        kswap.OffloadingModel(Sub())
    with pytest.raises(ValueError, match="`model` must be a keras.Model"):
        kswap.OffloadingModel(keras.layers.Dense(2))
    with pytest.raises(ValueError, match="`layer` must be a keras.layers.Layer"):
        Offload("dense")
    with pytest.raises(ValueError, match="already offloaded"):
        Offload(Offload(keras.layers.Dense(2)))


def test_inference_makes_no_host_copies():
    model = compile_(build("sequential"))
    off = kswap.OffloadingModel(model)
    x, y = data(model, 16)

    @tf.function
    def infer(x):
        return off(x, training=False)

    ops = infer.get_concrete_function(tf.constant(x)).graph.get_operations()
    assert not [op for op in ops if "kswap_host_tier" in op.name]
    np.testing.assert_array_equal(off.predict(x, verbose=0), model.predict(x, verbose=0))


@keras.saving.register_keras_serializable(package="tests")
class GatedNoise(keras.layers.Layer):
    """Control flow (replay cannot follow it), random numbers and state."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(11)

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")
        self.calls = self.add_weight(shape=(), initializer="zeros", trainable=False)

    def call(self, x, training=None):
        if training:
            self.calls.assign_add(1.0)
            x = keras.random.dropout(x, 0.3, seed=self.seed_generator)
        return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.sin(x) * self.w, lambda: x * self.w)


def _gated():
    return keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(8, name="d"),
            GatedNoise(name="gate"),
            keras.layers.Dense(2, name="out"),
        ],
        name="gated",
    )


def test_recompute_fallback_reuses_seeds_and_updates_state_once():
    keras.utils.set_random_seed(0)
    ref = compile_(_gated())
    keras.utils.set_random_seed(0)
    off = kswap.OffloadingModel(compile_(_gated()))
    x, y = data(ref, 16)
    keras.utils.set_random_seed(3)
    h1 = ref.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history["loss"]
    keras.utils.set_random_seed(3)
    h2 = off.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history["loss"]
    gate = off.get_layer("gate")
    assert gate.fallbacks and "control flow" in gate.fallbacks[0]
    np.testing.assert_array_equal(h2, h1)
    assert float(gate.layer.calls.numpy()) == 4.0  # once per step, not twice
    assert_same_state(ref, off)
