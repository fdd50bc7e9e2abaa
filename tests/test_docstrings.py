"""Every runnable example in kswap's docstrings runs and prints what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import kswap

SKIP = {"kswap.__main__", "kswap.profiler._child"}  # entry points, not libraries
MODULES = sorted(
    m.name for m in pkgutil.walk_packages(kswap.__path__, prefix="kswap.") if m.name not in SKIP
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_public_modules_have_examples():
    with_examples = [
        name
        for name in MODULES
        if doctest.DocTestFinder().find(importlib.import_module(name))
        and any(t.examples for t in doctest.DocTestFinder().find(importlib.import_module(name)))
    ]
    for name in [
        "kswap.trace.model",
        "kswap.allocator.packing",
        "kswap.offloading",
        "kswap.layers.offload",
        "kswap.profiler.profile",
        "kswap.transfer",
    ]:
        assert name in with_examples
