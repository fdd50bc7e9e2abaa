"""Test set-up: kswap is imported first so TensorFlow's CPU allocator is BFC.

``make test`` runs the suite in two processes (pytest-xdist, ``-n 2 --dist
loadgroup``). Each test module is one group, so it runs whole in one process
and its module-scoped fixtures (traced models) are built once. The two
keras.applications modules share a group: the profiler's checks take the
models whose steps the layers' checks traced (``tests/applications.py``).
"""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import kswap  # noqa: E402,F401

#: Modules that hand models over to each other, so run in the same process.
_SHARED_GROUPS = {
    "tests/layers/test_applications.py": "applications",
    "tests/profiler/test_applications.py": "applications",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            path = item.nodeid.split("::", 1)[0]
            item.add_marker(pytest.mark.xdist_group(_SHARED_GROUPS.get(path, path)))
