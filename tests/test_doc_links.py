"""Every relative link of the README and docs/ reaches a file, and its #anchor a heading."""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _text(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(_text(path)):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_slug_matches_github():
    assert slug("`kswap.measure(model, x, y, *, steps=3) -> Measurement`") == (
        "kswapmeasuremodel-x-y--steps3---measurement"
    )
    assert slug("What the CPU shows, and what is not done yet") == (
        "what-the-cpu-shows-and-what-is-not-done-yet"
    )


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    broken = []
    for line in _prose(_text(doc)):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            where = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(os.path.join(ROOT, where)):
                broken.append(f"{target} (no file {where})")
            elif anchor and where.endswith(".md") and anchor not in anchors(where):
                broken.append(f"{target} (no heading #{anchor} in {where})")
    assert not broken, f"{doc}: " + "; ".join(broken)
