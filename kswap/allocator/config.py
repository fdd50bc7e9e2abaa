"""One place for TensorFlow's allocator options.

TensorFlow reads its allocator options once, when it creates its devices, from
environment variables and from ``tf.config``. :func:`configure` sets them all
before that moment and refuses to run after it: an option that silently does
nothing is worse than an error.

Example:
    >>> import kswap
    >>> from kswap.allocator import configure
    >>> report = configure(memory_limit=2 * 2**30)   # doctest: +SKIP
    >>> report.applied                               # doctest: +SKIP
    {'memory_limit': 'TF_CPU_BFC_MEM_LIMIT_IN_MB=2048 (device memory emulated on CPU:0)'}

Without a GPU the memory limit caps the one CPU allocator, which also holds
the emulated host tier: it counts offloaded bytes too, and some kernels abort
the process when it runs out instead of raising ``ResourceExhaustedError``
(see :func:`configure`).

Sizing the limit from a packing plan (the least memory a profiled step needs,
see :func:`kswap.allocator.pack`) adds a margin for what TensorFlow's BFC
allocator loses to rounding and fragmentation: ``limit = arena * (1 + margin)``
with ``margin=0.1`` by default.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import warnings
from typing import Any

__all__ = ["AllocatorConfig", "configure", "DEFAULT_MARGIN"]

#: Default fraction added to a packing plan's arena when it sizes a limit.
DEFAULT_MARGIN = 0.1
_MIB = 1024 * 1024
_GPU_ALLOCATORS = ("bfc", "cuda_malloc_async")
_CPU_LIMIT_WARNING = (
    "kswap.allocator.configure: without a GPU, `memory_limit` caps the one CPU allocator "
    "(TF_CPU_BFC_MEM_LIMIT_IN_MB), which also holds the emulated host tier: a blunt "
    "emulation of a smaller device that counts offloaded bytes too, and running out of it "
    "may abort the process (Check failed: dtype() == expected_dtype) rather than raise "
    "ResourceExhaustedError. Run what may exceed it in a separate process."
)


@dataclasses.dataclass(frozen=True)
class AllocatorConfig:
    """What :func:`configure` did.

    Attributes:
        applied: Option name -> how it was applied.
        not_applicable: Option name -> why it does not apply on this machine.
        memory_limit_bytes: The device memory limit set, if any.
    """

    applied: dict[str, str]
    not_applicable: dict[str, str]
    memory_limit_bytes: int | None = None


def _initialized() -> bool:
    from tensorflow.python.eager import context

    return bool(context.context()._initialized)


def _limit_bytes(memory_limit: Any, margin: float) -> int:
    arena = getattr(memory_limit, "arena_bytes", None)
    if arena is not None:
        return int(math.ceil(arena * (1.0 + margin)))
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, numbers.Integral):
        raise ValueError(
            "`memory_limit` must be a byte count (int) or a PackingPlan. "
            f"Received: memory_limit={memory_limit!r}"
        )
    if memory_limit < _MIB:
        raise ValueError(
            f"`memory_limit` must be at least 1 MiB ({_MIB} bytes). "
            f"Received: memory_limit={memory_limit}"
        )
    return int(memory_limit)


def _check_bool(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True, False or None. Received: {name}={value!r}")


def configure(
    *,
    memory_limit: Any = None,
    growth: bool | None = None,
    allocator: str | None = None,
    host_limit: int | None = None,
    gc: bool | None = None,
    cpu_bfc: bool | None = None,
    margin: float = DEFAULT_MARGIN,
) -> AllocatorConfig:
    """Configures TensorFlow's allocators; call before TensorFlow runs any op.

    Args:
        memory_limit: Device memory limit in bytes, or a ``PackingPlan`` (its
            ``arena_bytes`` plus ``margin``). On a GPU: a logical device with
            that limit. Without a GPU: the limit of the CPU's BFC allocator
            (``TF_CPU_BFC_MEM_LIMIT_IN_MB``), a blunt emulation of a smaller
            device (a warning says so): that one allocator also holds the
            emulated host tier, so the limit counts what is offloaded too and
            cannot emulate a small device for an offloaded model; and when
            it runs out, some kernels abort the whole process (``Check
            failed: dtype() == expected_dtype``) instead of raising
            ``tf.errors.ResourceExhaustedError``. Run what may exceed it in
            a separate process.
        growth: GPU memory growth (allocate as needed instead of all at once).
        allocator: GPU allocator: ``"bfc"`` or ``"cuda_malloc_async"``
            (``TF_GPU_ALLOCATOR``).
        host_limit: Pinned host pool limit in bytes (``TF_GPU_HOST_MEM_LIMIT_IN_MB``).
        gc: GPU BFC garbage collection (``TF_ENABLE_GPU_GARBAGE_COLLECTION``).
        cpu_bfc: Use the BFC allocator for the CPU (``TF_CPU_ALLOCATOR_USE_BFC``),
            which kswap needs to see memory on machines without a GPU.
        margin: Fraction added to a plan's arena (``memory_limit=plan``).

    Returns:
        An :class:`AllocatorConfig`. Options that do not apply on this machine
        (GPU options without a GPU) are listed there and warned about; a
        ``memory_limit`` without a GPU warns that it is a blunt emulation.

    Raises:
        ValueError: A bad value.
        RuntimeError: TensorFlow has already created its devices.
    """
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin <= 10:
        raise ValueError(f"`margin` must be a number in [0, 10]. Received: margin={margin!r}")
    limit = None if memory_limit is None else _limit_bytes(memory_limit, float(margin))
    for name, value in (("growth", growth), ("gc", gc), ("cpu_bfc", cpu_bfc)):
        _check_bool(name, value)
    if allocator is not None and allocator not in _GPU_ALLOCATORS:
        raise ValueError(
            f"`allocator` must be one of {_GPU_ALLOCATORS}. Received: allocator={allocator!r}"
        )
    if host_limit is not None and (
        isinstance(host_limit, bool)
        or not isinstance(host_limit, numbers.Integral)
        or host_limit < _MIB
    ):
        raise ValueError(
            "`host_limit` must be a byte count of at least 1 MiB. "
            f"Received: host_limit={host_limit!r}"
        )
    if growth and limit is not None:
        raise ValueError(
            "`growth` and `memory_limit` cannot both be set: a logical device with a "
            f"limit does not grow. Received: growth={growth}, memory_limit={memory_limit!r}"
        )
    if _initialized():
        raise RuntimeError(
            "TensorFlow has already created its devices, so allocator options can no "
            "longer change. Call kswap.allocator.configure(...) at the start of the "
            "program, right after the imports and before any TensorFlow op or model."
        )

    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    applied: dict[str, str] = {}
    skipped: dict[str, str] = {}
    no_gpu = "no GPU on this machine"

    def env(option: str, var: str, value: str, note: str = "") -> None:
        os.environ[var] = value
        applied[option] = f"{var}={value}{note}"

    if cpu_bfc is not None:
        env("cpu_bfc", "TF_CPU_ALLOCATOR_USE_BFC", "true" if cpu_bfc else "false")
    if limit is not None:
        if gpus:
            for gpu in gpus:
                tf.config.set_logical_device_configuration(
                    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit // _MIB)]
                )
            applied["memory_limit"] = f"{limit // _MIB} MiB logical device on {len(gpus)} GPU(s)"
        else:
            env(
                "memory_limit",
                "TF_CPU_BFC_MEM_LIMIT_IN_MB",
                str(max(limit // _MIB, 1)),
                " (device memory emulated on CPU:0)",
            )
            warnings.warn(_CPU_LIMIT_WARNING, stacklevel=2)
    gpu_only = {
        "growth": growth,
        "allocator": allocator,
        "host_limit": host_limit,
        "gc": gc,
    }
    for option, value in gpu_only.items():
        if value is None:
            continue
        if not gpus:
            skipped[option] = no_gpu
            continue
        if option == "growth":
            for gpu in gpus:
                tf.config.experimental.set_memory_growth(gpu, value)
            applied[option] = f"memory growth {value} on {len(gpus)} GPU(s)"
        elif option == "allocator":
            env(option, "TF_GPU_ALLOCATOR", value)
        elif option == "host_limit":
            env(option, "TF_GPU_HOST_MEM_LIMIT_IN_MB", str(value // _MIB))
        else:
            env(option, "TF_ENABLE_GPU_GARBAGE_COLLECTION", "true" if value else "false")
    for option, why in skipped.items():
        warnings.warn(
            f"kswap.allocator.configure: `{option}` does not apply ({why}); it was not set.",
            stacklevel=2,
        )
    return AllocatorConfig(applied, skipped, limit)
