"""Process environment TensorFlow must see before it initializes its devices.

TensorFlow's default CPU allocator records no allocation events; its BFC
allocator does, and it is chosen only when ``TF_CPU_ALLOCATOR_USE_BFC=true``
is set before TensorFlow creates its devices (importing TensorFlow or Keras
first is fine; running an op is not). Importing kswap sets it unless the user
set it already, or set ``KSWAP_CPU_BFC=0`` to opt out.
"""

from __future__ import annotations

import importlib.util
import os

__all__ = [
    "CPU_BFC_VARIABLE",
    "bfc_help",
    "cpu_allocator_is_bfc",
    "has_tensorflow",
    "prepare_environment",
    "require_tensorflow",
    "tensorflow_missing",
]

CPU_BFC_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"


def prepare_environment() -> None:
    """Asks TensorFlow for the CPU BFC allocator unless the user decided otherwise."""
    if os.environ.get("KSWAP_CPU_BFC", "1").lower() in ("0", "false", "no"):
        return
    os.environ.setdefault(CPU_BFC_VARIABLE, "true")


def cpu_allocator_is_bfc() -> bool:
    """Whether the running TensorFlow's CPU allocator reports its memory.

    Allocates a small tensor and asks the allocator for its statistics: the
    default CPU allocator reports none (TensorFlow 2.21 raises ValueError,
    "Allocator stats not available", where earlier versions reported zeros).
    """
    import tensorflow as tf

    probe = tf.ones((64,), dtype=tf.float32) + 0.0  # on CPU: only called without a GPU
    try:
        info = tf.config.experimental.get_memory_info("CPU:0")
    except ValueError:
        return False
    finally:
        del probe
    return info.get("peak", 0) > 0


def bfc_help() -> str:
    """What to do when the CPU allocator records nothing."""
    current = os.environ.get(CPU_BFC_VARIABLE)
    return (
        "TensorFlow's CPU allocator is not recording allocations, so kswap cannot "
        "see memory on this machine. The CPU's BFC allocator must be selected "
        f"before TensorFlow creates its devices: set {CPU_BFC_VARIABLE}=true in the "
        "environment (e.g. `TF_CPU_ALLOCATOR_USE_BFC=true python train.py`), or "
        "`import kswap` before running any TensorFlow op. "
        f"Currently {CPU_BFC_VARIABLE}={current!r}."
    )


def has_tensorflow() -> bool:
    """Whether TensorFlow can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def tensorflow_missing(what: str) -> str:
    """The message for ``what`` (e.g. ``"kswap.profile"``) when TensorFlow is missing."""
    return (
        f"{what} needs TensorFlow, which is not installed. Install it with kswap's "
        "extra for your machine: `pip install kswap[cpu]` (no GPU, installs "
        "tensorflow-cpu) or `pip install kswap[gpu]` (installs tensorflow[and-cuda]). "
        "kswap.trace and kswap.allocator work without it."
    )


def require_tensorflow(what: str) -> None:
    """Raises ImportError with install instructions if TensorFlow is missing.

    Raises:
        ImportError: TensorFlow cannot be imported.
    """
    if not has_tensorflow():
        raise ImportError(tensorflow_missing(what))
