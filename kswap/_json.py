"""Reading kswap's JSON documents (traces, plans, workloads): text, a path or a dict.

Every way a document can be wrong is one ``ValueError`` line naming what was
expected, so the command line can print it as it is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["load_document", "require"]


def load_document(source: str | os.PathLike | Mapping, what: str, format_tag: str) -> dict:
    """The dict of a kswap JSON document given as text, a path or a parsed dict.

    ``source`` is read as a path when it is a ``PathLike``, when it does not
    start like JSON text (``{``, ``[`` or ``"``), or when a file of that name
    exists and it does not start with ``{``.

    Raises:
        ValueError: (one line) no such file (a name ending in ``.json``, or a
            ``PathLike``), a file that is not text, text that is not JSON or
            not an object, or a ``format`` other than ``format_tag``.
        OSError: a file that exists but cannot be read.
    """
    if isinstance(source, Mapping):
        payload: Any = dict(source)
    else:
        text = str(source)
        start = text.lstrip()[:1]
        as_path = (
            isinstance(source, os.PathLike)
            or start not in ("{", "[", '"')
            or (start != "{" and os.path.isfile(text))
        )
        if as_path and os.path.exists(text):
            try:
                with open(text) as f:
                    text = f.read()
            except UnicodeDecodeError as error:
                raise ValueError(f"Not a {what}: the file is not text ({error}).") from None
        elif as_path and (text.endswith(".json") or isinstance(source, os.PathLike)):
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
