"""A window of profiled steps inside ``fit``, and its workload, for :class:`kswap.AutoTune`.

``fit`` calls a callback's ``on_train_batch_begin`` before each step, and
only there (or at train begin and end) may a callback act without turning
off Keras's asynchronous dispatch. A :class:`ProfileWindow` is driven from
those hooks: :meth:`~ProfileWindow.start` starts TensorFlow's profiler unless
another one runs (``keras.callbacks.TensorBoard(profile_batch=...)``),
:meth:`~ProfileWindow.mark` opens the step marker kswap's trace reader splits
steps by (closing the last one), and :meth:`~ProfileWindow.read` stops the
profiler and reads the steps into a :class:`~kswap.Trace`. It stops only a
profiler it started, and removes the temporary directory it made.
:func:`window_workload` builds the planner's workload of the window's steps.

Example:
    >>> import keras, numpy as np, kswap
    >>> from kswap.tuning.window import ProfileWindow
    >>> model = kswap.OffloadingModel(keras.Sequential(
    ...     [keras.Input((8,)), keras.layers.Dense(8, name="d")]))
    >>> model.compile("sgd", "mse")
    >>> window = ProfileWindow(None)
    >>> class Profiled(keras.callbacks.Callback):
    ...     def on_train_batch_begin(self, batch, logs=None):
    ...         if batch == 1 and window.start():
    ...             window.mark()
    >>> x = np.ones((8, 8), "float32")
    >>> _ = model.fit(x, x, batch_size=4, callbacks=[Profiled()], verbose=0)
    >>> trace = window.read(model)
    >>> window.close()
    >>> len(trace.steps), trace.peak_bytes("device") > 0
    (1, True)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import tensorflow as tf

from kswap.planning import Workload
from kswap.profiler.session import new_xplane, xplane_files
from kswap.profiler.trace_reading import read_trace
from kswap.profiler.workload import workload_from_trace
from kswap.trace import STEP_MARKER, Trace
from kswap.tuning.rounds import widen

__all__ = ["ProfileWindow", "window_workload"]


class ProfileWindow:
    """Profiled steps of a running ``fit``, read into a trace.

    Args:
        logdir: Where the profiler writes (the traces are kept there, for
            TensorBoard's Profile plugin); None: a temporary directory,
            removed by :meth:`close`.
    """

    def __init__(self, logdir: str | os.PathLike | None):
        self.logdir = None if logdir is None else os.fspath(logdir)
        self._own: str | None = None
        self._dir: str | None = None
        self._before: dict[str, int] = {}
        self._marker = None
        self._last_stop = -1
        #: Whether the profiler this window started is running.
        self.running = False
        #: Steps marked since :meth:`start`.
        self.steps = 0

    def start(self) -> bool:
        """Starts the profiler; False if another one is running (try a later step)."""
        if self.logdir is None and self._own is None:
            self._own = tempfile.mkdtemp(prefix="kswap-autotune-")
        self._dir = self.logdir or self._own
        self._before = xplane_files(self._dir)
        try:
            tf.profiler.experimental.start(self._dir)
        except tf.errors.AlreadyExistsError:
            return False
        self.running, self.steps = True, 0
        return True

    def mark(self) -> None:
        """Closes the last step's marker and opens the next one (numbered from 0)."""
        self.close_marker()
        self._marker = tf.profiler.experimental.Trace(STEP_MARKER, step_num=self.steps, _r=1)
        self._marker.__enter__()
        self.steps += 1

    def close_marker(self) -> None:
        """Ends the open step marker, if any (the step it marks has been dispatched)."""
        if self._marker is not None:
            self._marker.__exit__(None, None, None)
            self._marker = None

    def stop(self) -> None:
        """Stops the profiler this window started."""
        self.close_marker()
        if not self.running:
            return
        # The profiler names a run's folder after the second it writes the
        # trace, at stop: wait for a new second so a window never overwrites
        # the last one's trace.
        if int(time.time()) <= self._last_stop:
            time.sleep(1.0 - time.time() % 1.0 + 0.01)
        tf.profiler.experimental.stop()
        self._last_stop = int(time.time())
        self.running = False

    def xplane(self) -> str:
        """Stops the profiler; the path of the trace file it wrote for this window."""
        self.stop()
        return new_xplane(self._dir, self._before)

    def read(self, model, held_bytes: int = 0) -> Trace:
        """Stops the profiler and reads the window's steps of ``model`` (see :func:`read_trace`)."""
        return read_trace(self.xplane(), model, held_bytes=held_bytes)

    def close(self) -> None:
        """Stops the profiler if it runs, and removes the temporary directory."""
        self.stop()
        if self._own:
            shutil.rmtree(self._own, ignore_errors=True)
            self._own = None


def window_workload(trace: Trace, model, step_seconds: float | None = None) -> Workload:
    """The workload of a profiled window: its last step's, with the most any step held.

    Its times are the last step's (scaled to ``step_seconds``, see
    :func:`~kswap.profiler.workload.workload_from_trace`). Each block's
    working sets, and the allocator's extra, are the most any of the
    window's steps held (:func:`~kswap.tuning.rounds.widen` with
    ``working_sets_only``): fit's graph runs each weight's update as soon as
    its gradient exists, and which block's backward its temporaries land in
    changes from step to step.
    """
    last = len(trace.steps) - 1
    workload = workload_from_trace(trace, model, step_seconds=step_seconds)
    for step in range(last):
        # widen takes no Block.shared from it: skip tracing the model's graph again
        other = workload_from_trace(trace, model, step=step, shared=False)
        workload = widen(workload, other, working_sets_only=True)
    return workload
