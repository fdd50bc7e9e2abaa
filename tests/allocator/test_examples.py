"""The runnable examples in kswap.allocator's docstrings print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "kswap.allocator",
    "kswap.allocator.packing",
    "kswap.allocator.plot",
    "kswap.allocator._algorithms",
    "kswap.allocator._exact",
    "kswap.allocator._gaps",
    "kswap.allocator._instance",
    "kswap.allocator._intervals",
    "kswap.allocator._orders",
    "kswap.allocator._place_batched",
    "kswap.allocator._place_dense",
    "kswap.allocator._place_simple",
    "kswap.allocator._place_sweep",
    "kswap.allocator._search",
    "kswap.allocator._synthetic",
    "kswap.allocator._validate",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
