"""Memory profiling of Keras training from TensorFlow's allocator events."""

from kswap._env import require_tensorflow

require_tensorflow("kswap.profiler")

from kswap.profiler.measure import Measurement, measure  # noqa: E402
from kswap.profiler.profile import OPTIMIZER, ProfilerBusyError, profile  # noqa: E402

__all__ = ["Measurement", "OPTIMIZER", "ProfilerBusyError", "measure", "profile"]
