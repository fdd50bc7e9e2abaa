"""The link between device and host memory: bandwidth each way and latency.

A swap costs ``latency_s + bytes / bandwidth`` on one copy stream; whether the
step pays for it depends on what the compute stream does meanwhile (see
:mod:`kswap.planning.simulate`). The presets are pinned-memory copy speeds per
direction as public measurements report them, not the links' theoretical
peaks; at start-up kswap replaces them with a measurement of the machine's own
link (pinned copies on a GPU, the emulated copy on CPU).

Example:
    >>> from kswap.planning import Link
    >>> link = Link.preset("pcie3")
    >>> link.h2d_bytes_per_s / 1e9, link.latency_s
    (12.0, 1e-05)
    >>> round(link.seconds(12_000_000, "d2h"), 6)    # 12 MB at 12 GB/s, plus latency
    0.00101
    >>> Link.preset("pcie9")
    Traceback (most recent call last):
    ValueError: Unknown `link`. Expected one of 'cpu', 'nvlink-c2c', 'pcie3', 'pcie4', 'pcie5' \
or a Link. Received: link='pcie9'
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

__all__ = ["Link", "LINKS", "as_link"]

GB = 1e9


@dataclasses.dataclass(frozen=True)
class Link:
    """Copy speed between device and host memory.

    Attributes:
        h2d_bytes_per_s: Host-to-device bandwidth (swap-ins), bytes/s.
        d2h_bytes_per_s: Device-to-host bandwidth (swap-outs), bytes/s.
        latency_s: Fixed cost of one copy (launch, synchronisation), seconds.
        name: A label: the preset's name, ``"measured"`` or ``"custom"``.
    """

    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    latency_s: float = 0.0
    name: str = "custom"

    def __post_init__(self) -> None:
        for name in ("h2d_bytes_per_s", "d2h_bytes_per_s"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Real)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(f"`{name}` must be a number > 0. Received: {name}={value!r}")
            object.__setattr__(self, name, float(value))
        value = self.latency_s
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValueError(f"`latency_s` must be a number >= 0. Received: latency_s={value!r}")
        object.__setattr__(self, "latency_s", float(value))

    def seconds(self, nbytes: int, direction: str) -> float:
        """Seconds one copy of ``nbytes`` takes, ``direction`` ``"h2d"`` or ``"d2h"``."""
        if direction not in ("h2d", "d2h"):
            raise ValueError(
                f"`direction` must be 'h2d' or 'd2h'. Received: direction={direction!r}"
            )
        if nbytes <= 0:
            return 0.0
        rate = self.h2d_bytes_per_s if direction == "h2d" else self.d2h_bytes_per_s
        return self.latency_s + nbytes / rate

    @classmethod
    def preset(cls, name: str) -> Link:
        """The preset named ``name`` (see :data:`LINKS`)."""
        if name not in LINKS:
            known = ", ".join(repr(k) for k in sorted(LINKS))
            raise ValueError(
                f"Unknown `link`. Expected one of {known} or a Link. Received: link={name!r}"
            )
        return LINKS[name]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Link:
        """A link from :meth:`to_dict`'s output; one-line ValueError if it is not one."""
        if not isinstance(data, dict):
            raise ValueError(f"Not a link: expected a JSON object. Received: {data!r}")
        missing = [k for k in ("h2d_bytes_per_s", "d2h_bytes_per_s") if k not in data]
        if missing:
            raise ValueError(f"Not a link: missing field(s) {', '.join(missing)}.")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


#: Pinned-memory copy speed per direction (GB = 1e9 bytes), as public
#: measurements report it: PCIe Gen3 x16 ~12 GB/s of its 15.75 theoretical,
#: Gen4 ~25 of 31.5, Gen5 ~50 of 63; NVLink-C2C (Grace Hopper) 900 GB/s in
#: total, 450 each way. ``cpu`` is the emulated host tier of a CPU-only machine
#: (a memory copy): a placeholder that a measurement at start-up replaces.
LINKS: dict[str, Link] = {
    "pcie3": Link(12 * GB, 12 * GB, 10e-6, "pcie3"),
    "pcie4": Link(25 * GB, 25 * GB, 10e-6, "pcie4"),
    "pcie5": Link(50 * GB, 50 * GB, 10e-6, "pcie5"),
    "nvlink-c2c": Link(450 * GB, 450 * GB, 5e-6, "nvlink-c2c"),
    "cpu": Link(5 * GB, 5 * GB, 20e-6, "cpu"),
}


def as_link(link: Link | str) -> Link:
    """A :class:`Link` from a Link or a preset's name."""
    if isinstance(link, Link):
        return link
    if isinstance(link, str):
        return Link.preset(link)
    raise ValueError(f"`link` must be a Link or a preset's name. Received: link={link!r}")
