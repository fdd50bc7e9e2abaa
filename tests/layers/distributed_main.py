"""Trains a model with and without kswap under a tf.distribute strategy.

Run as a script (each strategy needs TensorFlow configured from the start):
    python -m tests.layers.distributed_main mirrored
    python -m tests.layers.distributed_main multiworker WORKER_INDEX PORT0 PORT1
Prints one JSON line: the losses and a weight checksum of both runs.

``mirrored`` trains with ``model.fit``. ``multiworker`` uses a custom loop
(``strategy.run``): Keras 3's ``fit`` does not run under
MultiWorkerMirroredStrategy (keras-team/keras#20585), custom loops do.
"""

import hashlib
import json
import os
import sys

GLOBAL_BATCH = 8


def main(argv):
    mode = argv[0]
    if mode == "multiworker":
        index, ports = int(argv[1]), argv[2:4]
        os.environ["TF_CONFIG"] = json.dumps(
            {
                "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                "task": {"type": "worker", "index": index},
            }
        )
    import tensorflow as tf

    import kswap

    if mode == "mirrored":
        from tests.layers.helpers import mirrored_strategy

        strategy = mirrored_strategy(2)
    else:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()

    from tests.layers.helpers import build, compile_

    def train(model, x, y):
        if mode == "mirrored":
            history = model.fit(x, y, batch_size=GLOBAL_BATCH, shuffle=False, verbose=0)
            return history.history["loss"]
        return _custom_loop(strategy, model, x, y, tf)

    results = {name: _trained(strategy, name == "kswap", train) for name in ("plain", "kswap")}
    if mode == "mirrored":
        results["host_state_errors"] = _host_state_errors(strategy, build, compile_, kswap)
        results["autotune"] = _autotune(strategy, kswap)
        runs = {mode: _chain_peaks(strategy, kswap, mode == "kswap") for mode in ("plain", "kswap")}
        results["chain"] = {mode: peaks for mode, (peaks, _) in runs.items()}
        results["scratch_overlaps"] = {mode: n for mode, (_, n) in runs.items()}
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, **results}))


def _trained(strategy, offload: bool, train, seed: int = 3) -> dict:
    """The residual model built in the strategy's scope (offloaded or not), seeded, trained.

    ``train(model, x, y)`` returns the losses; the result holds them and the
    SHA-256 of every weight's bytes (equal digests: bit-identical weights).
    """
    import keras
    import numpy as np

    import kswap
    from tests.layers.helpers import build, compile_, data

    with strategy.scope():
        model = compile_(build("residual"), optimizer="sgd")
        if offload:
            model = kswap.OffloadingModel(model)
    x, y = data(model, 32)
    keras.utils.set_random_seed(seed)
    losses = train(model, x, y)
    digest = hashlib.sha256()
    for w in model.weights:  # every bit of every weight, in the model's order
        digest.update(np.ascontiguousarray(w.numpy()).tobytes())
    return {"loss": losses, "weights": digest.hexdigest()}


def _autotune(strategy, kswap):
    """Plain against kswap.AutoTune in ``fit`` under the strategy: 12 steps, enough for a round."""
    # a byte budget: a ~32 MiB transient of each replica is most of this model's
    # peak, and whether the two coincide decides a fraction's baseline (34 or 67
    # MiB), so a fraction may have no plan in one run and one in the next
    tune = kswap.AutoTune("1GiB", profile_steps=1, link="pcie4", verbose=0)

    def train(callbacks):
        def fit(model, x, y):
            kwargs = dict(batch_size=GLOBAL_BATCH, epochs=3, shuffle=False, verbose=0)
            return model.fit(x, y, callbacks=callbacks, **kwargs).history["loss"]

        return fit

    out = {
        "plain": _trained(strategy, False, train([])),
        "tuned": _trained(strategy, True, train([tune])),
    }
    out["rounds"] = len(tune.rounds)
    out["start_peak_bytes"] = tune.start_peak_bytes
    out["measured"] = [r.measured_peak_bytes for r in tune.rounds]
    out["replicas"] = tune.replicas
    out["baseline_peak_bytes"] = tune.baseline_peak_bytes
    out["budget_bytes"] = tune.budget_bytes
    out["profile"] = _replica_peaks(strategy, kswap)
    return out


def _replica_peaks(strategy, kswap):
    """kswap.profile of the plain model under the strategy: each replica's peak and the whole's."""
    from kswap.trace.replicas import replica_peaks
    from tests.layers.helpers import build, compile_, data

    with strategy.scope():
        model = compile_(build("residual"), optimizer="sgd")
    x, y = data(model, 32)
    trace = kswap.profile(model, x, y, steps=1, batch_size=GLOBAL_BATCH)
    peaks = replica_peaks(trace, "device", len(trace.steps) - 1 if trace.steps else None)
    return {"replicas": {str(k): v for k, v in peaks.items()}, "whole": trace.peak_bytes("device")}


def _chain_peaks(strategy, kswap, offload: bool) -> tuple[dict, int]:
    """Each replica's device peak for six convolutions, plain or offloaded (every block swapped).

    Two replicas on two cores share the inter-op threads: without kswap's
    one-thread gates, each replica's copies to the host ran after its whole
    forward, and the offloaded model peaked higher than the plain one.
    Also how many of a convolution's gradient scratch buffers (TensorFlow's
    own CPU kernels, without oneDNN) were alive beside another of the same
    layer and replica: kswap chains a swapped block's two gradients there.
    """
    import keras
    import numpy as np

    from kswap.trace.replicas import replica_of, replica_peaks

    with strategy.scope():
        keras.utils.set_random_seed(1)
        h = inp = keras.Input((32, 32, 8))
        for i in range(6):
            h = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name=f"c{i}")(h)
        h = keras.layers.GlobalAveragePooling2D(name="gap")(h)
        model = keras.Model(inp, keras.layers.Dense(4, name="d")(h))
        if offload:
            model = kswap.OffloadingModel(model)
        model.compile("sgd", "mse")
    rng = np.random.default_rng(0)
    x = rng.random((48, 32, 32, 8), dtype=np.float32)
    y = rng.random((48, 4), dtype=np.float32)
    trace = kswap.profile(model, x, y, steps=2, batch_size=16)
    peaks = replica_peaks(trace, "device", len(trace.steps) - 1)
    temps = [
        b
        for b in trace.tier("device")
        if b.region_type == "temp" and b.layer and "Backprop" in (b.op or "")
    ]
    overlaps = sum(
        1
        for b in temps
        for o in temps
        if o is not b
        and (o.layer, replica_of(o)) == (b.layer, replica_of(b))
        and o.start_ns <= b.start_ns < o.end_ns
    )
    return {str(k): v for k, v in peaks.items()}, overlaps


def _host_state_errors(strategy, build, compile_, kswap):
    """What optimizer_state='host' says under the strategy's scope and outside it."""
    errors = []
    with strategy.scope():
        model = compile_(build("residual"), optimizer="adam")
        try:
            kswap.OffloadingModel(model, optimizer_state="host")
        except ValueError as e:
            errors.append(str(e))
    try:
        kswap.OffloadingModel(model, optimizer_state="host")
    except ValueError as e:
        errors.append(str(e))
    return errors


def _custom_loop(strategy, model, x, y, tf):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).with_options(options)
    dist = strategy.experimental_distribute_dataset(ds)

    def replica_step(xb, yb):
        with tf.GradientTape() as tape:
            err = tf.square(model(xb, training=True) - yb)
            loss = tf.reduce_sum(tf.reduce_mean(err, axis=-1)) / GLOBAL_BATCH
        grads = tape.gradient(loss, model.trainable_weights)
        model.optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
        return loss

    @tf.function
    def step(batch):
        per_replica = strategy.run(replica_step, args=batch)
        return strategy.reduce("SUM", per_replica, axis=None)

    return [float(step(batch)) for batch in dist]


if __name__ == "__main__":
    main(sys.argv[1:])
