"""The replayed backward is built where TensorFlow's tape would build it."""

import tensorflow as tf

from kswap.layers.replay import record_ops, replay_gradients


def test_scopes_are_the_tapes_and_backward_ops_are_named_after_them():
    seen = {}

    @tf.function
    def f(x, y):
        with tf.GradientTape() as tape:
            tape.watch([x, y])
            with tf.name_scope("blk"):
                (a, b), ops, scopes = record_ops(lambda: [x * y, tf.raw_ops.Mul(x=x, y=y)])
        with tf.name_scope("elsewhere"):  # as inside a custom gradient function
            grads, _ = replay_gradients(
                ops,
                [x, y],
                [a, b],
                [tf.ones_like(a), tf.ones_like(b)],
                lambda t, _: t,
                scopes=scopes,
            )
        seen["ops"] = {op.name: op for op in ops}
        seen["scopes"] = scopes
        seen["grads"] = [g.op.name for g in grads]
        del tape
        return grads

    gx, gy = f(tf.constant(2.0), tf.constant(3.0))
    assert float(gx) == 6.0 and float(gy) == 4.0  # two products: d/dx = 2y, d/dy = 2x
    ops, scopes = seen["ops"], seen["scopes"]
    # ``x * y`` opens a scope named like its op; the raw op is made in "blk"
    (operator,) = [n for n in ops if n.startswith("blk/mul")]
    (raw,) = [n for n in ops if n.startswith("blk/Mul")]
    assert scopes[operator] == operator
    assert scopes[raw] == "blk"
    # sums of several gradients are made at the root, like the tape's
    assert all(name.startswith("AddN") for name in seen["grads"]), seen["grads"]


def test_a_block_input_read_three_times_gets_three_gradients_for_the_tape_to_sum():
    import keras
    import numpy as np

    from kswap.layers import Offload
    from kswap.layers.replay import source_uses

    bn = keras.layers.BatchNormalization()
    block = Offload(bn)
    x = tf.constant(np.random.default_rng(0).random((8, 4, 4, 16)), tf.float32)
    seen = {}

    @tf.function
    def grads(x, offload):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = block(x, training=True) if offload else bn(x, training=True)
            # the residual's gradient comes first, as in ResNet V2
            loss = tf.reduce_sum(tf.sin(y + x))
        if offload:
            seen["inputs"] = len(y.op.inputs)
        return tape.gradient(loss, x)

    plain = grads(x, False).numpy()
    offloaded = grads(x, True).numpy()
    np.testing.assert_array_equal(offloaded, plain)
    # one output, the input, two more uses of it, gamma and beta
    assert seen["inputs"] == 1 + 1 + 2 + 2
    with tf.Graph().as_default():
        t = tf.compat.v1.placeholder(tf.float32, [None, 3])
        ops = [t * 2.0, tf.raw_ops.Mul(x=t, y=t)]
        assert source_uses([o.op for o in ops], [t]) == [3]
