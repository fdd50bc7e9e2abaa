"""Model-zoo sweep: does each model train with ``kswap.OffloadingModel(model, policy="all")``?

    python benchmarks/zoo.py                                  # every model of the catalogue
    python benchmarks/zoo.py --models custom,recurrent,hub_vit --out zoo.json
    python benchmarks/zoo.py --models MobileNetV2 --time-side-by-side
    python benchmarks/zoo.py --models custom,hub --only-side-by-side
    python benchmarks/zoo.py --from-json zoo.json             # the table again

Each model of ``benchmarks/zoo_models.py`` (``--models``: names or the groups
``applications``, ``hub``, ``recurrent``, ``custom``, ``all``) trains through
``model.fit`` twice, without and with ``kswap.OffloadingModel(model,
policy="all")``, each in a fresh process (``--repeats`` pairs), from seed 0:
same weights, same data. Each worker, in order:

1. ``fit`` for ``--steps`` epochs of one step (the first traces the step),
   recording ``logs["loss"]`` after each step and Keras's "Gradients do not
   exist for variables" warning;
2. ``fit`` for ``--time-steps`` more steps after
   ``tf.config.experimental.reset_memory_stats``: the median step time
   (from ``on_train_batch_begin`` to ``on_train_batch_end``) and the CPU
   allocator's peak. On a CPU the host copies kswap makes live in that same
   allocator, so this peak counts them too;
3. ``fit`` for ``--profile-steps`` steps under the TensorFlow profiler, each
   marked as a kswap step, read by kswap's trace reader: the device peak
   (host tier excluded) and the floor (``benchmarks/offload.py``). These
   steps run the step function ``fit`` traced; ``kswap.profile`` runs
   ``train_on_batch``, whose ``(x, y, None)`` batch makes TensorFlow trace the
   step again (``--profile-api`` also runs it and reports whether it traced);
4. the gradients of the compiled loss once, with ``tf.GradientTape`` in a
   ``tf.function`` (batch dimension unknown for ``tf.data`` models), over the
   trainable variables: those that get None (``--no-tape-check`` skips it,
   one more trace of the model; Keras's warning in 1. still lists what fit's
   own step got no gradient for).

Workers time out after ``--timeout`` seconds; a configuration that fails is
reported with the stage and the error, and the sweep goes on. The time ratio
is kswap's median step time over the plain one's, from different processes
(median of the per-repeat ratios); ``--time-side-by-side`` also times both
in one process, ``--rounds`` rounds of the same number of steps in a row of
each (as many as take about 0.25 s, so that a model whose step takes
milliseconds is timed over many); ``--only-side-by-side`` runs just that, for
the time ratios again. Without a GPU device memory is emulated on CPU:0.
Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from _common import MIB, device_label, table

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------ worker side


def _one_line(e: BaseException, limit: int = 200) -> str:
    """A one-line message for an exception: its most telling line, truncated."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(e).splitlines()]
    skip = (
        "Exception encountered",
        "Graph execution error",
        "Detected at node",
        "File ",
        "Traceback",
        "Arguments received",
        "•",
        "Stack trace",
        "[[",
        "Node:",
    )
    useful = [ln for ln in lines if ln and not ln.startswith(skip)]
    text = useful[0] if useful else (lines[0] if lines else "")
    text = f"{type(e).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Steps:
    """A fit callback: each step's loss and wall time, optionally profiler step markers."""

    def __init__(self, marker: str | None = None):
        import keras

        outer = self

        class Callback(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if outer.marker is not None:
                    import tensorflow as tf

                    outer._trace = tf.profiler.experimental.Trace(
                        outer.marker, step_num=len(outer.losses), _r=1
                    )
                    outer._trace.__enter__()
                outer._start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                # logs are numbers here (this callback is not async-safe): the step is done
                outer.seconds.append(time.perf_counter() - outer._start)
                outer.losses.append(float((logs or {}).get("loss", float("nan"))))
                if outer.marker is not None:
                    outer._trace.__exit__(None, None, None)

        self.marker = marker
        self.losses: list[float] = []
        self.seconds: list[float] = []
        self.callback = Callback()


def _fit(model, data, epochs: int, marker: str | None = None) -> _Steps:
    steps = _Steps(marker)
    x, y, batch = data
    kwargs = {} if y is None else {"y": y, "batch_size": batch}
    model.fit(
        x,
        epochs=epochs,
        steps_per_epoch=1,
        shuffle=False,
        verbose=0,
        callbacks=[steps.callback],
        **kwargs,
    )
    return steps


def _data(entry, model, batch: int, dataset: bool):
    """``(x, y, batch)`` for fit: arrays, or a repeating tf.data pipeline (y None)."""
    import tensorflow as tf
    from zoo_models import make_data

    x, y = make_data(entry, model, batch)
    if not dataset:
        return (x, y, batch), (x, y)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).repeat()
    return (ds, None, batch), (x, y)


def _layers(model):
    """Every layer at any depth (through nested models and wrappers)."""
    seen = []
    stack = list(getattr(model, "layers", []))
    while stack:
        layer = stack.pop(0)
        seen.append(layer)
        stack += list(getattr(layer, "layers", []) or [])
        inner = getattr(layer, "layer", None)
        if inner is not None:
            stack.append(inner)
    return seen


def _fallbacks(model) -> list[str]:
    from kswap.layers import Offload

    out = []
    for layer in _layers(model):
        if isinstance(layer, Offload):
            for reason in layer.fallbacks:
                item = f"{layer.name}: {reason}"
                if item not in out:
                    out.append(item)
    return out


def _graph_states():
    from kswap.layers import schedule

    return {id(g): list(per_thread.values()) for g, per_thread in schedule._STATES.items()}


def _none_gradients(model, batch, dynamic: bool) -> list[str]:
    """Paths of the trainable variables whose gradient is None, from one tape."""
    import keras
    import tensorflow as tf

    x, y = batch

    def step(x, y):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)
        return tape.gradient(loss, model.trainable_variables)

    def spec(a):
        shape = (None, *a.shape[1:]) if dynamic else a.shape
        return tf.TensorSpec(shape, tf.as_dtype(a.dtype))

    fn = tf.function(step).get_concrete_function(
        keras.tree.map_structure(spec, x), keras.tree.map_structure(spec, y)
    )
    grads = fn(x, y)
    grads = keras.tree.flatten(grads) if not isinstance(grads, list) else grads
    return [v.path for v, g in zip(model.trainable_variables, grads, strict=True) if g is None]


def _warned_variables(caught) -> list[str]:
    out = []
    for w in caught:
        text = str(w.message)
        if "Gradients do not exist for variables" not in text:
            continue
        m = re.search(r"variables (\[.*?\])", text)
        try:
            names = ast.literal_eval(m.group(1)) if m else [text[:120]]
        except (ValueError, SyntaxError):
            names = [m.group(1)[:120]]
        out += [n for n in names if n not in out]
    return out


def _profile_fit(model, data, steps: int) -> tuple:
    """Profiles ``steps`` fit steps (the step fit traced); returns the trace, allocator peak."""
    import glob
    import shutil
    import tempfile

    import tensorflow as tf

    from kswap import transfer
    from kswap.profiler.profile import read_trace
    from kswap.trace import STEP_MARKER

    device = "GPU:0" if transfer.has_gpu() else "CPU:0"
    tmp = tempfile.mkdtemp(prefix="kswap-zoo-")
    try:
        tf.config.experimental.reset_memory_stats(device)
        tf.profiler.experimental.start(tmp)
        try:
            _fit(model, data, steps, marker=STEP_MARKER)
        finally:
            tf.profiler.experimental.stop()
        peak = tf.config.experimental.get_memory_info(device)["peak"]
        paths = glob.glob(os.path.join(tmp, "plugins", "profile", "*", "*.xplane.pb"))
        if not paths:
            raise RuntimeError("the TensorFlow profiler wrote no trace")
        meta = {"model": model.name, "device": device, "steps": steps}
        return read_trace(paths[0], model, meta), int(peak)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_CALL_PREFIX = re.compile(r"^(?:(?:Stateful)?PartitionedCall(?:_\d+)?/)+")


def _floor(trace, model) -> int:
    """``benchmarks/offload.py``'s floor, with ops named inside fit's function call.

    Ops of the step ``fit`` runs are named ``StatefulPartitionedCall/...``, which
    kswap's attribution does not strip: the layer of each backward buffer is
    resolved again from its op name without that prefix.
    """
    from kswap.profiler.attribution import layer_tree, resolver

    layer_of = resolver(layer_tree(model))
    lo, hi = trace.steps[-1]
    device = trace.tier("device")
    resident = sum(
        b.size for b in device if (b.alive_at_start or b.start_ns < lo) and b.alive_at(lo)
    )
    events = sorted({b.start_ns for b in device if lo <= b.start_ns < hi})
    backward = []
    for b in device:
        op = _CALL_PREFIX.sub("", b.op or "")
        layer = b.layer or (layer_of(op) if op.startswith("gradient_tape/") else None)
        if op.startswith("gradient_tape/") and layer:
            backward.append((b, layer))
    working = 0
    for t in events:
        per_layer: dict[str, int] = {}
        for b, layer in backward:
            if b.alive_at(t):
                per_layer[layer] = per_layer.get(layer, 0) + b.size
        working = max([working, *per_layer.values()])
    return resident + working


def _attributed(trace) -> float:
    """Share of the device buffers allocated in the profiled steps that kswap gave a layer."""
    made = [b for b in trace.tier("device") if b.step is not None]
    return sum(1 for b in made if b.layer) / len(made) if made else 0.0


class _Traces:
    """Counts how often the model's train_step is traced."""

    def __init__(self, model):
        self.count = 0
        step = model.train_step

        def counted(data):
            self.count += 1
            return step(data)

        model.train_step = counted


def worker(args) -> dict:
    import warnings

    import keras
    import tensorflow as tf
    from zoo_models import CATALOGUE, build

    import kswap
    from kswap import transfer

    entry = CATALOGUE[args.model]
    dataset = entry.dataset if args.data == "catalogue" else args.data == "tf.data"
    batch = args.batch or entry.batch
    out: dict = {
        "model": entry.name,
        "offload": args.offload,
        "data": "tf.data" if dataset else "arrays",
        "batch": batch,
        "errors": {},
        "traces": {},
    }
    t0 = time.perf_counter()

    def fail(stage: str, e: BaseException) -> None:
        out["errors"][stage] = _one_line(e)
        out["errors_full"] = {**out.get("errors_full", {}), stage: str(e)[:1500]}

    keras.utils.set_random_seed(0)
    try:
        model = build(entry, args.optimizer)
        out["params"] = int(model.count_params())
        data, arrays = _data(entry, model, batch, dataset)
    except Exception as e:  # noqa: BLE001 - reported, never raised
        fail("build", e)
        return out
    if args.offload:
        try:
            model = kswap.OffloadingModel(model, policy="all")
        except Exception as e:  # noqa: BLE001
            fail("wrap", e)
            return out
    try:
        # slots made before fit: its first call then traces the step once, not twice
        model.optimizer.build(model.trainable_variables)
    except Exception as e:  # noqa: BLE001
        fail("build", e)
        return out
    traces = _Traces(model)
    device = "GPU:0" if transfer.has_gpu() else "CPU:0"
    before = set(_graph_states())
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = time.perf_counter()
            steps = _fit(model, data, args.steps)
        out["first_fit_seconds"] = time.perf_counter() - first
        out["losses"] = steps.losses
        out["warned_no_gradient"] = _warned_variables(caught)
        out["traces"]["fit"] = traces.count
    except Exception as e:  # noqa: BLE001
        fail("fit", e)
    states = _graph_states()
    fit_graphs = [states[g] for g in set(states) - before]
    out["offload_graphs_fit"] = len(fit_graphs)
    out["kept_on_device"] = sorted(
        {f"{b}: {t}" for ss in fit_graphs for s in ss for b, t in s.kept_on_device}
    )
    if "fit" not in out["errors"]:
        try:
            tf.config.experimental.reset_memory_stats(device)
            resident = tf.config.experimental.get_memory_info(device)["current"]
            timed = _fit(model, data, args.time_steps)
            out["fit_allocator_peak_bytes"] = tf.config.experimental.get_memory_info(device)["peak"]
            out["resident_bytes"] = int(resident)
            out["step_seconds"] = statistics.median(timed.seconds)
            out["traces"]["timed"] = traces.count
        except Exception as e:  # noqa: BLE001
            fail("time", e)
        try:
            trace, alloc_peak = _profile_fit(model, data, args.profile_steps)
            out["device_peak_bytes"] = trace.peak_bytes("device")
            out["host_peak_bytes"] = trace.peak_bytes("host")
            out["floor_bytes"] = _floor(trace, model)
            out["attributed_fraction"] = _attributed(trace)
            out["profiled_allocator_peak_bytes"] = alloc_peak
            out["emulated"] = trace.emulated
            out["traces"]["profiled"] = traces.count
        except Exception as e:  # noqa: BLE001
            fail("profile", e)
        if args.profile_api:
            try:
                x, y = (data[0], None) if dataset else arrays
                t = kswap.profile(model, x, y, steps=1, batch_size=None if dataset else batch)
                out["profile_api_device_peak_bytes"] = t.peak_bytes("device")
                out["traces"]["profile_api"] = traces.count
            except Exception as e:  # noqa: BLE001
                fail("profile_api", e)
    if args.tape_check:
        try:
            x, y = arrays
            out["none_gradients"] = _none_gradients(model, (x, y), dynamic=dataset)
        except Exception as e:  # noqa: BLE001
            fail("gradients", e)
    if args.offload:
        out["fallbacks"] = _fallbacks(model)
    out["seconds"] = time.perf_counter() - t0
    return out


#: A side-by-side round runs each model for about this long: several steps in a row
#: where a step takes milliseconds, so the timer and the scheduler's noise stay small.
ROUND_SECONDS = 0.25
#: The most steps in a row a round runs of each model.
MAX_IN_A_ROW = 50


def side_by_side(args) -> dict:
    """Times plain and kswap in one process: the same number of fit steps of each per round.

    A round runs each model for ``in_a_row`` steps (one epoch of one step
    each), as many as take :data:`ROUND_SECONDS` at the faster model's warm
    step, 1 to :data:`MAX_IN_A_ROW`; the ratio is of the medians of all
    steps.
    """
    import keras
    from zoo_models import CATALOGUE, build

    import kswap

    entry = CATALOGUE[args.model]
    dataset = entry.dataset if args.data == "catalogue" else args.data == "tf.data"
    batch = args.batch or entry.batch
    models, data, warm = {}, None, []
    for variant in ("plain", "kswap"):
        keras.utils.set_random_seed(0)
        model = build(entry, args.optimizer)
        if variant == "kswap":
            model = kswap.OffloadingModel(model, policy="all")
        model.optimizer.build(model.trainable_variables)
        data = data or _data(entry, model, batch, dataset)[0]
        warm.append(_fit(model, data, 2).seconds[-1])  # the first traces the step
        models[variant] = model
    in_a_row = max(1, min(MAX_IN_A_ROW, math.ceil(ROUND_SECONDS / max(min(warm), 1e-6))))
    seconds: dict[str, list[float]] = {v: [] for v in models}
    for _ in range(args.rounds):
        for variant, model in models.items():
            seconds[variant] += _fit(model, data, in_a_row).seconds
    plain, off = (statistics.median(seconds[v]) for v in ("plain", "kswap"))
    return {
        "model": entry.name,
        "plain_seconds": plain,
        "kswap_seconds": off,
        "ratio": off / plain,
        "steps_in_a_row": in_a_row,
    }


# ------------------------------------------------------------------ driver side


def _run(args, name: str, mode: str) -> dict:
    """One worker in a fresh process; a crash or time-out becomes an error entry."""
    cmd = [
        sys.executable,
        os.path.join(HERE, "zoo.py"),
        "--worker",
        mode,
        "--model",
        name,
        "--steps",
        str(args.steps),
        "--time-steps",
        str(args.time_steps),
        "--profile-steps",
        str(args.profile_steps),
        "--rounds",
        str(args.rounds),
        "--optimizer",
        args.optimizer,
        "--data",
        args.data,
        "--batch",
        str(args.batch or 0),
    ]
    if args.profile_api:
        cmd.append("--profile-api")
    if not args.tape_check:
        cmd.append("--no-tape-check")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"model": name, "errors": {"worker": f"timed out after {args.timeout:.0f} s"}}
    finally:
        elapsed = time.perf_counter() - start
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or [""]
        why = f"exit {proc.returncode}: {tail[0][:160]}"
        return {"model": name, "errors": {"worker": why}, "wall_seconds": elapsed}
    out = json.loads(lines[-1])
    out["wall_seconds"] = elapsed
    return out


def _first_error(run: dict) -> str | None:
    errors = run.get("errors") or {}
    for stage in ("worker", "build", "wrap", "fit", "time", "profile", "gradients", "profile_api"):
        if stage in errors:
            return f"{stage}: {errors[stage]}"
    return None


def _short(items: list[str], n: int = 3, width: int = 60) -> str:
    if not items:
        return "0"
    shown = ", ".join(s if len(s) <= width else s[: width - 3] + "..." for s in items[:n])
    more = f", +{len(items) - n}" if len(items) > n else ""
    return f"{len(items)}: {shown}{more}"


def summarize(name: str, plain: list[dict], off: list[dict], sbs: dict | None) -> dict:
    """The figures of one model from its runs (medians over repeats)."""
    from zoo_models import CATALOGUE

    entry = CATALOGUE.get(name)
    p0, k0 = plain[0], off[0]
    row: dict = {
        "model": name,
        "group": entry.group if entry else "",
        "note": entry.note if entry else "",
        "data": p0.get("data") or k0.get("data") or "",
        "params": p0.get("params") or k0.get("params"),
        "plain_error": _first_error(p0),
        "kswap_error": _first_error(k0),
    }

    def med(runs, key):
        vals = [r[key] for r in runs if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    for tag, runs in (("plain", plain), ("kswap", off)):
        for key in (
            "device_peak_bytes",
            "fit_allocator_peak_bytes",
            "host_peak_bytes",
            "floor_bytes",
            "step_seconds",
            "first_fit_seconds",
            "profile_api_device_peak_bytes",
        ):
            row[f"{tag}_{key}"] = med(runs, key)
    lp, lk = p0.get("losses"), k0.get("losses")
    if lp and lk and len(lp) == len(lk):
        diffs = [abs(a - b) / max(abs(a), 1e-12) for a, b in zip(lp, lk, strict=True)]
        row["loss_max_rel_diff"] = max(diffs)
        first = next((i for i, d in enumerate(diffs) if d), None)
        row["loss_first_diff"] = None if first is None else [first + 1, diffs[first]]
    row["losses_plain"], row["losses_kswap"] = lp, lk
    pd, kd = row["plain_device_peak_bytes"], row["kswap_device_peak_bytes"]
    row["saving"] = 1 - kd / pd if pd and kd else None
    ratios = [
        k["step_seconds"] / p["step_seconds"]
        for p, k in zip(plain, off, strict=False)
        if p.get("step_seconds") and k.get("step_seconds")
    ]
    row["time_ratio"] = statistics.median(ratios) if ratios else None
    row["time_ratio_side_by_side"] = (sbs or {}).get("ratio")
    if sbs and "errors" in sbs:
        row["side_by_side_error"] = _first_error(sbs)
    plain_none = set(p0.get("none_gradients") or []) | set(p0.get("warned_no_gradient") or [])
    row["no_gradient_plain"] = sorted(plain_none)
    row["no_gradient_kswap_only"] = sorted(
        (set(k0.get("none_gradients") or []) | set(k0.get("warned_no_gradient") or [])) - plain_none
    )
    row["no_gradient_checked"] = "warned_no_gradient" in p0 and "warned_no_gradient" in k0
    row["tape_checked"] = "none_gradients" in p0 and "none_gradients" in k0
    row["fallbacks"] = k0.get("fallbacks") or []
    row["kept_on_device"] = k0.get("kept_on_device") or []
    row["traces"] = {"plain": p0.get("traces"), "kswap": k0.get("traces")}
    row["wall_seconds"] = sum(r.get("wall_seconds", 0) for r in plain + off)
    row["emulated"] = any(r.get("emulated") for r in plain + off)
    return row


def _mib(n) -> str:
    return "" if n is None else f"{n / MIB:,.1f}"


def _cell(text: str, width: int = 150) -> str:
    text = (text or "").replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def _trains(row: dict) -> str:
    if row["plain_error"]:
        return "plain fails"
    if row["kswap_error"]:
        return "**no**"
    if row["no_gradient_kswap_only"]:
        return "**no grads**"
    return "yes"


def render(rows: list[dict], args_line: str) -> str:
    headers = [
        "model",
        "data",
        "trains with kswap",
        "loss max rel diff",
        "first differing step: rel diff",
        "device peak MiB plain",
        "device peak MiB kswap",
        "saving",
        "floor MiB",
        "allocator peak MiB plain / kswap",
        "time ratio",
        "no grad only with kswap",
        "fallbacks",
        "kept on device",
        "error",
    ]
    if any(r.get("time_ratio_side_by_side") is not None for r in rows):
        headers.insert(11, "time ratio side by side")
    lines = []
    for r in rows:
        diff = r.get("loss_max_rel_diff")
        cells = [
            r["model"],
            r["data"],
            _trains(r),
            "" if diff is None else f"{diff:.1e}",
            "" if not r.get("loss_first_diff") else "{}: {:.1e}".format(*r["loss_first_diff"]),
            _mib(r["plain_device_peak_bytes"]),
            _mib(r["kswap_device_peak_bytes"]),
            "" if r["saving"] is None else f"{100 * r['saving']:.1f}%",
            _mib(r["kswap_floor_bytes"]),
            (
                f"{_mib(r['plain_fit_allocator_peak_bytes'])} / "
                f"{_mib(r['kswap_fit_allocator_peak_bytes'])}"
                if r["plain_fit_allocator_peak_bytes"] or r["kswap_fit_allocator_peak_bytes"]
                else ""
            ),
            "" if r["time_ratio"] is None else f"{r['time_ratio']:.2f}",
            _cell(_short(r["no_gradient_kswap_only"]) if r["no_gradient_checked"] else "?"),
            _cell(_short(r["fallbacks"], n=2, width=80)),
            _cell(_short(r["kept_on_device"], n=2)),
            _cell(r["plain_error"] and f"plain {r['plain_error']}" or r["kswap_error"] or ""),
        ]
        if "time ratio side by side" in headers:
            sbs = r.get("time_ratio_side_by_side")
            cells.insert(11, "" if sbs is None else f"{sbs:.2f}")
        lines.append(cells)
    emulated = any(r.get("emulated") for r in rows)
    return f"{args_line}; {device_label(emulated)}\n\n" + table(headers, lines)


def distinct_failures(rows: list[dict]) -> str:
    """Errors grouped by message (names and numbers blanked), with the models they hit."""
    groups: dict[str, list[str]] = {}
    example: dict[str, str] = {}
    types: dict[str, list[str]] = {}

    def add(kind: str, text: str, model: str) -> None:
        key = re.sub(r"'[^']*'|\"[^\"]*\"|<[^>]*>|0x[0-9a-f]+|\d+|type \w+", "_", text)
        key = re.sub(r"^\S+: ", "", key)[:90] if kind == "fallback" else key[:90]
        key = f"{kind}: {key}"
        groups.setdefault(key, [])
        if model not in groups[key]:
            groups[key].append(model)
        example.setdefault(key, text)
        types.setdefault(key, []).extend(re.findall(r"of type (\w+)", text))

    for r in rows:
        if r["plain_error"]:
            add("plain", r["plain_error"], r["model"])
        if r["kswap_error"]:
            add("kswap", r["kswap_error"], r["model"])
        if r["no_gradient_kswap_only"] and not r["kswap_error"]:
            add("kswap", "trainable variables get no gradient only with kswap", r["model"])
        for f in r["fallbacks"]:
            add("fallback", f.split(": ", 1)[-1], r["model"])
        trains = not (r["kswap_error"] or r["plain_error"] or r["no_gradient_kswap_only"])
        if trains and r.get("loss_max_rel_diff"):
            add("kswap", "losses differ from the plain model's (not bit-identical)", r["model"])
        if r["no_gradient_plain"]:
            add("plain", "trainable variables get no gradient without kswap either", r["model"])
        if r["kept_on_device"]:
            add("kept", "tensors read from the device in backward", r["model"])
    lines = []
    for key, models in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        kinds = sorted(set(types.get(key, [])))
        also = f" (types: {', '.join(kinds)})" if len(kinds) > 1 else ""
        lines.append(f"- ({len(models)}) {_cell(example[key], 220)}{also}: {', '.join(models)}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="all", help="names and groups, comma separated")
    p.add_argument("--repeats", type=int, default=1, help="fresh process pairs per model")
    p.add_argument("--steps", type=int, default=5, help="fit steps whose losses are compared")
    p.add_argument("--time-steps", type=int, default=5, help="timed fit steps (median)")
    p.add_argument("--profile-steps", type=int, default=2, help="profiled fit steps")
    p.add_argument("--batch", type=int, default=0, help="samples per step (0: the catalogue's)")
    p.add_argument(
        "--data",
        default="catalogue",
        choices=["catalogue", "arrays", "tf.data"],
        help="what fit reads (catalogue: per model)",
    )
    p.add_argument("--optimizer", default="adam")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per worker")
    p.add_argument("--jobs", type=int, default=1, help="workers at once (shares the cores)")
    p.add_argument("--time-side-by-side", action="store_true", help="also time in one process")
    p.add_argument("--rounds", type=int, default=10, help="side-by-side rounds")
    p.add_argument(
        "--only-side-by-side",
        action="store_true",
        help="only the side-by-side timing (no compared steps, peaks or gradients)",
    )
    p.add_argument("--profile-api", action="store_true", help="also run kswap.profile")
    p.add_argument(
        "--no-tape-check",
        dest="tape_check",
        action="store_false",
        help="skip the GradientTape check (one more trace); fit's warning still counts",
    )
    p.add_argument("--out", help="write the results as JSON here (after every model)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--from-json", help="print the table of earlier --out files (comma list)")
    p.add_argument("--worker", choices=["plain", "kswap", "side"], help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    sys.path.insert(0, HERE)
    if args.worker:
        if args.worker == "side":
            result = side_by_side(args)
        else:
            args.offload = args.worker == "kswap"
            result = worker(args)
        print(json.dumps(result))
        return
    if args.from_json:
        rows, lines = [], []
        for path in args.from_json.split(","):
            with open(path) as f:
                saved = json.load(f)
            for name, runs in saved["runs"].items():
                if runs["plain"] and runs["kswap"]:  # both configurations ran
                    rows.append(
                        summarize(name, runs["plain"], runs["kswap"], (runs["side"] or [None])[0])
                    )
            lines.append(saved["args"])
        print(render(rows, "; ".join(dict.fromkeys(lines))))
        print("\nDistinct failures:\n")
        print(distinct_failures(rows))
        return
    from zoo_models import select

    names = select(args.models)
    if args.only_side_by_side:
        side_by_side_only(args, names)
        return
    args_line = (
        f"`model.fit`, Adam, seed 0; {args.steps} compared steps, "
        f"{args.time_steps} timed, {args.profile_steps} profiled; "
        f"{args.repeats} fresh process pair(s) per model"
        + (f", {args.jobs} workers at once" if args.jobs > 1 else "")
        + ("" if args.tape_check else ", no tape check")
    )
    rows, start = [], time.perf_counter()
    runs_of: dict[str, dict[str, list]] = {n: {"plain": [], "kswap": [], "side": []} for n in names}
    jobs = [(n, mode) for n in names for _ in range(args.repeats) for mode in ("plain", "kswap")]
    if args.time_side_by_side:
        jobs += [(n, "side") for n in names]
    jobs.sort(key=lambda j: names.index(j[0]))
    pending = {n: sum(1 for j in jobs if j[0] == n) for n in names}

    def done(name: str, mode: str, result: dict) -> None:
        runs_of[name][mode].append(result)
        pending[name] -= 1
        _progress(start, name, mode, result)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [(n, m, pool.submit(_run, args, n, m)) for n, m in jobs]
        for name in names:
            for n, m, fut in futures:
                if n == name:
                    done(n, m, fut.result())
            r = runs_of[name]
            rows.append(summarize(name, r["plain"], r["kswap"], (r["side"] or [None])[0]))
            if args.out:
                with open(args.out, "w") as f:
                    json.dump({"args": args_line, "rows": rows, "runs": runs_of}, f, indent=1)
    total = time.perf_counter() - start
    args_line += f"; sweep took {total / 60:.0f} min"
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": args_line, "rows": rows, "runs": runs_of}, f, indent=1)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(render(rows, args_line))
    print("\nDistinct failures:\n")
    print(distinct_failures(rows))


def _progress(start: float, name: str, mode: str, result: dict) -> None:
    """One worker's line on stderr: its outcome and wall time."""
    err = _first_error(result)
    print(
        f"[{time.perf_counter() - start:7.0f} s] {name} {mode}: "
        f"{'ok' if not err else err[:150]} ({result.get('wall_seconds', 0):.0f} s)",
        file=sys.stderr,
        flush=True,
    )


def side_by_side_only(args, names: list[str]) -> None:
    """``--only-side-by-side``: each model's side-by-side worker, one at a time, and a table."""
    rows, start = [], time.perf_counter()
    for name in names:
        result = _run(args, name, "side")
        _progress(start, name, "side", result)
        rows.append({"model": name, **result})
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"args": f"{args.rounds} rounds", "side": rows}, f, indent=1)
    print(
        f"Side by side in one process ({args.rounds} rounds of up to {MAX_IN_A_ROW} steps in a "
        f"row per model, about {ROUND_SECONDS} s each):\n"
    )
    body = [
        [
            r["model"],
            *(
                (f"{1e3 * r['plain_seconds']:.1f}", f"{1e3 * r['kswap_seconds']:.1f}")
                if "ratio" in r
                else ("", "")
            ),
            str(r.get("steps_in_a_row", "")),
            f"{r['ratio']:.2f}" if "ratio" in r else "",
            _first_error(r) or "",
        ]
        for r in rows
    ]
    print(table(["model", "plain ms", "kswap ms", "steps in a row", "ratio", "error"], body))


if __name__ == "__main__":
    main()
