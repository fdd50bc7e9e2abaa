"""kswap against what a TensorFlow user would pick instead, side by side, each in a fresh process.

    python benchmarks/compare.py                                   # MobileNetV2, ResNet50, GPT2
    python benchmarks/compare.py --models MobileNetV2 --repeats 3 --out results/
    python benchmarks/compare.py --quick --out compare-quick/      # a tiny CNN, for a test

Models (``--models``, comma-separated):

- ``MobileNetV2``: keras.applications, ``weights=None``, 96x96x3, 10 classes;
- ``ResNet50``: keras.applications, ``weights=None``, 64x64x3, 10 classes;
- ``GPT2``: ``keras_hub.models.GPT2Backbone`` from a small config, no weights
  (4 layers, hidden 256, 4 heads, MLP 1024, sequence 128, vocabulary 1000)
  under a next-token softmax head;
- ``Tiny``: a small residual CNN built here (64x64x3, batch 32), for ``--quick``.

All are compiled with Adam and sparse categorical cross-entropy, from seed 0,
and trained on random data (token ids for GPT2). Methods (``--methods``):

- ``baseline``: the plain model;
- ``kswap-all``, ``kswap-conv``: ``kswap.OffloadingModel(model, policy=...)``;
- ``kswap-autotune``: ``kswap.OffloadingModel(model)`` trained through
  ``model.fit`` with ``kswap.AutoTune(budget=0.5)`` in one process (enough
  steps for its rounds), once; its last plan is saved and measured, as
  ``kswap.OffloadingModel(model, policy=plan)``, in a process per repeat;
- ``remat-full``, ``remat-activations``: the model built inside
  ``keras.RematScope(mode=...)``;
- ``recompute-grad``: every layer's ``call`` (for GPT2: every layer of the
  backbone, i.e. each transformer block, the embeddings and the final norm)
  replaced by ``tf.recompute_grad`` of it (see :func:`recompute_every_layer`);
- ``mixed``: the model built under ``keras.mixed_precision`` (``--precision``,
  default ``mixed_bfloat16`` without a GPU, ``mixed_float16`` with one);
- ``same-peak``: the plain model at the largest batch size whose device peak
  does not exceed the lowest peak a kswap method reached (a scan: a line
  through the baseline's peaks at two batch sizes predicts the batch, which
  is measured, then lowered until it fits); its samples per second are the
  figure to hold kswap's against.

Each method of a model is measured by ``kswap.measure`` (a warm-up step
through ``model.fit``, ``--steps`` timed steps, ``--steps`` profiled steps, each
as ``fit`` runs them from numpy arrays) in a process of its own, so nothing
else is alive. Repeats interleave the methods, so a slow spell of a shared
machine hits them all; the time ratio is the median of the per-repeat ratios
to the baseline. A method that cannot train is reported with its one-line
error, and the run goes on. Without a GPU, device memory is emulated on
CPU:0 (kswap's host copies are counted apart from it).

Writes ``compare.md`` (a table per model), ``compare.json`` (every run) and
``compare.png`` (device peak against step time, a panel per model) into
``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

from _common import MIB, device_label, table

HERE = os.path.abspath(__file__)

#: model -> (input description, default batch).
MODELS = {
    "MobileNetV2": ("96x96x3", 32),
    "ResNet50": ("64x64x3", 32),
    "GPT2": ("4 layers, hidden 256, sequence 128", 32),
    "Tiny": ("64x64x3", 32),
}

METHODS = [
    "baseline",
    "kswap-all",
    "kswap-conv",
    "kswap-autotune",
    "remat-full",
    "remat-activations",
    "recompute-grad",
    "mixed",
    "same-peak",
]

#: Methods whose lowest device peak the ``same-peak`` baseline is held to.
KSWAP_METHODS = ("kswap-all", "kswap-conv", "kswap-autotune")

VOCAB = 1000
SEQ = 128
QUICK_SEQ = 16


# ------------------------------------------------------------------ models


def tiny_cnn(input_shape=(64, 64, 3), classes: int = 10, width: int = 16):
    """Two residual blocks of 3x3 convolutions with batch normalization, a softmax head."""
    import keras

    inputs = keras.Input(input_shape)
    h = keras.layers.Conv2D(width, 3, padding="same", name="stem")(inputs)
    for i in (1, 2):
        r = keras.layers.Conv2D(width, 3, padding="same", name=f"b{i}_conv")(h)
        r = keras.layers.BatchNormalization(name=f"b{i}_bn")(r)
        r = keras.layers.ReLU(name=f"b{i}_relu")(r)
        h = keras.layers.Add(name=f"b{i}_add")([h, r])
    h = keras.layers.GlobalAveragePooling2D(name="pool")(h)
    outputs = keras.layers.Dense(classes, activation="softmax", name="head")(h)
    return keras.Model(inputs, outputs, name="tiny_cnn")


def gpt2(seq: int = SEQ, layers: int = 4, hidden: int = 256):
    """A keras_hub GPT-2 backbone from a small config, under a next-token head."""
    import keras
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCAB,
        num_layers=layers,
        num_heads=4,
        hidden_dim=hidden,
        intermediate_dim=4 * hidden,
        max_sequence_length=seq,
    )
    inputs = backbone.input
    out = backbone(inputs)
    out = keras.layers.Dense(VOCAB, activation="softmax", name="lm_head", dtype="float32")(out)
    return keras.Model(inputs, out, name="gpt2_lm")


def build_model(name: str, quick: bool = False):
    """The compiled model ``name`` (random weights from the current seed)."""
    import keras

    if name == "Tiny":
        model = tiny_cnn()
    elif name == "GPT2":
        model = gpt2(QUICK_SEQ, 1, 32) if quick else gpt2()
    elif name in ("MobileNetV2", "ResNet50"):
        size = 32 if quick else {"MobileNetV2": 96, "ResNet50": 64}[name]
        model = getattr(keras.applications, name)(
            weights=None, input_shape=(size, size, 3), classes=10
        )
    else:
        raise ValueError(f"unknown model {name!r}")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def make_data(model, samples: int, seq: int = SEQ, seed: int = 0):
    """Random inputs and targets for ``model``: images and classes, or ``seq`` tokens."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if isinstance(model.input, dict):  # keras_hub text: token ids, next tokens
        x = {
            "token_ids": rng.integers(1, VOCAB, (samples, seq)).astype("int32"),
            "padding_mask": np.ones((samples, seq), "int32"),
        }
        return x, rng.integers(1, VOCAB, (samples, seq)).astype("int32")
    x = rng.random((samples, *model.input.shape[1:]), dtype=np.float32)
    return x, rng.integers(0, model.output.shape[-1], (samples,))


def recompute_every_layer(model) -> int:
    """Replaces each layer's ``call`` by ``tf.recompute_grad`` of it, as a TF user would.

    Nested models are entered (keras_hub's backbone: its transformer blocks
    are its layers); layers are not. Keyword arguments (``training``,
    masks) are bound in a closure, since ``tf.recompute_grad`` passes them
    to ``tf.custom_gradient``, which takes keyword arguments only in eager
    mode.

    Returns:
        The number of layers wrapped.
    """
    import keras
    import tensorflow as tf

    def wrap(call):
        def recomputed(*args, **kwargs):
            return tf.recompute_grad(lambda *a: call(*a, **kwargs))(*args)

        return recomputed

    count = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        if isinstance(layer, keras.Model):
            count += recompute_every_layer(layer)
            continue
        layer.call = wrap(layer.call)
        count += 1
    return count


def build_method(name: str, method: str, args):
    """The compiled model ``name`` as ``method`` builds it, seed 0."""
    import keras

    import kswap

    keras.utils.set_random_seed(0)
    if method.startswith("remat-"):
        with keras.RematScope(mode=method.removeprefix("remat-")):
            return build_model(name, args.quick)
    if method == "mixed":
        keras.mixed_precision.set_global_policy(args.precision)
        return build_model(name, args.quick)
    model = build_model(name, args.quick)
    if method == "recompute-grad":
        recompute_every_layer(model)
    elif method in ("kswap-all", "kswap-conv"):
        model = kswap.OffloadingModel(model, policy=method.removeprefix("kswap-"))
    elif method == "kswap-autotune":
        from kswap.planning import Plan

        model = kswap.OffloadingModel(model, policy=Plan.from_json(args.plan))
    elif method not in ("baseline", "same-peak"):
        raise ValueError(f"unknown method {method!r}")
    return model


# ------------------------------------------------------------------ worker side


def one_line(e: BaseException, limit: int = 200) -> str:
    """A one-line message for an exception: its most telling line, truncated."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(e).splitlines()]
    skip = ("Exception encountered", "Graph execution error", "Detected at node", "File ")
    skip += ("Traceback", "Arguments received", "•", "Stack trace", "[[", "Node:")
    useful = [ln for ln in lines if ln and not ln.startswith(skip)]
    text = f"{type(e).__name__}: {useful[0] if useful else (lines[0] if lines else '')}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def worker_measure(args) -> dict:
    """Builds the method's model and measures it (``kswap.measure``) in this process."""
    import kswap

    model = build_method(args.model, args.method, args)
    x, y = make_data(model, 2 * args.batch, QUICK_SEQ if args.quick else SEQ)
    m = kswap.measure(model, x, y, steps=args.steps, batch_size=args.batch)
    return m.to_dict()


def worker_autotune(args) -> dict:
    """Trains ``OffloadingModel(model)`` with ``AutoTune(budget)`` through fit; saves its plan."""
    import keras

    import kswap

    keras.utils.set_random_seed(0)
    model = kswap.OffloadingModel(build_model(args.model, args.quick))
    x, y = make_data(model, args.batch * args.tune_steps, QUICK_SEQ if args.quick else SEQ)
    tune = kswap.AutoTune(args.budget, profile_steps=1, verbose=0)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, batch_size=args.batch, shuffle=False, verbose=0, callbacks=[tune])
    seconds = time.perf_counter() - t0
    plan = tune.plan
    if plan is None or tune.restored:
        said = [str(w.message) for w in caught if "AutoTune" in str(w.message)]
        raise RuntimeError(said[-1] if said else "AutoTune made no plan in the steps it had")
    plan.to_json(args.plan)
    return {
        "fit_seconds": seconds,
        "baseline_peak_bytes": tune.baseline_peak_bytes,
        "start_peak_bytes": tune.start_peak_bytes,
        "measured_peak_bytes": tune.measured_peak_bytes,
        "budget_bytes": tune.budget_bytes,
        "rounds": len(tune.rounds),
        "restored": tune.restored,
        "counts": plan.counts(),
    }


def worker(args) -> None:
    """Prints the worker's result as JSON on its last line, or ``{"error": ...}``."""
    try:
        out = worker_autotune(args) if args.method == "autotune-fit" else worker_measure(args)
    except Exception as e:  # report a method that cannot train, and go on
        out = {"error": one_line(e)}
    print(json.dumps(out))


# ------------------------------------------------------------------ parent side


def run(args, model: str, method: str, batch: int | None = None, **extra) -> dict:
    """Runs one worker in a fresh process; a crash or time-out becomes ``{"error": ...}``."""
    cmd = [sys.executable, HERE, "--worker", "--model", model, "--method", method]
    cmd += ["--batch", str(batch or args.batch), "--steps", str(args.steps)]
    cmd += ["--precision", args.precision, "--budget", str(args.budget)]
    cmd += ["--tune-steps", str(args.tune_steps)] + (["--quick"] if args.quick else [])
    for key, value in extra.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s"}
    lines = proc.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, ValueError):
        err = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        fatal = [ln for ln in err if "Check failed" in ln or "Error" in ln]
        why = (fatal[-1:] or err[-1:] or [""])[0][:200]
        out = {"error": f"process exited with code {proc.returncode}: {why}"}
    out["process_seconds"] = time.perf_counter() - t0
    print(f"  {model} {method} batch {batch or args.batch}: {_brief(out)}", file=sys.stderr)
    return out


def _brief(r: dict) -> str:
    if "error" in r:
        return r["error"]
    if "device_peak_bytes" in r:
        return f"{r['device_peak_bytes'] / MIB:.1f} MiB, {r['step_seconds'] * 1000:.0f} ms"
    return json.dumps(r)


def autotune(args, model: str, tmp: str, tuned: dict | None) -> dict:
    """AutoTune in fit (one process, the first repeat only), then its plan measured (another)."""
    plan = os.path.join(tmp, f"{model}-plan.json")
    if tuned is None:
        tuned = run(args, model, "autotune-fit", plan=plan)
    if "error" in tuned:
        return tuned
    out = run(args, model, "kswap-autotune", plan=plan)
    out["autotune"] = tuned
    return out


def same_peak(args, model: str, target: int, base: dict) -> dict:
    """The plain model at the largest batch whose device peak is at most ``target``.

    Starts at half of ``--batch``; each next batch is where the line through
    the two measured points nearest the target (``--batch`` is one) crosses
    it, kept between the largest batch that fits and the smallest that does
    not. Stops when those two are neighbours, or after ``--scan-limit`` runs.
    """
    points = {args.batch: base["device_peak_bytes"]}
    runs: dict[int, dict] = {}
    b = max(1, args.batch // 2)
    for _ in range(args.scan_limit):
        r = run(args, model, "same-peak", batch=b)
        runs[b] = r
        if "error" in r:
            return {"error": r["error"]}
        points[b] = r["device_peak_bytes"]
        fits = [k for k in runs if points[k] <= target]
        over = [k for k in points if points[k] > target]
        best, worst = max(fits, default=0), min(over)
        if best + 1 >= worst:
            break
        pts = sorted(points)
        lo, hi = (best, worst) if fits else (pts[0], pts[1])
        slope = (points[hi] - points[lo]) / (hi - lo)
        guess = int(lo + (target - points[lo]) // slope) if slope > 0 else best + 1
        guess = max(best + 1, min(guess, worst - 1))
        if guess < 1 or guess in runs:
            break
        b = guess
    fits = [k for k in runs if points[k] <= target]
    if not fits:
        return {"error": f"no batch >= 1 measured at or under {target / MIB:.1f} MiB"}
    out = dict(runs[max(fits)])
    out["scan"] = {str(k): points[k] for k in sorted(runs)}
    return out


def measure_model(args, model: str, methods: list[str], tmp: str) -> dict[str, list[dict]]:
    """Every method of one model, ``--repeats`` times, interleaved; then the same-peak scan."""
    runs: dict[str, list[dict]] = {m: [] for m in methods if m != "same-peak"}
    for _ in range(args.repeats):
        for method in runs:
            if runs[method] and "error" in runs[method][-1]:
                continue  # a method that failed fails again: measured once
            if method == "kswap-autotune":
                tuned = runs[method][0]["autotune"] if runs[method] else None
                runs[method].append(autotune(args, model, tmp, tuned))
            else:
                runs[method].append(run(args, model, method))
    if "same-peak" in methods:
        base = runs.get("baseline") or [run(args, model, "baseline")]
        peaks = [
            statistics.median(r["device_peak_bytes"] for r in runs[m])
            for m in KSWAP_METHODS
            if runs.get(m) and "error" not in runs[m][-1]
        ]
        if "error" in base[-1]:
            runs["same-peak"] = [{"error": "the baseline failed"}]
        elif not peaks:
            runs["same-peak"] = [{"error": "no kswap method to match"}]
        else:
            med = {"device_peak_bytes": statistics.median(r["device_peak_bytes"] for r in base)}
            if med["device_peak_bytes"] <= min(peaks):  # kswap saved nothing: the baseline
                runs["same-peak"] = [dict(base[-1], scan={})]
            else:
                runs["same-peak"] = [same_peak(args, model, int(min(peaks)), med)]
            runs["same-peak"][0]["target_bytes"] = int(min(peaks))
    return runs


# ------------------------------------------------------------------ results


def summarize(model: str, runs: dict[str, list[dict]], batch: int) -> list[dict]:
    """One row per method: medians over repeats, ratios to the baseline."""
    base = runs.get("baseline", [])
    base_ok = bool(base) and "error" not in base[-1]
    base_peak = statistics.median(r["device_peak_bytes"] for r in base) if base_ok else None
    base_time = statistics.median(r["step_seconds"] for r in base) if base_ok else None
    rows = []
    for method, rs in runs.items():
        row: dict = {"model": model, "method": method}
        if not rs or "error" in rs[-1]:
            row["error"] = rs[-1]["error"] if rs else "not run"
            rows.append(row)
            continue
        b = rs[-1].get("batch_size", batch)
        peak = statistics.median(r["device_peak_bytes"] for r in rs)
        step = statistics.median(r["step_seconds"] for r in rs)
        row.update(
            batch=b,
            device_peak_mib=peak / MIB,
            host_peak_mib=statistics.median(r["host_peak_bytes"] for r in rs) / MIB,
            step_ms=step * 1000,
            samples_per_s=b / step,
        )
        if base_ok:
            row["peak_ratio"] = peak / base_peak
            if method == "same-peak" or len(rs) != len(base):
                row["time_ratio"] = step / base_time
            else:  # within a repeat: both hit by the same spell of the machine
                ratios = [
                    r["step_seconds"] / q["step_seconds"] for r, q in zip(rs, base, strict=True)
                ]
                row["time_ratio"] = statistics.median(ratios)
            row["throughput_ratio"] = (b / step) / (batch / base_time)
        rows.append(row)
    return rows


HEADERS = [
    "method",
    "batch",
    "device peak MiB",
    "peak / baseline",
    "host peak MiB",
    "step ms (median)",
    "time / baseline",
    "samples/s",
    "samples/s / baseline",
]


def _ratio(row: dict, key: str) -> str:
    return f"{row[key]:.2f}" if key in row else ""


def markdown(rows: list[dict], args, emulated: bool) -> str:
    """The tables, one per model, under a line saying how they were measured."""
    out = [
        f"{args.repeats} fresh process(es) per method, methods interleaved, each "
        f"{args.steps} timed steps (median) and {args.steps} profiled steps through "
        f"model.fit's step from numpy arrays; time / baseline is the median of per-repeat "
        f"ratios (same-peak: of medians); mixed precision: {args.precision}; "
        f"{device_label(emulated)}.",
        "",
    ]
    for model in dict.fromkeys(r["model"] for r in rows):
        size, _ = MODELS[model]
        out += [f"**{model}** ({size}, batch {args.batch})", ""]
        cells = []
        for r in (r for r in rows if r["model"] == model):
            if "error" in r:
                cells.append([r["method"], "", "fails", "", "", "", "", "", r["error"]])
                continue
            cells.append(
                [
                    r["method"],
                    r["batch"],
                    f"{r['device_peak_mib']:,.1f}",
                    _ratio(r, "peak_ratio"),
                    f"{r['host_peak_mib']:,.1f}",
                    f"{r['step_ms']:,.0f}",
                    _ratio(r, "time_ratio"),
                    f"{r['samples_per_s']:,.1f}",
                    _ratio(r, "throughput_ratio"),
                ]
            )
        out += [table(HEADERS, cells), ""]
    return "\n".join(out)


def plot(rows: list[dict], path: str, batch: int, emulated: bool) -> None:
    """Device peak against step time, one point per method, a panel per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 4.4), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        failed = []
        for r in (r for r in rows if r["model"] == model):
            if "error" in r:
                failed.append(r["method"])
                continue
            # the same-peak baseline runs a smaller batch: its time for `batch` samples
            ms = r["step_ms"] * batch / r["batch"]
            kswap = r["method"].startswith("kswap")
            ax.scatter(
                r["device_peak_mib"],
                ms,
                s=60,
                marker="o" if kswap else "s",
                color="tab:blue" if kswap else "tab:gray",
                zorder=3,
            )
            label = r["method"] + (f" (batch {r['batch']})" if r["batch"] != batch else "")
            ax.annotate(
                label,
                (r["device_peak_mib"], ms),
                fontsize=8,
                xytext=(4, 4),
                textcoords="offset points",
            )
        ax.set_title(model)
        ax.set_xlabel("device peak, MiB" + (" (emulated on CPU)" if emulated else ""))
        ax.set_ylabel(f"step time for {batch} samples, ms (median)")
        ax.grid(alpha=0.3)
        if failed:
            ax.text(
                0.02,
                0.02,
                "fails: " + ", ".join(failed),
                transform=ax.transAxes,
                fontsize=7,
                color="tab:red",
            )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ main


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (exit code 2)."""

    def error(self, message: str):
        _fail(message)


def _fail(message: str) -> None:
    print(f"compare.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv=None):
    """The command line; bad values end the program with one line and exit code 2."""
    p = _Parser(
        prog="compare.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--models", default="MobileNetV2,ResNet50,GPT2", help=", ".join(MODELS))
    p.add_argument("--methods", default=",".join(METHODS), help=", ".join(METHODS))
    p.add_argument("--batch", type=int, default=32, help="samples per step (default: 32)")
    p.add_argument("--steps", type=int, default=5, help="timed and profiled steps")
    p.add_argument("--repeats", type=int, default=2, help="fresh processes per method")
    p.add_argument("--out", default="compare-results", help="directory for compare.md/.png/.json")
    p.add_argument("--quick", action="store_true", help="the tiny CNN, tiny sizes (a test)")
    p.add_argument("--budget", type=float, default=None, help="AutoTune's budget (0.5; quick 0.9)")
    p.add_argument("--tune-steps", type=int, default=12, help="fit steps AutoTune gets")
    p.add_argument("--precision", default=None, help="mixed precision policy")
    p.add_argument("--timeout", type=int, default=1200, help="seconds per process")
    p.add_argument("--scan-limit", type=int, default=5, help="batches the same-peak scan tries")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    p.add_argument("--plan", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return args
    if args.quick and "--models" not in (argv if argv is not None else sys.argv):
        args.models = "Tiny"
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown or not args.models:
        _fail(f"--models must be among {', '.join(MODELS)}; got {','.join(unknown) or 'none'}")
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown or not args.methods:
        _fail(f"--methods must be among {', '.join(METHODS)}; got {','.join(unknown) or 'none'}")
    for name in ("batch", "steps", "repeats", "tune_steps", "timeout", "scan_limit"):
        if getattr(args, name) < 1:
            _fail(f"--{name.replace('_', '-')} must be >= 1; got {getattr(args, name)}")
    if args.budget is None:
        args.budget = 0.9 if args.quick else 0.5
    if not 0 < args.budget <= 1:
        _fail(f"--budget must be a fraction in (0, 1]; got {args.budget}")
    if args.quick:
        args.steps = min(args.steps, 2)
        args.tune_steps = min(args.tune_steps, 10)
    return args


def _write(args, rows: list[dict], all_runs: dict[str, dict]) -> str:
    """Writes compare.md, compare.json and compare.png for the models measured so far."""
    emulated = any(
        r.get("emulated", False) for runs in all_runs.values() for rs in runs.values() for r in rs
    )
    text = markdown(rows, args, emulated)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        options = {k: v for k, v in vars(args).items() if k not in ("worker", "model", "method")}
        json.dump(
            {"options": options, "emulated": emulated, "rows": rows, "runs": all_runs}, f, indent=1
        )
    plot(rows, os.path.join(args.out, "compare.png"), args.batch, emulated)
    return text


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.precision is None:
        args.precision = "mixed_bfloat16"
        if not args.worker:
            import importlib.util

            # without importing TensorFlow here: a GPU machine runs mixed_float16
            if importlib.util.find_spec("tensorflow") and os.path.exists("/dev/nvidia0"):
                args.precision = "mixed_float16"
    if args.worker:
        return worker(args)
    os.makedirs(args.out, exist_ok=True)
    all_runs: dict[str, dict] = {}
    rows: list[dict] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compare-") as tmp:
        for model in args.models:
            print(f"{model}:", file=sys.stderr, flush=True)
            runs = measure_model(args, model, args.methods, tmp)
            all_runs[model] = runs
            rows += summarize(model, runs, args.batch)
            text = _write(args, rows, all_runs)  # after each model: a stopped run keeps them
    print(text)
    print(f"({time.perf_counter() - t0:.0f} s; written to {args.out})", file=sys.stderr)


if __name__ == "__main__":
    main()
