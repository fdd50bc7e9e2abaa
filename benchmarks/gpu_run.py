"""The benchmarks on one GPU, written as markdown for docs/benchmarks.md.

    python benchmarks/gpu_run.py --out gpu-results.md          # on a machine with a GPU
    python benchmarks/gpu_run.py --dry-run --out dry-run.md    # on CPU, tiny sizes, < 1 minute
    python benchmarks/gpu_run.py --stages device,link          # some stages only

``benchmarks/gpu.sh`` installs kswap with ``tensorflow[and-cuda]`` and runs
this. Stages, each in a fresh process of its own (the allocator counts every
live tensor, and a run out of memory may abort its process), each with a
time budget inside a total of 10 minutes:

1. ``device``: the GPU TensorFlow sees (name, compute capability, memory),
   TensorFlow's, Keras's and kswap's versions.
2. ``link``: host<->device copy bandwidth both ways and a copy's latency,
   ``kswap.transfer.measure_link`` (kswap's own copies, into TensorFlow's
   pinned host pool and back).
3. ``offload``: ``benchmarks/offload.py`` on ResNet50 and VGG16 at 224x224,
   variants baseline, all, all@0 (prefetch 0), conv and all+host (Adam's
   slots on the host): device peak and step time.
4. ``vdnn``: the vDNN paper's experiment. VGG16 (1000 classes, Adam) at
   batch 256, float32, 224x224: an unlimited run at that batch (its step
   time is the reference), then, each in a process whose device is limited
   to 12 GiB (``kswap.allocator.configure(memory_limit=...)``, a logical
   device), the plain model (expected to run out of memory) and the model
   wrapped by ``kswap.OffloadingModel`` with ``kswap.AutoTune(budget=the
   limit)`` (expected to train). kswap's static estimate (docs/benchmarks.md,
   "VGG-16 at batch 256, 224x224, float32, against 12 GiB") puts the smallest
   feasible budget at 10.36 GiB on a K40 under its own model of the step
   (a plan of 11.90 GiB for 12 GiB); whatever happens is recorded as it
   happens.
5. ``simulator``: ``benchmarks/simulator.py --parts memory,time`` on
   ResNet50: the simulator's predicted device peak (one fresh process per
   plan: baseline, ``all``, ``conv`` and AutoTune's) and step time against
   the measured ones. On a GPU the host tier is TensorFlow's pinned host
   pool, apart from the device's allocator, so the device peak is not
   emulated (the dry run measures the step time only).
6. ``exactness``: the exactness tests (``tests/layers/test_exactness.py``,
   ``tests/layers/test_exactness_zoo.py``) run on the GPU; the pytest summary.

A stage that fails, runs out of time or runs out of memory is recorded as
such in the markdown, and the run goes on. Every figure is labelled with the
device it was measured on and the command that made it.

``--dry-run`` runs every stage on CPU (``CUDA_VISIBLE_DEVICES`` empty, device
memory emulated on CPU:0) at tiny sizes: small inputs and batches,
``TinyVGG`` (``benchmarks/offload.py``: VGG's shape in miniature) in place of
ResNet50 and VGG16, a memory limit scaled to the unlimited run's peak as
12 GiB is to VGG16's need, 1-2 steps, one exactness test; independent stages
run side by side. Its figures say nothing about a GPU; it keeps the script
working (the test suite runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

GIB = 2**30
MIB = 2**20
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STAGES = ("device", "link", "offload", "vdnn", "simulator", "exactness")
#: The whole run's time, seconds.
TOTAL_SECONDS = 600
#: What the vDNN paper's 12 GB GPU is to VGG16 at batch 256 (28 GB): the
#: fraction of the unlimited run's peak the dry run limits its device to.
VDNN_FRACTION = 12 / 28
TITLES = {
    "device": "Device",
    "link": "Host<->device copy bandwidth",
    "offload": "Offloading: device memory and step time",
    "vdnn": "vDNN's experiment: VGG16, batch 256, float32, against 12 GiB",
    "simulator": "The simulator against measurement",
    "exactness": "Exactness tests on the device",
}


@dataclass
class Sizes:
    """What each stage runs: the real sizes or the dry run's."""

    budgets: dict[str, int]
    link_bytes: int
    offload_models: str
    offload_input: str
    offload_batch: int
    offload_steps: int
    offload_variants: str
    vdnn_model: str
    vdnn_input: str
    vdnn_batch: int
    vdnn_classes: int
    vdnn_steps: int
    vdnn_limit: int | None  # None: scaled from the unlimited run's peak
    sim_models: str
    sim_input: str
    sim_batch: int
    sim_rounds: int
    sim_parts: str
    exactness: list[str] = field(default_factory=list)


REAL = Sizes(
    budgets={
        "device": 60,
        "link": 60,
        "offload": 200,
        "vdnn": 150,
        "simulator": 240,
        "exactness": 120,
    },
    link_bytes=256 * MIB,
    offload_models="ResNet50,VGG16",
    offload_input="224,224,3",
    offload_batch=32,
    offload_steps=3,
    offload_variants="baseline,all,all@0,conv,all+host",
    vdnn_model="VGG16",
    vdnn_input="224,224,3",
    vdnn_batch=256,
    vdnn_classes=1000,
    vdnn_steps=14,
    vdnn_limit=12 * GIB,
    sim_models="ResNet50",
    sim_input="224,224,3",
    sim_batch=32,
    sim_rounds=6,
    sim_parts="memory,time",
    exactness=["tests/layers/test_exactness.py", "tests/layers/test_exactness_zoo.py"],
)
DRY = Sizes(
    budgets={**{s: 90 for s in STAGES}, "vdnn": 150},  # a busy CPU is slow
    link_bytes=4 * MIB,
    offload_models="TinyVGG",
    offload_input="32,32,3",
    offload_batch=2,
    offload_steps=1,
    offload_variants="baseline,all",
    vdnn_model="TinyVGG",
    vdnn_input="32,32,3",
    vdnn_batch=32,
    vdnn_classes=10,
    vdnn_steps=2,
    vdnn_limit=None,
    sim_models="TinyVGG",
    sim_input="32,32,3",
    sim_batch=2,
    sim_rounds=2,
    sim_parts="time",
    exactness=[
        "tests/layers/test_exactness.py::test_softmax_classifier_losses[sparse_categorical_crossentropy]"
    ],
)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (exit code 2)."""

    def error(self, message: str):
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


@dataclass
class Result:
    """What one stage's process left: its outcome, output and time."""

    outcome: str  # "ok", "failed", "out of memory", "timed out", "skipped"
    seconds: float
    stdout: str = ""
    detail: str = ""
    data: dict = field(default_factory=dict)


#: What a process out of device memory says: TensorFlow's error, or the abort
#: of a kernel whose allocation failed (docs/allocator.md, ``configure``).
_OOM = re.compile(r"ResourceExhausted|\bOOM\b|Check failed: dtype\(\)")


def _last_json(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return {}
    return {}


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[-1])[:300] if lines else ""


def _errors(text: str) -> list[str]:
    """The lines of a process's output but its warnings (kswap's own name out-of-memory aborts)."""
    lines, skip = [], False
    for ln in text.splitlines():
        if re.search(r"\w+Warning: ", ln):
            skip = True  # the warning, and the source line printed under it
            continue
        if skip and ln.startswith(" "):
            continue
        skip = False
        lines.append(ln)
    return lines


def run_stage(args: list[str], timeout: float, env: dict[str, str]) -> Result:
    """Runs ``python ARGS`` from the project root in a fresh process, within ``timeout`` s.

    A process that raised out of memory, or aborted with an out-of-memory
    message, is ``"out of memory"``; one over its time ``"timed out"``.
    """
    if timeout <= 0:
        return Result("skipped", 0.0, detail="the run's time budget was spent")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return Result(
            "timed out", time.perf_counter() - t0, out, f"over its budget of {timeout:.0f} s"
        )
    seconds = time.perf_counter() - t0
    data = _last_json(proc.stdout)
    if proc.returncode == 0:
        outcome = data.get("outcome", "ok")
        return Result(outcome, seconds, proc.stdout, data.get("error", ""), data)
    oom = any(_OOM.search(ln) for ln in _errors(proc.stderr + "\n" + proc.stdout))
    lines = [ln for ln in _errors(proc.stderr) if _OOM.search(ln)] if oom else []
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        detail = f"killed by {name}: "
    else:
        detail = f"exit code {proc.returncode}: "
    detail += _tail(lines[-1] if lines else "\n".join(_errors(proc.stderr)))
    detail = detail.replace(ROOT + os.sep, "")
    return Result("out of memory" if oom else "failed", seconds, proc.stdout, detail, data)


# ---------------------------------------------------------------- stage workers


def device_worker() -> dict:
    """The device TensorFlow sees, and the versions."""
    import keras
    import tensorflow as tf

    import kswap

    gpus = tf.config.list_physical_devices("GPU")
    out = {
        "gpus": [],
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "kswap": kswap.__version__,
        "python": platform.python_version(),
        "cuda": tf.sysconfig.get_build_info().get("cuda_version"),
        "cudnn": tf.sysconfig.get_build_info().get("cudnn_version"),
    }
    for gpu in gpus:
        details = tf.config.experimental.get_device_details(gpu)
        out["gpus"].append(
            {
                "name": details.get("device_name", gpu.name),
                "compute_capability": details.get("compute_capability"),
            }
        )
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        out["nvidia_smi"] = smi.stdout.strip().splitlines() if smi.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        out["nvidia_smi"] = []
    return out


def link_worker(nbytes: int) -> dict:
    """``kswap.transfer.measure_link`` at ``nbytes``."""
    from kswap import transfer

    link = transfer.measure_link(nbytes, repeats=5)
    return {**link.to_dict(), "nbytes": nbytes, "emulated": not transfer.has_gpu()}


def vdnn_worker(mode: str, model_name: str, input_shape: str, batch: int, classes: int,
                steps: int, limit: int | None) -> dict:  # fmt: skip
    """One run of the vDNN experiment: ``plain`` or ``autotune``, limited or not.

    Trains ``steps`` steps of one repeated batch through ``fit``; the step time
    is the median time between the ends of the last three steps (after
    AutoTune's last plan). Out of memory is reported, not raised.
    """
    import kswap

    if limit:
        kswap.allocator.configure(memory_limit=limit)
    import keras
    import tensorflow as tf

    from kswap.modelspec import build_model, synthetic_data

    sys.path.insert(0, HERE)
    from offload import IMAGE_MODELS

    shape = tuple(int(s) for s in input_shape.split(","))
    ends: list[float] = []
    timer = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda *_, **__: ends.append(time.perf_counter())
    )
    out: dict = {"mode": mode, "limit_bytes": limit, "emulated": not kswap.transfer.has_gpu()}
    tune = None
    try:
        keras.utils.set_random_seed(0)
        if model_name in IMAGE_MODELS:
            model = IMAGE_MODELS[model_name](shape, classes)
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        else:
            model = build_model(f"keras.applications.{model_name}", shape, classes=classes)
        x, y = synthetic_data(model, batch)
        callbacks = [timer]
        if mode == "autotune":
            model = kswap.OffloadingModel(model)
            tune = kswap.AutoTune(limit, profile_steps=1, verbose=0)
            callbacks.insert(0, tune)
        data = tf.data.Dataset.from_tensors((x, y)).repeat()
        start = time.perf_counter()
        model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=callbacks)
        out["fit_seconds"] = time.perf_counter() - start
    except tf.errors.ResourceExhaustedError as e:
        out.update(outcome="out of memory", error=_tail(str(e).split("\n")[0]))
        return out
    except Exception as e:  # recorded, and the run goes on
        message = f"{type(e).__name__}: {_tail(str(e))}"
        out.update(outcome="out of memory" if _OOM.search(message) else "failed", error=message)
        return out
    gaps = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    out["step_seconds"] = statistics.median(gaps[-3:]) if gaps else out["fit_seconds"]
    out["steps"] = len(ends)
    if not limit or mode == "plain":
        try:
            info = tf.config.experimental.get_memory_info(kswap.transfer.device_name())
            out["peak_bytes"] = info["peak"]
        except (ValueError, RuntimeError):
            pass
    if tune is not None:
        plan = tune.plan
        out["peak_bytes"] = tune.measured_peak_bytes
        out["autotune_baseline_bytes"] = tune.baseline_peak_bytes
        out["rounds"] = len(tune.rounds)
        out["counts"] = plan.counts() if plan else {}
        out["predicted_slowdown"] = plan.slowdown if plan else None
        out["optimizer_state"] = plan.optimizer_state if plan else None
    out["outcome"] = "ok"
    return out


# ---------------------------------------------------------------- markdown


def _cmd(args: list[str]) -> str:
    return "python " + " ".join(shlex.quote(a) for a in args)


def _gib(n: float | None) -> str:
    return "" if n is None else f"{n / GIB:,.2f} GiB" if n >= GIB else f"{n / MIB:,.1f} MiB"


def _tables(stdout: str) -> str:
    """The summary a benchmark script prints: from its last ``input ...`` line on.

    Tables without rows are dropped.
    """
    lines = stdout.splitlines()
    start = max((i for i, ln in enumerate(lines) if ln.startswith("input ")), default=0)
    blocks, block = [], []
    for ln in [*lines[start:], ""]:
        if ln.strip():
            block.append(ln)
        elif block:
            blocks.append(block)
            block = []
    kept = [b for b in blocks if not (b[0].startswith("|") and len(b) <= 2)]
    return "\n\n".join("\n".join(b) for b in kept)


def _status(r: Result) -> str:
    text = f"**{r.outcome}** ({r.seconds:.0f} s)"
    return text + (f": {r.detail}" if r.detail else "")


class Report:
    """The markdown, section by section."""

    def __init__(self, dry: bool):
        self.dry = dry
        self.device = "CPU, emulated" if dry else "unknown device"
        self.parts: dict[str, str] = {}

    def section(self, stage: str, commands: list[str], body: str) -> None:
        cmds = "\n".join(f"    {c}" for c in commands)
        self.parts[stage] = (
            f"#### {TITLES[stage]}\n\nDevice: {self.device}. Command"
            f"{'s' if len(commands) > 1 else ''}:\n\n{cmds}\n\n{body.strip()}\n"
        )

    def text(self, total: float, argv: list[str]) -> str:
        mode = "dry run on CPU, tiny sizes, device memory emulated; " if self.dry else ""
        head = (
            f"### Measured on {self.device}\n\n"
            f"Made by `{_cmd(['benchmarks/gpu_run.py', *argv])}` "
            f"({mode}device: {self.device}; {total:.0f} s in all).\n"
        )
        return "\n".join([head, *(self.parts[s] for s in STAGES if s in self.parts)])


def main(argv: list[str] | None = None) -> int:
    p = _Parser(
        prog="gpu_run.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dry-run", action="store_true", help="on CPU, tiny sizes (for the tests)")
    p.add_argument("--out", default="gpu-results.md", help="the markdown file to write")
    p.add_argument("--stages", default=",".join(STAGES), help="of " + ", ".join(STAGES))
    p.add_argument("--total-seconds", type=float, default=TOTAL_SECONDS, help="the run's budget")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--spec", default="{}", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    if args.worker:  # one stage's process: prints its JSON
        spec = json.loads(args.spec)
        fn = {"device": device_worker, "link": link_worker, "vdnn": vdnn_worker}[args.worker]
        print(json.dumps(fn(**spec), default=str), flush=True)
        return 0
    stages = args.stages.split(",")
    bad = [s for s in stages if s not in STAGES]
    if bad:
        p.error(f"unknown stage {bad[0]!r}; stages are {', '.join(STAGES)}")
    if args.total_seconds <= 0:
        p.error(f"--total-seconds must be > 0, got {args.total_seconds}")
    sizes = DRY if args.dry_run else REAL
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    if args.dry_run:
        env["CUDA_VISIBLE_DEVICES"] = ""
    report = Report(args.dry_run)
    t_start = time.perf_counter()

    def left(stage: str) -> float:
        return min(sizes.budgets[stage], args.total_seconds - (time.perf_counter() - t_start))

    def worker(name: str, **spec) -> list[str]:
        return ["benchmarks/gpu_run.py", "--worker", name, "--spec", json.dumps(spec)]

    def run(stage: str) -> None:
        print(f"[{time.perf_counter() - t_start:5.0f} s] {stage}", file=sys.stderr, flush=True)
        STAGE_RUNNERS[stage](report, sizes, left, worker, env)

    # on a GPU one stage at a time (they would share the device); the dry
    # run's processes side by side
    with ThreadPoolExecutor(3 if args.dry_run else 1) as pool:
        list(pool.map(run, stages))
    total = time.perf_counter() - t_start
    with open(args.out, "w") as f:
        f.write(report.text(total, argv))
    print(f"wrote {args.out} ({total:.0f} s)", file=sys.stderr)
    return 0


def _device(report: Report, sizes: Sizes, left, worker, env) -> None:
    cmd = worker("device")
    r = run_stage(cmd, left("device"), env)
    d = r.data
    if r.outcome == "ok" and not report.dry:
        names = ", ".join(g["name"] for g in d["gpus"])
        report.device = names or "CPU, emulated (TensorFlow sees no GPU)"
    gpus = d.get("gpus", [])
    rows = [
        f"- GPUs TensorFlow sees: {', '.join(g['name'] for g in gpus) or 'none'}",
        f"- compute capability: {', '.join(str(g['compute_capability']) for g in gpus) or '-'}",
        f"- nvidia-smi (name, memory, driver): {'; '.join(d.get('nvidia_smi', [])) or '-'}",
        f"- TensorFlow {d.get('tensorflow')}, Keras {d.get('keras')}, kswap {d.get('kswap')}, "
        f"Python {d.get('python')}; built with CUDA {d.get('cuda')}, cuDNN {d.get('cudnn')}",
    ] if d else []  # fmt: skip
    report.section("device", [_cmd(cmd[:3])], _status(r) + "\n\n" + "\n".join(rows))


def _link(report: Report, sizes: Sizes, left, worker, env) -> None:
    cmd = worker("link", nbytes=sizes.link_bytes)
    r = run_stage(cmd, left("link"), env)
    body = _status(r)
    if r.outcome == "ok":
        d = r.data
        body += (
            f"\n\n`kswap.transfer.measure_link({sizes.link_bytes})`, median of 5 copies per size "
            "and direction:\n\n"
            + _table(
                ["direction", "bandwidth GB/s"],
                [
                    ["host -> device", f"{d['h2d_bytes_per_s'] / 1e9:.2f}"],
                    ["device -> host", f"{d['d2h_bytes_per_s'] / 1e9:.2f}"],
                ],
            )
            + f"\n\nlatency of one copy in the graph: {d['latency_s'] * 1e6:.1f} us"
        )
    report.section("link", [_cmd(cmd)], body)


def _table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def _offload(report: Report, sizes: Sizes, left, worker, env) -> None:
    # benchmarks/compare.py's table goes here once it exists; until then the
    # variants of benchmarks/offload.py stand in for it.
    cmd = [
        "benchmarks/offload.py",
        "--models", sizes.offload_models,
        "--input", sizes.offload_input,
        "--batch", str(sizes.offload_batch),
        "--variants", sizes.offload_variants,
        "--steps", str(sizes.offload_steps),
        "--repeats", "1",
    ]  # fmt: skip
    r = run_stage(cmd, left("offload"), env)
    body = _status(r)
    if r.stdout:
        body += "\n\n" + _tables(r.stdout)
    report.section("offload", [_cmd(cmd)], body)


def _vdnn(report: Report, sizes: Sizes, left, worker, env) -> None:
    spec = dict(
        model_name=sizes.vdnn_model,
        input_shape=sizes.vdnn_input,
        batch=sizes.vdnn_batch,
        classes=sizes.vdnn_classes,
        steps=sizes.vdnn_steps,
    )
    # each run gets a third of what is left, the ones after it what it did not use
    t_end = time.perf_counter() + left("vdnn")
    runs: list[tuple[str, list[str], Result]] = []
    cmd = worker("vdnn", mode="plain", limit=None, **spec)
    base = run_stage(cmd, (t_end - time.perf_counter()) / 3, env)
    runs.append(("plain, unlimited (the reference)", cmd, base))
    limit = sizes.vdnn_limit
    if limit is None:  # the dry run: scaled to the unlimited run's peak
        peak = base.data.get("peak_bytes")
        # whole MiB: the emulation's limit is set in MB
        limit = max(round(VDNN_FRACTION * peak / MIB), 1) * MIB if peak else 16 * MIB
    limited = (("plain", "plain", 2), ("OffloadingModel + AutoTune(budget=limit)", "autotune", 1))
    for label, mode, n_left in limited:
        cmd = worker("vdnn", mode=mode, limit=limit, **spec)
        r = run_stage(cmd, (t_end - time.perf_counter()) / n_left, env)
        runs.append((f"{label}, limit {_gib(limit)}", cmd, r))
    rows = []
    ref = base.data.get("step_seconds") if base.outcome == "ok" else None
    for label, _, r in runs:
        d = r.data if r.outcome == "ok" else {}
        step = d.get("step_seconds")
        counts = ", ".join(f"{k} {v}" for k, v in (d.get("counts") or {}).items())
        rows.append(
            [
                label,
                r.outcome + (f" ({r.detail})" if r.detail and r.outcome != "ok" else ""),
                f"{step * 1000:.0f}" if step else "",
                f"{step / ref:.2f}" if step and ref else "",
                _gib(d.get("peak_bytes")),
                counts + (f"; predicted slowdown {d['predicted_slowdown']:.3f}"
                          if d.get("predicted_slowdown") else ""),
            ]
        )  # fmt: skip
    origin = "benchmarks/offload.py" if report.dry else "keras.applications, `weights=None`"
    body = (
        f"{sizes.vdnn_model} ({origin}, {sizes.vdnn_classes} classes, "
        f"Adam), input {sizes.vdnn_input}, batch {sizes.vdnn_batch}, float32; {sizes.vdnn_steps} "
        "steps of `fit` on one repeated batch, step time the median of the last three "
        "(after AutoTune's last plan); each run in a fresh process.\n\n"
        + _table(["run", "outcome", "step ms", "time / unlimited", "device peak", "plan"], rows)
    )
    if report.dry:
        body += (
            "\n\nEmulated on CPU, the limit also holds the emulated host tier, so it cannot "
            "show an offloaded model fitting (docs/allocator.md, `configure`)."
        )
    report.section("vdnn", [_cmd(c) for _, c, _ in runs], body)


def _simulator(report: Report, sizes: Sizes, left, worker, env) -> None:
    cmd = [
        "benchmarks/simulator.py",
        "--models", sizes.sim_models,
        "--input", sizes.sim_input,
        "--batch", str(sizes.sim_batch),
        "--rounds", str(sizes.sim_rounds),
        "--parts", sizes.sim_parts,
        "--repeats", "1",
    ]  # fmt: skip
    r = run_stage(cmd, left("simulator"), env)
    body = _status(r)
    if r.stdout:
        body += "\n\n" + _tables(r.stdout)
    report.section("simulator", [_cmd(cmd)], body)


def _exactness(report: Report, sizes: Sizes, left, worker, env) -> None:
    cmd = ["-m", "pytest", *sizes.exactness, "-q", "-p", "no:cacheprovider"]
    r = run_stage(cmd, left("exactness"), env)
    summary = _tail(r.stdout)
    if r.outcome == "failed" and re.search(r"passed|failed|error", summary):
        r.detail = ""  # the summary says it
    report.section("exactness", [_cmd(cmd)], _status(r) + (f"\n\n    {summary}" if summary else ""))


STAGE_RUNNERS = {
    "device": _device,
    "link": _link,
    "offload": _offload,
    "vdnn": _vdnn,
    "simulator": _simulator,
    "exactness": _exactness,
}


if __name__ == "__main__":
    sys.exit(main())
