"""Saving a trace as JSON and loading it back, every field checked.

The format (``"kswap.trace/1"``) is one JSON object: the trace's
``emulated``, ``duration_ns``, ``steps`` and ``metadata``, then the buffers
as rows of values under ``buffers``, with the :class:`kswap.trace.Allocation`
field names once under ``fields`` (and the same for ops: ``op_fields`` and
``ops``). :func:`from_json` checks every value's type against the field's
annotation, so a wrong file is one ``ValueError`` line naming what is wrong.
:meth:`kswap.trace.Trace.to_json` and :meth:`kswap.trace.Trace.from_json`
call these. Plain Python, free of any framework.

Example:
    >>> from kswap.trace import Allocation, Trace
    >>> from kswap.trace.serialize import from_json, to_json
    >>> text = to_json(Trace(buffers=(Allocation(size=4, start_ns=0, end_ns=9),)))
    >>> from_json(Trace, text).buffers[0].size
    4
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any

from kswap._json import load_document, require
from kswap.trace.records import Allocation, OpInterval

if TYPE_CHECKING:
    from kswap.trace.model import Trace

__all__ = ["to_json", "from_json"]

_FORMAT = "kswap.trace/1"


def to_json(trace: Trace, path: str | os.PathLike | None = None) -> str:
    """Serializes ``trace`` to JSON text; also writes it to ``path`` if given."""
    fields = [f.name for f in dataclasses.fields(Allocation)]
    payload = {
        "format": _FORMAT,
        "emulated": trace.emulated,
        "duration_ns": trace.duration_ns,
        "steps": [list(s) for s in trace.steps],
        "metadata": dict(trace.metadata),
        "fields": fields,
        "buffers": [[getattr(b, f) for f in fields] for b in trace.buffers],
    }
    if trace.ops:
        op_fields = [f.name for f in dataclasses.fields(OpInterval)]
        payload["op_fields"] = op_fields
        payload["ops"] = [[getattr(o, f) for f in op_fields] for o in trace.ops]
    text = json.dumps(payload, separators=(",", ":"))
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return text


def from_json(cls: type[Trace], source: str | os.PathLike) -> Trace:
    """:meth:`kswap.trace.Trace.from_json` for the class ``cls`` (its docstring has the details)."""
    payload = load_document(source, "kswap trace", _FORMAT)
    required = ("fields", "buffers", "steps", "duration_ns", "emulated", "metadata")
    require(payload, required, "kswap trace")
    steps = payload["steps"]
    if not isinstance(steps, list) or not all(
        isinstance(s, list) and len(s) == 2 and all(_is_number(t) for t in s) for s in steps
    ):
        raise ValueError("Not a valid kswap trace: `steps` must be a list of [start, end].")
    if not _is_number(payload["duration_ns"]):
        raise ValueError(
            "Not a valid kswap trace: `duration_ns` must be a number. "
            f"Received: duration_ns={payload['duration_ns']!r}"
        )
    if not isinstance(payload["emulated"], bool):
        raise ValueError(
            "Not a valid kswap trace: `emulated` must be true or false. "
            f"Received: emulated={payload['emulated']!r}"
        )
    if not isinstance(payload["metadata"], dict):
        raise ValueError(
            "Not a valid kswap trace: `metadata` must be an object. "
            f"Received: {type(payload['metadata']).__name__}"
        )
    return cls(
        buffers=_load_rows(Allocation, payload, "fields", "buffers"),
        steps=tuple(tuple(s) for s in steps),
        duration_ns=payload["duration_ns"],
        emulated=payload["emulated"],
        metadata=payload["metadata"],
        ops=_load_rows(OpInterval, payload, "op_fields", "ops"),
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _load_rows(cls: type, payload: dict, fields_key: str, rows_key: str) -> tuple:
    """The ``cls`` instances of a saved trace's ``rows_key`` rows; one-line ValueError."""
    fields, rows = payload.get(fields_key, []), payload.get(rows_key, [])
    if not isinstance(fields, list) or not isinstance(rows, list):
        raise ValueError(f"Not a valid kswap trace: `{fields_key}` and `{rows_key}` must be lists.")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = [f for f in fields if not isinstance(f, str) or f not in known]
    if unknown:
        raise ValueError(
            f"Not a valid kswap trace: unknown `{fields_key}` {', '.join(map(repr, unknown))}."
        )
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(fields):
            raise ValueError(
                f"Not a valid kswap trace: {rows_key}[{i}] must be a list of "
                f"{len(fields)} values. Received: {type(row).__name__}"
                + (f" of {len(row)}" if isinstance(row, list) else "")
            )
        values = dict(zip(fields, row, strict=True))
        for name, value in values.items():
            expected = _FIELD_TYPES[cls][name]
            if not (value is None and expected[1]) and not _is_type(value, expected[0]):
                kind = {int: "an integer", str: "text", bool: "true or false"}[expected[0]]
                raise ValueError(
                    f"Not a valid kswap trace: {rows_key}[{i}]: `{name}` must be {kind}"
                    f"{' or null' if expected[1] else ''}. Received: {name}={value!r}"
                )
        try:
            out.append(cls(**values))
        except (TypeError, ValueError) as error:
            message = " ".join(str(error).split())
            raise ValueError(f"Not a valid kswap trace: {rows_key}[{i}]: {message}") from None
    return tuple(out)


def _field_types(cls: type) -> dict[str, tuple[type, bool]]:
    """Each field's type and whether it may be None, from ``int | None``-style annotations."""
    builtins = {"int": int, "str": str, "bool": bool}
    out = {}
    for f in dataclasses.fields(cls):
        parts = [p.strip() for p in str(f.type).split("|")]
        out[f.name] = (builtins[parts[0]], "None" in parts)
    return out


def _is_type(value: Any, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


_FIELD_TYPES = {cls: _field_types(cls) for cls in (Allocation, OpInterval)}
