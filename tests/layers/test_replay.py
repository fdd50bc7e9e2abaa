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
