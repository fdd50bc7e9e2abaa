"""A profiler session around training steps, and the trace file it writes.

:func:`profile_steps` starts the TensorFlow profiler (refusing, with
:class:`ProfilerBusyError`, if another one is running), runs the steps inside
kswap's step markers and stops it; :func:`xplane_files` and :func:`new_xplane`
find the ``.xplane.pb`` file that run wrote.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence

import tensorflow as tf

from kswap.profiler.fit_steps import FitSteps

__all__ = ["ProfilerBusyError", "new_xplane", "profile_steps", "xplane_files"]


class ProfilerBusyError(RuntimeError):
    """Another TensorFlow profiler is running; kswap will not stop it."""


def xplane_files(logdir: str) -> dict[str, int]:
    """The profiler's ``.xplane.pb`` files under ``logdir``, each with its mtime (ns).

    The mtime matters: the profiler names a run's folder after the second it
    started, so two runs within one second write the same path.
    """
    paths = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
    return {path: os.stat(path).st_mtime_ns for path in paths}


def new_xplane(logdir: str, before: Mapping[str, int]) -> str:
    """The newest ``.xplane.pb`` file under ``logdir`` written since ``before``.

    Args:
        logdir: The profiler's log directory.
        before: :func:`xplane_files` of ``logdir`` before the profiler started.
            A file is new if its path is not in it or its mtime changed.

    Raises:
        RuntimeError: If the profiler wrote none.
    """
    now = xplane_files(logdir)
    new = sorted((t, p) for p, t in now.items() if before.get(p) != t)
    if not new:
        raise RuntimeError(f"The TensorFlow profiler wrote no trace under {logdir!r}.")
    return new[-1][1]


def profile_steps(steps: FitSteps, indices: Sequence[int], logdir: str) -> str:
    """Runs batches ``indices`` of ``steps`` under a profiler kswap starts and stops.

    Each step runs inside kswap's step marker, numbered from 0. A model
    without a training function gets a warm-up step (batch ``indices[0]``,
    through ``fit``) first, outside the profiler.

    Returns:
        The path of the ``.xplane.pb`` file written under ``logdir``.
    """
    if steps.model.train_function is None:
        steps.warm_up(indices[0])
    before = xplane_files(logdir)
    try:
        # Default options: TensorFlow 2.21 ignores the integer ones given from
        # Python (and warns), and its defaults record the allocator events.
        tf.profiler.experimental.start(logdir)
    except tf.errors.AlreadyExistsError:
        raise ProfilerBusyError(
            "A TensorFlow profiler is already running, started outside kswap "
            "(for example by keras.callbacks.TensorBoard(profile_batch=...)). kswap "
            "never stops a profiler it did not start: stop it first "
            "(tf.profiler.experimental.stop()) or profile outside its window."
        ) from None
    try:
        for number, i in enumerate(indices):
            steps.run(i, marker=number)
    finally:
        tf.profiler.experimental.stop()
    return new_xplane(logdir, before)
