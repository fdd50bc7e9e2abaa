"""Shared helpers for the benchmarks: fresh-process runs and markdown tables."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

MIB = 1024 * 1024


def run_json(args: list[str]) -> dict:
    """Runs ``python ARGS`` in a fresh process; returns the JSON of its last line."""
    cmd = [sys.executable, *args]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)[:300]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_worker(script: str, **options) -> dict:
    """Runs ``script --worker --OPTION VALUE ...`` in a fresh process; returns its JSON.

    Option names are given with underscores (``input_shape`` -> ``--input-shape``).
    """
    args = [script, "--worker"]
    for name, value in options.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    return run_json(args)


def measure_fresh(model: str, input_shape: str, batch: int, steps: int = 3) -> dict:
    """Runs ``kswap measure`` in a fresh process (nothing else alive) and parses it."""
    args = ["--model", model, "--input", input_shape, "--batch", str(batch)]
    return run_json(["-m", "kswap", "measure", *args, "--steps", str(steps), "--json"])


def model_args(parser, *, models: str, input_shape: str, batch: int) -> None:
    """The arguments every per-model benchmark takes."""
    parser.add_argument("--models", default=models, help="keras.applications names")
    parser.add_argument("--input", default=input_shape, help="input shape, e.g. 64,64,3")
    parser.add_argument("--batch", type=int, default=batch)


def per_model(description: str, code: str, **defaults):
    """Parses the per-model arguments; returns them and ``(name, result)`` pairs.

    Each model runs ``python -c CODE keras.applications.NAME INPUT BATCH`` in a
    fresh process (lazily, as the pairs are consumed).
    """
    parser = argparse.ArgumentParser(description=description)
    model_args(parser, **defaults)
    args = parser.parse_args()
    spec = [args.input, str(args.batch)]
    pairs = (
        (name, run_json(["-c", code, f"keras.applications.{name}", *spec]))
        for name in args.models.split(",")
    )
    return args, pairs


def inter_op_threads_arg(parser, help_extra: str = "") -> None:
    """The ``--inter-op-threads`` option: TensorFlow's inter-op threads in each worker."""
    parser.add_argument(
        "--inter-op-threads",
        type=int,
        default=0,
        help="TensorFlow's inter-op threads in each process (0: its default)" + help_extra,
    )


def set_inter_op_threads(n: int) -> None:
    """Sets TensorFlow's inter-op threads (0 leaves its default); before it starts."""
    if n:
        import tensorflow as tf

        tf.config.threading.set_inter_op_parallelism_threads(n)


def table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def device_label(emulated: bool) -> str:
    """How the device memory in a table was measured."""
    return "device memory emulated on CPU:0" if emulated else "device memory measured on the GPU"


def mib(n: float) -> str:
    return f"{n / MIB:,.1f}"
