"""Test set-up: kswap is imported first so TensorFlow's CPU allocator is BFC.

``make test`` runs the suite in two processes (pytest-xdist, ``-n 2 --dist
loadgroup``). Each test module runs whole in one process, so its
module-scoped fixtures (traced models, a demo's run) are built once; the
two keras.applications modules share a process, since the profiler's checks
take the models whose steps the layers' checks traced
(``tests/applications.py``); the examples' tests, each its own script, are
spread over both. The slowest modules start first, so neither process is
left with a long one at the end.

The grouping is a scheduler of its own (:class:`_Scheduling`),
not ``xdist_group`` marks: pytest-xdist 3.8 applies the marks by rewriting
node ids, which pytest 9 ignores, and then spreads a module's tests over
both processes, each building the module's fixtures again.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import kswap  # noqa: E402,F401

#: Modules that hand models over to each other, so run in the same process.
_SHARED_GROUPS = {
    "tests/layers/test_applications.py": "applications",
    "tests/profiler/test_applications.py": "applications",
}
#: Modules whose tests are independent scripts: each test is a unit of its own.
_SPLIT = {"tests/test_examples.py"}
#: Started first, slowest first (seconds on a 2-core CPU, two processes).
_FIRST = [
    "applications",  # 150
    "tests/layers/test_exactness_zoo.py",  # 105
    "tests/layers/test_exactness.py",  # 80
    "tests/test_compare.py",  # 75
    "tests/test_demo.py",  # 70
    "tests/test_gpu_script.py",  # 65
    "tests/layers/test_recurrent.py",  # 58
    "tests/allocator/test_config.py",  # 50
    "tests/layers/test_schedule.py",  # 45
    "tests/tuning/test_apply.py",  # 43
    "tests/layers/test_any_model.py",  # 43
    "tests/layers/test_distribute.py",  # 42
    "tests/test_examples.py",  # 5-35 each
]


def _scope(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return nodeid if path in _SPLIT else _SHARED_GROUPS.get(path, path)


def _rank(scope: str) -> int:
    key = _SHARED_GROUPS.get(scope, scope.split("::", 1)[0])
    return _FIRST.index(key) if key in _FIRST else len(_FIRST)


class _Scheduling:
    """The scheduler hook, registered only where pytest-xdist is (``-p no:xdist`` runs too)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadScopeScheduling

        if not all(
            hasattr(LoadScopeScheduling, name) for name in ("_split_scope", "_assign_work_unit")
        ):
            return None  # another pytest-xdist's internals: its own loadgroup order

        class ModuleScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return _scope(nodeid)

            def _assign_work_unit(self, node) -> None:
                first = min(self.workqueue, key=_rank)  # stable: the queue's order otherwise
                self.workqueue.move_to_end(first, last=False)
                super()._assign_work_unit(node)

        return ModuleScheduling(config, log)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_Scheduling(), "kswap-module-scheduling")
