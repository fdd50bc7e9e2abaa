"""The device AutoTune tunes for: its preset for static estimates, and its capacity.

Example:
    >>> from kswap.tuning.device import device_capacity, device_preset
    >>> device_preset().name in ("cpu", "k40", "v100", "a100", "h100", "h200")
    True
"""

from __future__ import annotations

import os

import tensorflow as tf

from kswap import transfer
from kswap.planning import parse_budget
from kswap.planning.budget import Budget
from kswap.planning.devices import DEVICES, Device, as_device

__all__ = ["device_capacity", "device_preset"]


def device_preset() -> Device:
    """The preset the static estimate uses: ``cpu`` without a GPU, else the GPU's own."""
    if not transfer.has_gpu():
        return as_device("cpu")
    gpu = tf.config.list_physical_devices("GPU")[0]
    name = str(tf.config.experimental.get_device_details(gpu).get("device_name", "")).lower()
    for preset in DEVICES:
        if preset != "cpu" and preset in name:
            return DEVICES[preset]
    return DEVICES["a100"]


def device_capacity() -> Budget | None:
    """The device's memory as a budget: a configured limit, or a GPU's memory; else None.

    On a GPU, the memory limit of its logical device (``kswap.allocator.configure``)
    or its total memory as ``nvidia-smi`` reports it; without a GPU, the CPU
    allocator's limit that emulates a device (``TF_CPU_BFC_MEM_LIMIT_IN_MB``).
    """
    if not transfer.has_gpu():
        mib = os.environ.get("TF_CPU_BFC_MEM_LIMIT_IN_MB", "")
        return parse_budget(int(mib) * 2**20) if mib.isdigit() and int(mib) else None
    gpu = tf.config.list_physical_devices("GPU")[0]
    configs = tf.config.get_logical_device_configuration(gpu) or []
    if configs and getattr(configs[0], "memory_limit", None):
        return parse_budget(int(configs[0].memory_limit) * 2**20)
    try:
        import subprocess

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return parse_budget(int(float(out)) * 2**20)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
