"""Argument checks and JSON loading shared by the planning modules."""

from __future__ import annotations

import math
import numbers
from typing import Any

from kswap._json import load_document as load_json
from kswap._json import require

__all__ = ["as_bytes", "as_seconds", "is_positive", "load_json", "require"]


def as_bytes(name: str, value: Any) -> int:
    """``value`` as a byte count (an integer >= 0); ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"`{name}` must be an integer >= 0. Received: {name}={value!r}")
    return int(value)


def as_seconds(name: str, value: Any) -> float:
    """``value`` as a finite number of seconds >= 0; ValueError naming ``name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"`{name}` must be a number >= 0. Received: {name}={value!r}")
    return float(value)


def is_positive(value: Any) -> bool:
    """Whether ``value`` is a finite real number > 0 (not a bool)."""
    return (
        not isinstance(value, bool)
        and isinstance(value, numbers.Real)
        and math.isfinite(value)
        and value > 0
    )
