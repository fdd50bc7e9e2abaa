"""Memory budgets: a fraction of the baseline's device peak, or a byte count.

A budget is what the user states: ``0.5`` (half the peak the step needs with
everything kept), ``12 * 2**30`` (bytes), or text: ``"0.5"``, ``"50%"``,
``"12GiB"``, ``"500MB"``, ``"1.5 GB"``. Binary units (KiB, MiB, GiB, TiB) are
powers of 1024, decimal ones (kB, MB, GB, TB) powers of 1000, and ``B`` or no
unit are bytes. The integer 1 and the text ``"1"`` mean the whole baseline
peak, not one byte.

Example:
    >>> from kswap.planning import parse_budget
    >>> parse_budget("12GiB").resolve(baseline_peak_bytes=20 * 2**30) == 12 * 2**30
    True
    >>> parse_budget(0.5).resolve(baseline_peak_bytes=1000)
    500
    >>> str(parse_budget("50%")), str(parse_budget("500MB"))
    ('0.5 of the baseline peak', '500,000,000 bytes')
    >>> parse_budget(-2)
    Traceback (most recent call last):
    ValueError: `budget` must be in (0, 1] or a byte count. Received: budget=-2
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re

__all__ = ["Budget", "format_bytes", "parse_budget", "UNITS"]

#: Size units a budget may be written with, in bytes.
UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_TEXT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z%]*)\s*$", re.IGNORECASE)
_RANGE = "`budget` must be in (0, 1] or a byte count. Received: budget={!r}"
_FORMS = (
    "`budget` must be a fraction in (0, 1], a byte count or a size such as '12GiB' or "
    "'500MB'. Received: budget={!r}"
)


@dataclasses.dataclass(frozen=True)
class Budget:
    """A parsed budget: exactly one of ``fraction`` and ``bytes`` is set."""

    fraction: float | None = None
    bytes: int | None = None

    def __post_init__(self) -> None:
        if (self.fraction is None) == (self.bytes is None):
            raise ValueError("A Budget has exactly one of `fraction` and `bytes`.")

    def resolve(self, baseline_peak_bytes: int) -> int:
        """The budget in bytes, given the baseline's device peak."""
        if self.bytes is not None:
            return self.bytes
        return int(self.fraction * baseline_peak_bytes)

    def __str__(self) -> str:
        if self.bytes is not None:
            return f"{self.bytes:,} bytes"
        return f"{self.fraction:g} of the baseline peak"


def _from_number(value: float, original: object) -> Budget:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(_RANGE.format(original))
    if isinstance(value, numbers.Integral) and value > 1:
        return Budget(bytes=int(value))
    if value > 1:  # a float above 1 is neither a fraction nor a byte count
        raise ValueError(_RANGE.format(original))
    return Budget(fraction=float(value))


def parse_budget(budget: Budget | float | int | str) -> Budget:
    """Parses a budget a user wrote.

    Args:
        budget: A fraction in (0, 1] of the baseline's device peak, a byte
            count (an integer > 1), or text: a fraction (``"0.5"``), a
            percentage (``"50%"``) or a size with a unit (``"12GiB"``).

    Returns:
        A :class:`Budget`; call :meth:`Budget.resolve` with the baseline peak
        for bytes.

    Raises:
        ValueError: naming the value, if it is <= 0, a fraction > 1 or text
            that is none of the above.
    """
    if isinstance(budget, Budget):
        return budget
    if isinstance(budget, bool):
        raise ValueError(_FORMS.format(budget))
    if isinstance(budget, numbers.Integral):
        return _from_number(int(budget), budget)
    if isinstance(budget, numbers.Real):
        return _from_number(float(budget), budget)
    if not isinstance(budget, str):
        raise ValueError(_FORMS.format(budget))
    match = _TEXT.match(budget)
    if not match:
        if budget.strip().startswith("-"):
            raise ValueError(_RANGE.format(budget))
        raise ValueError(_FORMS.format(budget))
    number, unit = match.group(1), match.group(2).lower()
    if unit == "%":
        return _from_number(float(number) / 100, budget)
    if unit:
        if unit not in UNITS:
            raise ValueError(_FORMS.format(budget))
        size = float(number) * UNITS[unit]
        if size < 1:
            raise ValueError(_RANGE.format(budget))
        return Budget(bytes=int(size))
    value = float(number)
    if value > 1 and value.is_integer():  # "1024", "1e9": bytes
        return Budget(bytes=int(value))
    return _from_number(value, budget)


def format_bytes(nbytes: int) -> str:
    """``nbytes`` in binary units, rounded up at three significant digits (``"6.24 GiB"``)."""
    if nbytes < 1024:
        return f"{nbytes} B"
    for unit, size in (("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40)):
        value = nbytes / size
        if value < 1024 or unit == "TiB":
            digits = max(0, 2 - int(math.floor(math.log10(value))))
            scale = 10**digits
            return f"{math.ceil(value * scale - 1e-9) / scale:g} {unit}"
    raise AssertionError("unreachable")
