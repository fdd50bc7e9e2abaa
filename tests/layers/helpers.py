"""Side-by-side training of a model and its offloaded twin."""

import keras
import numpy as np

from kswap import transfer
from tests.layers.models import BUILDERS, SEED


def build(kind):
    keras.utils.set_random_seed(SEED)
    return BUILDERS[kind]()


def data(model, n=32, seed=0):
    rng = np.random.default_rng(seed)
    xs = [rng.random((n, *t.shape[1:]), dtype=np.float32) for t in model.inputs]
    ys = [rng.random((n, *t.shape[1:]), dtype=np.float32) for t in model.outputs]
    x = xs[0] if len(xs) == 1 else xs
    y = ys[0] if len(ys) == 1 else ys
    return x, y


def compile_(model, optimizer="adam"):
    losses = ["mse"] * len(model.outputs)
    model.compile(optimizer=optimizer, loss=losses if len(losses) > 1 else losses[0])
    return model


def assert_same_state(a, b, rtol=0.0):
    """Weights and non-trainable state (BN moving statistics) agree."""
    for wa, wb in zip(a.weights, b.weights, strict=True):
        va, vb = np.asarray(wa.numpy()), np.asarray(wb.numpy())
        np.testing.assert_allclose(
            vb, va, rtol=rtol, atol=rtol * float(np.max(np.abs(va)) + 1e-30), err_msg=wa.path
        )


def trained_references(fit):
    """``get(kind)``: the plain model of ``kind`` and its ``fit(model, *data(model))``.

    Each kind is trained once, from :func:`build` with the optimizer built in
    ``fit`` as a user would; a module-scoped fixture returns this so that the
    tests training twins on the same arrays share it (they only read it).
    """
    runs = {}

    def get(kind):
        if kind not in runs:
            ref = compile_(build(kind))
            runs[kind] = ref, fit(ref, *data(ref))
        return runs[kind]

    return get


onednn_enabled = transfer.onednn_enabled


def cpu_has_amx() -> bool:
    """Whether this machine's CPU has AMX tiles (Intel Sapphire Rapids and later, on Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " amx_tile" in line for line in f)
    except OSError:
        return False


def mirrored_strategy(replicas: int = 2):
    """MirroredStrategy over ``replicas`` GPUs if there are, else logical CPUs.

    Call it before TensorFlow runs any op: logical devices are set up once.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= replicas:
        return tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(replicas)])
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * replicas
    )
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
