"""Device memory and step time of offloading, side by side, each in a fresh process.

    python benchmarks/offload.py                       # ResNet50, MobileNetV2, VGG16
    python benchmarks/offload.py --models ResNet50 --variants baseline,all
    python benchmarks/offload.py --optimizer sgd   # no optimizer slots on the device
    python benchmarks/offload.py --models LSTM --input 100 --batch 64 \
        --variants baseline,all,all-recompute-loops      # two stacked LSTMs over tokens

Variants: ``baseline`` (the plain model), ``all`` and ``conv``
(``kswap.OffloadingModel(model, policy=...)``; ``all@0`` sets ``prefetch=0``,
``all+host`` ``optimizer_state="host"``; a suffix ``-unordered`` leaves the
order of each block's backward ops to TensorFlow's executor; on a CPU without
oneDNN, where each of a convolution's two gradients takes a scratch buffer,
``-chained`` runs them one after the other even with inter-op threads to
spare and ``-side-by-side`` never does (``kswap.layers.chain.CHAIN_SCRATCH``;
by default only where each replica has fewer than two threads); ``/static``
feeds a ``tf.data`` dataset batched with ``drop_remainder=True``, so the step
is traced with the batch size known, where arrays give ``fit``'s unknown
batch dimension, and ``-recompute-loops`` recomputes recurrent layers instead
of replaying their loops, as kswap did before it could),
``autotune@F`` (the first plan ``kswap.AutoTune(F)`` makes, made from
profiles in the variant's own process, outside ``fit``: no training arrays
in the allocator), ``plan:PATH`` (``kswap.OffloadingModel(model, policy=Plan)`` of a plan saved
as JSON, such as the one ``benchmarks/autotune.py --plans DIR`` keeps of
AutoTune's last round), ``remat`` (the model built inside
``keras.RematScope(mode="full")``) and
``remat-activations`` (``mode="activations"``). A configuration that cannot
train is reported with its error. Each is measured by ``kswap.measure``
(warm-up, median of 5 timed steps, 5 profiled steps) in a process of its own,
so nothing else is alive; repeats interleave the variants, and the time ratio
is the median of the ratios within a repeat. Without a GPU, device memory is
emulated on CPU:0.

The floor is what must sit on the device together whatever is offloaded: the
bytes in use when a step begins (weights, optimizer slots) plus the largest
working set of one layer's backward at one moment (the tensors it reads, its
gradients and temporaries, from the kswap trace). Weight gradients of other
layers are not counted there: an optimizer could apply and free them early.
Keras's step applies them after the backward, and TensorFlow's executor runs
each update once its gradient is ready or later, as it schedules, so
"floor+grads" adds the weight gradients of other layers alive at that moment
in the trace (backward buffers that live until their update), and "peak /
floor+grads" is the device peak against it.

The tensor peak is the peak of the bytes tensors asked for; the device peak
counts the blocks the allocator gave them, which its rounding and unsplit
free blocks make larger.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics

import numpy as np
from _common import (
    device_label,
    inter_op_threads_arg,
    mib,
    run_worker,
    set_inter_op_threads,
    table,
)

MODELS = {
    "ResNet50": {},
    "MobileNetV2": {},
    "VGG16": {"include_top": False},
}

#: Other builds of a keras.applications model: name -> (constructor, arguments).
#: ``VGG16`` above is its convolutional base; ``VGG16-top`` is VGG16 as Keras
#: builds it by default, with its classifier (two Dense of 4096, 10 classes).
APPLICATION_BUILDS = {"VGG16-top": ("VGG16", {})}


def lstm_model(input_shape=(100,), classes=10):
    """Embedding(1000, 64), LSTM(256, return_sequences=True), LSTM(256), Dense over tokens."""
    import keras

    inputs = keras.Input(input_shape, dtype="int32")
    h = keras.layers.Embedding(1000, 64, name="embedding")(inputs)
    h = keras.layers.LSTM(256, return_sequences=True, name="lstm_1")(h)
    h = keras.layers.LSTM(256, name="lstm_2")(h)
    outputs = keras.layers.Dense(classes, activation="softmax", name="out")(h)
    return keras.Model(inputs, outputs, name="lstm")


#: Models over token sequences (``--input`` is the sequence length).
SEQUENCE_MODELS = {"LSTM": lstm_model}


def tiny_vgg(input_shape=(32, 32, 3), classes=10):
    """VGG's shape in miniature: two blocks of two 3x3 convolutions and a pooling, two Dense.

    A stand-in for VGG16 where only the script's working matters (a dry run).
    """
    import keras

    inputs = keras.Input(input_shape)
    h = inputs
    for block, filters in enumerate((8, 16), start=1):
        for i in (1, 2):
            h = keras.layers.Conv2D(
                filters, 3, padding="same", activation="relu", name=f"block{block}_conv{i}"
            )(h)
        h = keras.layers.MaxPooling2D(name=f"block{block}_pool")(h)
    h = keras.layers.Flatten(name="flatten")(h)
    h = keras.layers.Dense(32, activation="relu", name="fc1")(h)
    outputs = keras.layers.Dense(classes, activation="softmax", name="predictions")(h)
    return keras.Model(inputs, outputs, name="tiny_vgg")


#: Small image models built here, not by keras.applications.
IMAGE_MODELS = {"TinyVGG": tiny_vgg}


def build_variant(name: str, variant: str, input_shape: str, optimizer: str = "adam"):
    """The compiled model ``name`` as ``variant`` builds it, seed 0.

    ``name`` is a keras.applications model or one of :data:`SEQUENCE_MODELS`
    and :data:`IMAGE_MODELS`.
    """
    import keras

    import kswap
    from kswap.layers import chain, loops
    from kswap.modelspec import build_model

    variant = variant.removesuffix("/static")
    shape = tuple(int(s) for s in input_shape.split(","))

    def build():
        if name in SEQUENCE_MODELS or name in IMAGE_MODELS:
            model = {**SEQUENCE_MODELS, **IMAGE_MODELS}[name](shape)
            model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
            return model
        application, kwargs = APPLICATION_BUILDS.get(name, (name, MODELS.get(name, {})))
        return build_model(
            f"keras.applications.{application}", shape, optimizer=optimizer, **kwargs
        )

    if variant.startswith("plan:"):
        from kswap.planning import Plan

        plan = Plan.from_json(variant.removeprefix("plan:"))
        keras.utils.set_random_seed(0)
        model = build()
        return kswap.OffloadingModel(model, policy=plan)
    keras.utils.set_random_seed(0)
    if variant.startswith("remat"):
        mode = variant.split("-", 1)[1] if "-" in variant else "full"
        with keras.RematScope(mode=mode):
            model = build()
    else:
        model = build()
    # read when the model's step is traced: trace it before building another
    chain.ORDER_BACKWARD = not variant.endswith("-unordered")
    chain.CHAIN_SCRATCH = None  # kswap's default
    for suffix, chained in (("-chained", True), ("-side-by-side", False)):
        if variant.endswith(suffix):
            chain.CHAIN_SCRATCH = chained
    loops.REPLAY_LOOPS = not variant.endswith("-recompute-loops")
    for suffix in ("-unordered", "-chained", "-side-by-side", "-recompute-loops"):
        variant = variant.removesuffix(suffix)
    variant, _, state = variant.partition("+")
    policy, _, prefetch = variant.partition("@")
    if policy in ("all", "conv"):
        model = kswap.OffloadingModel(
            model, policy=policy, prefetch=int(prefetch or 1), optimizer_state=state or "device"
        )
    return model


def worker(args) -> None:
    set_inter_op_threads(args.inter_op_threads)
    import kswap
    from kswap.modelspec import synthetic_data

    model = build_variant(args.model, args.variant, args.input, args.optimizer)
    x, y = synthetic_data(model, 2 * args.batch)
    if args.model in SEQUENCE_MODELS:  # token ids
        x = np.random.default_rng(0).integers(0, 1000, x.shape).astype("int32")
    batch = args.batch
    if args.variant.endswith("/static"):  # the batch size known when fit traces the step
        import tensorflow as tf

        x = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
        y = batch = None
    plan = None
    if args.variant.startswith("autotune"):
        fraction = float(args.variant.partition("@")[2] or 0.5)
        model, plan, tune = autotuned(model, fraction, x, y, batch)
        budget_bytes = tune.budget_bytes
    try:
        m = kswap.measure(model, x, y, steps=args.steps, batch_size=batch)
    except Exception as e:  # report a configuration that cannot train, and go on
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(e).splitlines()]
        reason = next((ln for ln in lines if ln and not ln.startswith("Exception")), "")
        print(json.dumps({"error": f"{type(e).__name__}: {reason[:160]}"}))
        return
    out = m.to_dict()
    out["floor_bytes"], out["floor_grads_bytes"] = _floor(m.trace)
    out["tensor_peak_bytes"] = m.trace.peak_bytes("device", requested=True)
    if plan is not None:
        out["plan"] = {
            "counts": plan.counts(),
            "optimizer_state": plan.optimizer_state,
            "target_bytes": plan.budget_bytes,
            "budget_bytes": budget_bytes,
            "predicted_bytes": plan.predicted_peak_bytes,
        }
    print(json.dumps(out))


def autotuned(model, fraction: float, x, y, batch: int, *, feasible: bool = False):
    """``OffloadingModel(model)`` with the first plan ``kswap.AutoTune(fraction)`` makes.

    With ``feasible``, a fraction below the smallest feasible budget (which
    AutoTune refuses) is raised to it: ``tune.budget_raised`` is then True.
    On a CPU without oneDNN a small CNN's floor is its convolution
    gradients' scratch (a fixed 24-27 MiB each, two at once), which no plan
    moves.

    Returns the model, the plan and the :class:`kswap.AutoTune` that made it
    (its ``budget_bytes``, ``workload`` and ``allocator_overhead``).

    Made as AutoTune makes it, from profiles taken here rather than inside
    ``fit``: the workload of two steps with the model's own actions, the
    baseline measured with every block kept and the slots on the device
    (the larger of the two steps' allocator extra), and AutoTune's first
    plan for the fraction of it (its headroom and that extra left free).
    """
    import kswap
    from kswap import transfer
    from kswap.planning import parse_budget, smallest_budget
    from kswap.profiler.fit_steps import run_steps
    from kswap.tuning import apply_plan
    from kswap.tuning.autotune import window_workload

    off = kswap.OffloadingModel(model)
    tune = kswap.AutoTune(fraction, verbose=0)
    trace = kswap.profile(off, x, y, steps=2, batch_size=batch)
    # as AutoTune times steps right after it profiles them (the model is warm)
    tune.unprofiled_step_seconds = statistics.median(
        run_steps(off, [(x[:batch], y[:batch])] * tune.timed_steps)
    )
    tune.workload = window_workload(trace, off, tune.unprofiled_step_seconds)
    tune.link = transfer.measure_link()
    apply_plan(off, "keep")
    off.make_train_function(force=True)
    kept = kswap.profile(off, x, y, steps=2, batch_size=batch)
    tune._learn_baseline(kept)
    tune._budget = parse_budget(fraction)
    tune.budget_raised = False
    try:
        plan = tune._make_plan(None)
    except ValueError:
        if not feasible:
            raise
        tune._budget = parse_budget(smallest_budget(tune.workload, tune.link))
        tune.budget_raised = True
        plan = tune._make_plan(None)
    apply_plan(off, plan)
    off.make_train_function(force=True)
    return off, plan, tune


def _floor(trace) -> tuple[int, int]:
    """The floor without and with the weight gradients the update waits for.

    A weight gradient made early in the backward stays on the device until
    its update runs, which the executor may schedule at once or after the
    backward: the second figure adds those alive at each moment (backward
    buffers that live until the update begins).
    """
    lo, hi = trace.steps[-1]
    device = trace.tier("device")
    resident = sum(
        b.size for b in device if (b.alive_at_start or b.start_ns < lo) and b.alive_at(lo)
    )
    events = sorted({b.start_ns for b in device if lo <= b.start_ns < hi})
    backward = [b for b in device if b.op and b.op.startswith("gradient_tape/") and b.layer]
    step = [b for b in device if lo <= b.start_ns < hi]
    update = min((b.start_ns for b in step if b.phase == "update"), default=hi)
    held = {id(b) for b in backward if b.end_ns >= update or b.alive_at_end}
    working = with_grads = 0
    for t in events:
        per_layer: dict[str, int] = {}
        grads: dict[str, int] = {}
        for b in backward:
            if b.alive_at(t):
                per_layer[b.layer] = per_layer.get(b.layer, 0) + b.size
                if id(b) in held:
                    grads[b.layer] = grads.get(b.layer, 0) + b.size
        working = max([working, *per_layer.values()])
        total = sum(grads.values())
        with_grads = max(
            [with_grads, *(n + total - grads.get(layer, 0) for layer, n in per_layer.items())]
        )
    return resident + working, resident + with_grads


def _run(args, name: str, variant: str) -> dict:
    return run_worker(
        __file__,
        model=name,
        variant=variant,
        input=args.input,
        batch=args.batch,
        steps=args.steps,
        optimizer=args.optimizer,
        inter_op_threads=args.inter_op_threads,
    )


def _row(name: str, variant: str, runs: list[dict], base: list[dict]) -> list[str]:
    """One table row: medians over repeats; time as the median per-repeat ratio."""
    if "error" in runs[-1]:
        return [name, variant, "fails", "", "", "", "", "", "", "", "", runs[-1]["error"]]
    med = lambda key, rs: statistics.median(r[key] for r in rs)  # noqa: E731
    peaks = [r["device_peak_bytes"] for r in runs]
    ratios = [r["step_seconds"] / b["step_seconds"] for r, b in zip(runs, base, strict=False)]
    return [
        name,
        variant,
        mib(med("device_peak_bytes", runs)),
        f"{mib(min(peaks))}-{mib(max(peaks))}",
        f"{100 * (1 - med('device_peak_bytes', runs) / med('device_peak_bytes', base)):.1f}%",
        mib(med("host_peak_bytes", runs)),
        *(
            [
                mib(med("floor_bytes", runs)),
                mib(med("floor_grads_bytes", runs)),
                f"{med('device_peak_bytes', runs) / med('floor_grads_bytes', runs):.2f}",
            ]
            if variant.startswith(("all", "conv"))
            else ["", "", ""]
        ),
        mib(med("tensor_peak_bytes", runs)),
        f"{med('step_seconds', runs) * 1000:.0f}",
        f"{statistics.median(ratios):.2f}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="ResNet50,MobileNetV2,VGG16")
    p.add_argument("--variants", default="baseline,all,conv,remat,remat-activations")
    p.add_argument("--input", default="96,96,3")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--optimizer", default="adam", help="a Keras optimizer name")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per configuration")
    inter_op_threads_arg(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    rows = []
    emulated = False
    variants = args.variants.split(",")
    for name in args.models.split(","):
        # repeats interleave the variants, so a slow spell of a shared machine
        # hits all of them; time ratios are taken within a repeat
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for _ in range(args.repeats):
            for variant in variants:
                if not runs[variant] or "error" not in runs[variant][-1]:
                    runs[variant].append(_run(args, name, variant))
        base = runs[variants[0]]
        emulated |= any(r.get("emulated", False) for rs in runs.values() for r in rs)
        for variant in variants:
            rows.append(_row(name, variant, runs[variant], base))
            print(rows[-1], flush=True)
    print(
        f"\ninput {args.input}, batch {args.batch}, optimizer {args.optimizer}; "
        f"medians of {args.repeats} fresh processes per variant, variants interleaved, "
        f"each timing {args.steps} steps (median); "
        f"time / baseline is the median of per-repeat ratios; {device_label(emulated)}\n"
    )
    print(
        table(
            [
                "model",
                "variant",
                "device peak MiB",
                "range MiB",
                "saving",
                "host peak MiB",
                "floor MiB",
                "floor+grads MiB",
                "peak / floor+grads",
                "tensor peak MiB",
                "step ms",
                "time / baseline",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
