"""The runnable examples in the docstrings run and print what they show."""

import doctest
import importlib

import pytest

MODULES = [
    "kswap.trace.model",
    "kswap.trace.build",
    "kswap.profiler.attribution",
    "kswap.profiler.profile",
    "kswap.profiler.measure",
    "kswap.transfer",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
