"""Swap-ins arrive one block ahead, not all at the start of backward."""

import keras
import numpy as np
import pytest

import kswap
from kswap import transfer
from kswap.trace.build import in_scope


def _chain(n=6):
    layers = [keras.Input((32, 32, 8))]
    layers += [
        keras.layers.Conv2D(8, 3, padding="same", activation="relu", name=f"c{i}") for i in range(n)
    ]
    layers += [keras.layers.GlobalAveragePooling2D(name="gap"), keras.layers.Dense(2, name="out")]
    model = keras.Sequential(layers, name="chain")
    model.compile("sgd", "mse")
    return model


def test_swap_ins_are_staggered_one_block_ahead():
    n = 6
    model = kswap.OffloadingModel(_chain(n), prefetch=1)
    rng = np.random.default_rng(0)
    x = rng.random((32, 32, 32, 8), dtype=np.float32)
    y = rng.random((32, 2), dtype=np.float32)
    trace = kswap.profile(model, x, y, steps=1, batch_size=32)
    big = [b for b in trace.buffers if b.step == 0 and b.size >= 512 * 1024 and b.op]
    restore = {
        b.layer: b.start_ns for b in big if in_scope(b.op, transfer.DEVICE_SCOPE) and b.layer
    }
    backward = {}
    for b in big:
        if b.op.startswith("gradient_tape/") and not in_scope(b.op, transfer.DEVICE_SCOPE):
            backward.setdefault(b.layer, b.start_ns)
    assert all(f"c{i}" in restore for i in range(n - 1)), restore
    # each block's tensors come back after the backward two blocks downstream
    # has begun (its upstream gradient gates them) ...
    for i in range(n - 2):
        assert restore[f"c{i}"] > backward[f"c{i + 2}"], (i, restore, backward)
    # ... in reverse order, spread over the backward instead of at its start
    order = [restore[f"c{i}"] for i in reversed(range(n - 1))]
    assert order == sorted(order)
    span = max(backward.values()) - min(backward.values())
    assert restore["c0"] - min(backward.values()) > span / 2
    # the host tier really holds the activations meanwhile
    assert trace.peak_bytes("host") > 4 * 1024 * 1024


def test_each_tensor_goes_to_host_once():
    import tensorflow as tf

    from tests.layers.helpers import build, compile_, data

    model = kswap.OffloadingModel(compile_(build("residual")))
    x, y = data(model, 8)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        return tape.gradient(loss, model.trainable_weights)

    graph = step.get_concrete_function(tf.constant(x), tf.constant(y)).graph
    copies = [
        op
        for op in graph.get_operations()
        if op.type == "DeepCopy" and in_scope(op.name, transfer.HOST_SCOPE)
    ]
    sources = [op.inputs[0].name for op in copies]
    assert len(copies) > 5
    assert len(set(sources)) == len(sources), sorted(sources)
    # the residual branch point (r1's output) is read by r1's own backward and
    # by both consumers' blocks, yet has one host copy
    assert sum("r1" in s for s in sources) == 1


def _profile_chain(n, prefetch):
    model = kswap.OffloadingModel(_chain(n), prefetch=prefetch)
    rng = np.random.default_rng(0)
    x = rng.random((32, 32, 32, 8), dtype=np.float32)
    y = rng.random((32, 2), dtype=np.float32)
    return kswap.profile(model, x, y, steps=1, batch_size=32)


def test_prefetch_zero_waits_for_the_next_block_to_finish():
    n = 5
    trace = _profile_chain(n, prefetch=0)
    big = [b for b in trace.buffers if b.step == 0 and b.size >= 512 * 1024 and b.op and b.layer]
    restore = {b.layer: b.start_ns for b in big if in_scope(b.op, transfer.DEVICE_SCOPE)}
    made: dict[str, list[int]] = {}
    for b in trace.buffers:
        if b.step == 0 and b.op and b.layer and b.op.startswith("gradient_tape/"):
            if not in_scope(b.op, transfer.DEVICE_SCOPE):
                made.setdefault(b.layer, []).append(b.start_ns)
    for i in range(n - 1):
        # everything block i + 1's backward allocates (input and kernel
        # gradients) comes before block i's tensors are brought back
        assert restore[f"c{i}"] > max(made[f"c{i + 1}"]), (i, restore, made)


def test_branches_run_their_backwards_one_at_a_time():
    """A residual block's two paths: one layer's backward allocates at a time.

    With ``prefetch=0`` strictly; with ``prefetch >= 1`` weight gradients may
    still overlap the next layer's backward.
    """
    inp = keras.Input((32, 32, 8))
    paths = []
    for p in ("a", "b"):
        h = keras.layers.Conv2D(16, 3, padding="same", name=f"{p}1")(inp)
        h = keras.layers.BatchNormalization(name=f"{p}2")(h)
        paths.append(keras.layers.Conv2D(8, 3, padding="same", name=f"{p}3")(h))
    h = keras.layers.Add(name="add")(paths)
    out = keras.layers.Dense(2, name="out")(keras.layers.GlobalAveragePooling2D(name="gap")(h))
    model = keras.Model(inp, out)
    model.compile("sgd", "mse")
    rng = np.random.default_rng(0)
    x = rng.random((32, 32, 32, 8), dtype=np.float32)
    y = rng.random((32, 2), dtype=np.float32)
    trace = kswap.profile(kswap.OffloadingModel(model, prefetch=0), x, y, steps=1, batch_size=32)
    spans: dict[str, list[int]] = {}
    layers = {f"{p}{i}" for p in "ab" for i in (1, 2, 3)}  # the two paths ("add" is neither)
    for b in trace.buffers:
        if b.step == 0 and b.op and b.layer and b.op.startswith("gradient_tape/"):
            if not in_scope(b.op, transfer.DEVICE_SCOPE) and b.layer in layers:
                span = spans.setdefault(b.layer, [b.start_ns, b.start_ns])
                span[0], span[1] = min(span[0], b.start_ns), max(span[1], b.start_ns)
    assert len(spans) == 6, spans
    ordered = sorted(spans.values())
    for (_, last), (first, _) in zip(ordered, ordered[1:], strict=False):
        assert last < first, spans


def _gelu_mlp(n):
    """Dense blocks whose backward reads more than their input: GELU's pre-activation."""
    layers = [keras.Input((256,))]
    for i in range(n):
        layers.append(keras.layers.Dense(1024, activation="gelu", name=f"c{i}"))
    layers.append(keras.layers.Dense(2, name="out"))
    model = keras.Sequential(layers, name="gelu_mlp")
    model.compile("sgd", "mse")
    return model


def test_a_recomputed_block_runs_again_in_backward_not_when_its_input_exists():
    """``recompute`` keeps a block's input on the device; the re-run waits for its gradient.

    Without that wait TensorFlow's executor runs the re-run as soon as the
    input exists, during the forward, and the peak is the kept model's.
    """
    from kswap.tuning import apply_plan

    n = 8
    rng = np.random.default_rng(0)
    x = rng.random((512, 256), dtype=np.float32)
    y = rng.random((512, 2), dtype=np.float32)
    peaks = {}
    for action in ("keep", "recompute"):
        model = kswap.OffloadingModel(_gelu_mlp(n))
        apply_plan(model, action)
        trace = kswap.profile(model, x, y, steps=1, batch_size=512)
        peaks[action] = trace.step_peak_bytes()  # one process holds both models' weights
    first: dict[str, int] = {}
    for b in trace.buffers:  # the recomputed model's
        if b.step == 0 and b.layer and b.op and b.op.startswith("gradient_tape/"):
            first[b.layer] = min(first.get(b.layer, b.start_ns), b.start_ns)
    # each block's backward (its re-run first) starts after the one downstream of it
    for i in range(n - 1):
        assert first[f"c{i}"] > first[f"c{i + 1}"], (i, first)
    # a block keeps its input (2 MiB), not also GELU's intermediates (measured:
    # a step peak of 27 MiB against 69 MiB; 67 MiB without the wait)
    assert peaks["recompute"] < 0.6 * peaks["keep"], peaks


@pytest.fixture(scope="module")
def one_thread():
    """The chain, then MobileNetV3Small, with one inter-op thread, in one fresh process."""
    return _one_thread_main("--zoo", "mobilenet_v3_small")


def test_with_one_inter_op_thread_the_copies_are_waited_for_and_training_is_exact(one_thread):
    # TensorFlow's executor with one inter-op thread runs the chain of forward ops
    # (and of input gradients) inline and queues the rest behind it: without the
    # gates the copies to the host ran after the whole forward, the weight
    # gradients (which read the swapped-in tensors) after the whole backward, and
    # the offloaded step peaked above the plain one (46.8 against 42.3 MiB here;
    # `python -m tests.layers.one_thread_main --no-gate`)
    result = one_thread
    assert result["losses_identical"] and result["weights_identical"], result
    assert result["kswap_peak_bytes"] < 0.6 * result["plain_peak_bytes"], result


def test_replicas_sharing_the_threads_get_the_one_thread_gates(monkeypatch):
    # MirroredStrategy's replicas run on the same inter-op threads: with two
    # replicas on two threads each replica's copies to the host ran after its
    # whole forward (66 MiB per replica against 37 MiB with the gates, six
    # convolutions on two logical CPUs)
    from kswap import transfer

    monkeypatch.setattr(transfer, "one_inter_op_thread", lambda: False)
    for threads, replicas, gated in [(2, 1, False), (2, 2, True), (3, 2, True), (4, 2, False)]:
        monkeypatch.setattr(transfer, "inter_op_threads", lambda t=threads: t)
        monkeypatch.setattr(transfer, "local_replicas", lambda r=replicas: r)
        assert transfer.one_thread_per_replica() == gated, (threads, replicas)
    monkeypatch.undo()
    assert transfer.local_replicas() == 1  # no strategy


@pytest.mark.slow
def test_with_one_inter_op_thread_batch_normalization_trains_bit_identically(one_thread):
    # the swap-ins wait for the block before's weight gradients; a control edge out
    # of BatchNormalization's scale gradient (a Mul) made MobileNetV3Small's weights
    # 4.6e-4 apart after 5 steps, where the remapper switch changes nothing
    result = one_thread
    assert not any(result["deviation"].values()), result


def _one_thread_main(*args: str) -> dict:
    """``python -m tests.layers.one_thread_main *args`` in a fresh process: its JSON."""
    import json

    from tests.scripts import run_python

    proc = run_python("-m", "tests.layers.one_thread_main", *args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["inter_op_threads"] == 1
    return result
