"""Running the project's scripts in a fresh Python process, as a user would."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = ["ROOT", "run_script"]


def run_script(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """Runs ``script`` with ``args`` from the project's root, TensorFlow's logs quiet."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, script, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )
