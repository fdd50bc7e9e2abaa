"""kswap: train Keras models larger than device memory.

Memory profiling from TensorFlow's own allocator (``kswap.profile``,
``kswap.measure``), lifetime-aware pool packing (``kswap.allocator``) and
activation offloading, and planning what to swap or recompute under a memory
budget (``kswap.plan``: statically, from a model's shapes).

Importing kswap is cheap and needs no TensorFlow: it only asks TensorFlow for
the CPU allocator that records its memory (see :mod:`kswap._env`). The names
below are imported on first use; those that run TensorFlow (``profile``,
``measure``, ``OffloadingModel``, ...) say how to install it when it is
missing. ``kswap.trace``, ``kswap.allocator`` and ``kswap.planning`` work without
TensorFlow.

Example:
    >>> import kswap, keras, numpy as np
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    >>> model.compile("adam", "mse")
    >>> x, y = np.ones((32, 8), "float32"), np.ones((32, 4), "float32")
    >>> trace = kswap.profile(model, x, y, steps=1)   # doctest: +SKIP
    >>> trace.peak_bytes("device") > 0                # doctest: +SKIP
    True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kswap._env import has_tensorflow, prepare_environment, tensorflow_missing
from kswap._registration import register_when_keras_is_imported

prepare_environment()
register_when_keras_is_imported()  # a saved offloaded model loads after `import kswap`

__version__ = "0.1.0"

#: Public name -> (module that defines it, whether that module needs TensorFlow).
_EXPORTS: dict[str, tuple[str, bool]] = {
    "Allocation": ("kswap.trace", False),
    "AutoTune": ("kswap.tuning", True),
    "Measurement": ("kswap.profiler", True),
    "OffloadingModel": ("kswap.offloading", True),
    "Timeline": ("kswap.trace", False),
    "Trace": ("kswap.trace", False),
    "apply_plan": ("kswap.tuning", True),
    "estimate_workload": ("kswap.estimate", True),
    "measure": ("kswap.profiler", True),
    "plan": ("kswap.estimate", True),
    "profile": ("kswap.profiler", True),
    "strip": ("kswap.offloading", True),
}

#: Submodules reachable as attributes (``kswap.profiler``) without importing them first.
_SUBMODULES: dict[str, bool] = {
    "allocator": False,
    "cli": False,
    "estimate": True,
    "planning": False,
    "trace": False,
    "layers": True,
    "modelspec": True,
    "offloading": True,
    "optimizer_state": True,
    "profiler": True,
    "transfer": True,
    "tuning": True,
}

__all__ = [
    "Allocation",
    "AutoTune",
    "Measurement",
    "OffloadingModel",
    "Timeline",
    "Trace",
    "apply_plan",
    "estimate_workload",
    "measure",
    "plan",
    "profile",
    "strip",
]

if TYPE_CHECKING:
    from kswap.estimate import estimate_workload, plan
    from kswap.offloading import OffloadingModel, strip
    from kswap.profiler import Measurement, measure, profile
    from kswap.trace import Allocation, Timeline, Trace
    from kswap.tuning import AutoTune, apply_plan


def _import(module: str, needs_tensorflow: bool, what: str):
    if needs_tensorflow and not has_tensorflow():
        raise ImportError(tensorflow_missing(what))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if needs_tensorflow and (error.name or "").split(".")[0] in ("tensorflow", "keras"):
            raise ImportError(tensorflow_missing(what)) from error
        raise


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, needs_tensorflow = _EXPORTS[name]
        value = getattr(_import(module, needs_tensorflow, f"kswap.{name}"), name)
    elif name in _SUBMODULES:
        value = _import(f"kswap.{name}", _SUBMODULES[name], f"kswap.{name}")
    else:
        raise AttributeError(f"module 'kswap' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({"__version__", *__all__, *_SUBMODULES})
