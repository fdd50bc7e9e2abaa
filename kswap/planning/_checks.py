"""Argument checks and JSON loading shared by the planning modules."""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["as_bytes", "as_seconds", "load_json", "require"]


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


def load_json(source: str | os.PathLike | Mapping, what: str, format_tag: str) -> dict:
    """The dict of a kswap JSON document given as text, a path or a parsed dict.

    Raises a one-line ValueError when the text is not JSON, is not an object,
    or carries another ``format`` tag than ``format_tag``.
    """
    if isinstance(source, Mapping):
        payload: Any = dict(source)
    else:
        text = str(source)
        if not text.lstrip().startswith(("{", "[", '"')):
            if os.path.exists(text):
                with open(text) as f:
                    text = f.read()
            elif text.endswith(".json") or isinstance(source, os.PathLike):
                raise ValueError(f"Not a {what}: there is no file {text!r}.")
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"Not a {what}: the text is not valid JSON ({error}).") from None
    if not isinstance(payload, dict):
        raise ValueError(
            f"Not a {what}: expected a JSON object. Received: {type(payload).__name__}"
        )
    if payload.get("format") != format_tag:
        raise ValueError(
            f"Not a {what} (expected format {format_tag!r}). "
            f"Received: format={payload.get('format')!r}"
        )
    return payload


def require(payload: Mapping, fields: tuple[str, ...], what: str) -> None:
    """Raises a one-line ValueError naming the fields ``payload`` lacks."""
    missing = [f for f in fields if f not in payload]
    if missing:
        raise ValueError(f"Not a valid {what}: missing field(s) {', '.join(missing)}.")
