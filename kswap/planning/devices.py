"""Device presets: peak compute, memory capacity and bandwidth of common GPUs.

Static planning (no profiling run) turns a model's FLOPs and bytes into times
with these figures; the planner itself only needs a workload's times. The
numbers are NVIDIA's public datasheet figures (dense, without structured
sparsity) for the SXM form factor where there are several:

- K40: Tesla K40 GPU Accelerator board specification (2013): 4.29 TFLOP/s
  FP32 at base clock, 12 GB GDDR5, 288 GB/s, PCIe Gen3.
- V100: Tesla V100 datasheet (SXM2): 15.7 TFLOP/s FP32, 125 Tensor Core,
  32 GB HBM2, 900 GB/s, PCIe Gen3.
- A100: A100 Tensor Core GPU datasheet (SXM4 80GB): 19.5 TFLOP/s FP32,
  312 FP16/BF16 Tensor Core, 80 GB HBM2e, 2,039 GB/s, PCIe Gen4.
- H100: H100 Tensor Core GPU datasheet (SXM5): 67 TFLOP/s FP32, 989.5
  FP16/BF16 Tensor Core, 80 GB HBM3, 3.35 TB/s, PCIe Gen5.
- H200: H200 Tensor Core GPU datasheet (SXM): H100's compute, 141 GB HBM3e,
  4.8 TB/s, PCIe Gen5.

Device memory is sold in binary units (a "12 GB" K40 has 12 GiB); a little of
it goes to the driver and the context, so usable memory is somewhat less.
``cpu`` stands for the emulated device of a CPU-only machine: its figures are
placeholders for a measurement.

Example:
    >>> from kswap.planning import Device
    >>> k40 = Device.preset("k40")
    >>> k40.memory_bytes / 2**30, k40.fp32_flops / 1e12, k40.link
    (12.0, 4.29, 'pcie3')
    >>> Device.preset("h200").memory_bytes_per_s / 1e12
    4.8
"""

from __future__ import annotations

import dataclasses

__all__ = ["Device", "DEVICES", "as_device"]

GiB = 2**30
T = 1e12


@dataclasses.dataclass(frozen=True)
class Device:
    """Spec-sheet figures of one accelerator.

    Attributes:
        name: The preset's name.
        fp32_flops: Peak FP32 FLOP/s (no Tensor Cores).
        tensor_flops: Peak dense FP16/BF16 Tensor Core FLOP/s, None if it has none.
        memory_bytes: Memory capacity, None if unknown (the emulated CPU device).
        memory_bytes_per_s: Peak memory bandwidth.
        link: Name of the :data:`~kswap.planning.link.LINKS` preset of its host link.
        description: What the figures are of.
    """

    name: str
    fp32_flops: float
    tensor_flops: float | None
    memory_bytes: int | None
    memory_bytes_per_s: float
    link: str
    description: str = ""

    @classmethod
    def preset(cls, name: str) -> Device:
        """The preset named ``name`` (see :data:`DEVICES`)."""
        if name not in DEVICES:
            known = ", ".join(repr(k) for k in DEVICES)
            raise ValueError(
                f"Unknown `device`. Expected one of {known}. Received: device={name!r}"
            )
        return DEVICES[name]


#: The device presets, by name.
DEVICES: dict[str, Device] = {
    d.name: d
    for d in (
        Device("k40", 4.29 * T, None, 12 * GiB, 288e9, "pcie3", "Tesla K40, 12 GB GDDR5"),
        Device("v100", 15.7 * T, 125 * T, 32 * GiB, 900e9, "pcie3", "Tesla V100 SXM2 32 GB"),
        Device("a100", 19.5 * T, 312 * T, 80 * GiB, 2039e9, "pcie4", "A100 SXM4 80 GB"),
        Device("h100", 67 * T, 989.5 * T, 80 * GiB, 3.35 * T, "pcie5", "H100 SXM5 80 GB"),
        Device("h200", 67 * T, 989.5 * T, 141 * GiB, 4.8 * T, "pcie5", "H200 SXM 141 GB"),
        Device("cpu", 0.1 * T, None, None, 20e9, "cpu", "emulated device (placeholders)"),
    )
}


def as_device(device: Device | str) -> Device:
    """A :class:`Device` from a Device or a preset's name (ValueError naming an unknown one)."""
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        return Device.preset(device)
    raise ValueError(f"`device` must be a Device or a preset's name. Received: device={device!r}")
