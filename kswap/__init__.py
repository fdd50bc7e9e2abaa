"""kswap: train Keras models larger than device memory.

Memory profiling from TensorFlow's own allocator (``kswap.profile``,
``kswap.measure``), lifetime-aware pool packing (``kswap.allocator``) and
activation offloading.

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

import importlib.util

from kswap._env import prepare_environment

prepare_environment()


def _has_tensorflow() -> bool:
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


if not _has_tensorflow():
    raise ImportError(
        "kswap needs TensorFlow, which is not installed. Install it with kswap's "
        "extra for your machine: `pip install kswap[cpu]` (no GPU, installs "
        "tensorflow-cpu) or `pip install kswap[gpu]` (installs tensorflow[and-cuda])."
    )

from kswap.offloading import OffloadingModel, strip  # noqa: E402
from kswap.profiler import Measurement, measure, profile  # noqa: E402
from kswap.trace import Allocation, Timeline, Trace  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Allocation",
    "Measurement",
    "OffloadingModel",
    "Timeline",
    "Trace",
    "measure",
    "profile",
    "strip",
]
