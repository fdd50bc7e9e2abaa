"""The demo's options and its three runs, each in a fresh Python process.

The allocator counts every live tensor of its process, so each run (the
plain model, ``kswap.OffloadingModel(model)``, and that with
``kswap.AutoTune``) trains in a process of its own
(``python -m kswap.demo._child``), with its output (Keras's progress bars)
shown as it comes.

Example:
    >>> from kswap.demo.runner import Options
    >>> Options(batch=0).check()
    Traceback (most recent call last):
    ...
    ValueError: `batch` must be an integer >= 1. Received: batch=0
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys

__all__ = ["RUNS", "Options", "parse_input", "run_all"]

#: The runs, in order: the plain model, offloaded, offloaded and tuned.
RUNS = ("baseline", "offload", "autotune")
#: What the demo writes in its directory (removed first when it runs again).
OUTPUTS = ("logs", "runs", "demo.json", "memory.json", "memory.png", "packing.png", "plan.md")


@dataclasses.dataclass(frozen=True)
class Options:
    """What the demo trains, how long, and where it writes.

    Attributes:
        model: A keras.applications name (``keras.applications.MobileNetV2``)
            or ``package.module:factory``.
        input: The input shape without the batch, ``(160, 160, 3)``.
        batch: Samples per step.
        steps: Timed steps per run (their median is the step time).
        budget: AutoTune's budget: a fraction of the device peak with every
            block kept (``0.5``), or a size (``"300MiB"``).
        out: The directory written to (its demo outputs are replaced).
        classes: Classes of the classifier.
        optimizer: The optimizer's name.
    """

    model: str = "keras.applications.MobileNetV2"
    input: tuple[int, ...] = (160, 160, 3)
    batch: int = 32
    steps: int = 10
    budget: str = "0.5"
    out: str = "demo"
    classes: int = 10
    optimizer: str = "adam"

    def check(self) -> Options:
        """Checks every option without running TensorFlow; returns ``self``.

        Raises:
            ValueError: Naming the option and the value received.
        """
        for name in ("batch", "steps", "classes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be an integer >= 1. Received: {name}={value!r}")
        if not self.input or any(not isinstance(d, int) or d < 1 for d in self.input):
            raise ValueError(
                f"`input` must be positive integers, e.g. 160,160,3. Received: input={self.input!r}"
            )
        from kswap.planning import parse_budget

        parse_budget(self.budget)
        if os.path.exists(self.out) and not os.path.isdir(self.out):
            raise ValueError(f"`out` must be a directory. Received: out={self.out!r}")
        return self

    @property
    def logdir(self) -> str:
        """The TensorBoard logdir, absolute."""
        return os.path.abspath(os.path.join(self.out, "logs"))


def parse_input(text: str) -> tuple[int, ...]:
    """``"160,160,3"`` -> ``(160, 160, 3)``, without importing Keras.

    Raises:
        ValueError: Naming ``input`` and the text received.
    """
    try:
        shape = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        shape = ()
    if not shape or any(d < 1 for d in shape):
        raise ValueError(
            "`input` must be positive integers separated by commas, e.g. 160,160,3. "
            f"Received: input={text!r}"
        )
    return shape


def _clear(out: str) -> None:
    for name in OUTPUTS:
        path = os.path.join(out, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


def run_all(options: Options) -> dict[str, dict]:
    """Runs :data:`RUNS` one after the other, each in a fresh process.

    Returns:
        Each run's result (see :mod:`kswap.demo._child`), by run name.

    Raises:
        RuntimeError: A run failed (its own error, in one line).
    """
    out = options.out
    os.makedirs(out, exist_ok=True)
    _clear(out)
    runs_dir = os.path.join(out, "runs")
    os.makedirs(runs_dir)
    results = {}
    for i, name in enumerate(RUNS, 1):
        print(f"\n=== run {i}/{len(RUNS)}: {_title(name, options)} (fresh process) ===", flush=True)
        job = {
            "run": name,
            "model": options.model,
            "input": list(options.input),
            "batch": options.batch,
            "classes": options.classes,
            "optimizer": options.optimizer,
            "steps": options.steps,
            "budget": options.budget,
            "logdir": options.logdir,
            "out": os.path.abspath(os.path.join(runs_dir, f"{name}.json")),
            "sys_path": [os.getcwd(), *sys.path],
            "packing": (
                os.path.abspath(os.path.join(out, "packing.png")) if name == "baseline" else None
            ),
        }
        job_path = os.path.join(runs_dir, f"{name}.job.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        cmd = [sys.executable, "-m", "kswap.demo._child", job_path]
        code = subprocess.run(cmd, env=env).returncode
        try:
            with open(job["out"]) as f:
                payload = json.load(f)
        except (OSError, ValueError):
            payload = {"error": f"exit code {code}, no result written"}
        if "error" in payload:
            raise RuntimeError(f"The demo's {name} run failed: {payload['error']}")
        results[name] = payload["result"]
    return results


def _title(name: str, options: Options) -> str:
    shape = "x".join(str(d) for d in options.input)
    what = {
        "baseline": "the plain model",
        "offload": "kswap.OffloadingModel(model)",
        "autotune": f"kswap.OffloadingModel(model) with kswap.AutoTune(budget={options.budget})",
    }[name]
    return f"{what}: {options.model}, {shape}, batch {options.batch}"
