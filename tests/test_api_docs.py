"""docs/api.md documents every public name of kswap.

The public names are ``kswap.__all__`` and the ``__all__`` of every public
subpackage and module directly under ``kswap`` (names not starting with an
underscore). Each must have an entry in the committed reference, a heading
``### `kswap.module.name``` (the names of ``kswap`` itself are listed with the
entry of the module that defines them). ``python docs/make_api.py`` writes the
reference from the docstrings.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re

import kswap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {"kswap.__main__"}  # an entry point, not a library


def public_modules() -> list[str]:
    return sorted(
        f"kswap.{m.name}"
        for m in pkgutil.iter_modules(kswap.__path__)
        if not m.name.startswith("_") and f"kswap.{m.name}" not in SKIP
    )


def _reference() -> str:
    with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
        return f.read()


def test_every_public_module_has_an_explicit_all():
    missing = [m for m in public_modules() if "__all__" not in vars(importlib.import_module(m))]
    assert not missing, f"public modules without __all__: {missing}"


def test_every_public_name_is_in_the_reference():
    text = _reference()
    headings = set(re.findall(r"^### `([\w.]+)`$", text, flags=re.M))
    missing = [
        f"{module}.{name}"
        for module in public_modules()
        for name in importlib.import_module(module).__all__
        if f"{module}.{name}" not in headings
    ]
    assert not missing, f"not documented in docs/api.md (run python docs/make_api.py): {missing}"


def test_every_name_of_kswap_is_listed_with_its_entry():
    text = _reference()
    listed = set(re.findall(r"^\| `kswap\.(\w+)` \| \[`([\w.]+)`\]", text, flags=re.M))
    headings = set(re.findall(r"^### `([\w.]+)`$", text, flags=re.M))
    names = {name for name, _ in listed}
    assert set(kswap.__all__) <= names, set(kswap.__all__) - names
    for name, entry in listed:
        assert entry in headings, (name, entry)
        module, _, attr = entry.rpartition(".")
        assert getattr(importlib.import_module(module), attr) is getattr(kswap, name)


def test_every_module_section_is_linked_from_the_table():
    text = _reference()
    for module in public_modules():
        assert f"## `{module}`" in text, module
        assert f"(#{module.replace('.', '')})" in text, module


def test_the_reference_is_what_make_api_writes_from_the_docstrings_now():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_api", os.path.join(ROOT, "docs", "make_api.py")
    )
    make_api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_api)
    assert make_api.render() == _reference(), "docs/api.md is out of date: python docs/make_api.py"
