"""Memory profiling of Keras training from TensorFlow's allocator events."""

from kswap.profiler.measure import Measurement, measure
from kswap.profiler.profile import OPTIMIZER, ProfilerBusyError, profile

__all__ = ["Measurement", "OPTIMIZER", "ProfilerBusyError", "measure", "profile"]
