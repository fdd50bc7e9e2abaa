"""Running the project's scripts in a fresh Python process, as a user would."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = ["ROOT", "run_python", "run_script", "script_env"]


def script_env(**extra: str) -> dict[str, str]:
    """This process's environment for a fresh one: the project importable, TensorFlow quiet."""
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, **extra)


def run_python(*args: str, timeout: float) -> subprocess.CompletedProcess:
    """Runs ``python ARGS`` from the project's root, TensorFlow's logs quiet."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=script_env(),
        cwd=ROOT,
        timeout=timeout,
    )


def run_script(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """Runs ``script`` with ``args`` from the project's root, TensorFlow's logs quiet."""
    return run_python(script, *args, timeout=timeout)
