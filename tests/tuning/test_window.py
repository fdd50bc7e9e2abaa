"""kswap.tuning.window: profiled steps inside fit, and only its own profiler stopped."""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

import kswap
from kswap.tuning.window import ProfileWindow


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(16, name="d")])
    model.compile("sgd", "mse")
    return kswap.OffloadingModel(model)


def test_a_window_marks_the_steps_it_profiles_and_keeps_its_trace(tmp_path):
    model = _model()
    window = ProfileWindow(tmp_path)

    class Profiled(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            window.close_marker()
            if batch == 1:
                assert window.start()
            if window.running and window.steps < 2:
                window.mark()

    x = np.ones((16, 16), "float32")
    model.fit(x, x, batch_size=4, callbacks=[Profiled()], verbose=0)
    trace = window.read(model)
    window.close()
    assert not window.running and len(trace.steps) == 2
    assert any(f.endswith(".xplane.pb") for _, _, fs in os.walk(tmp_path) for f in fs)  # kept


def test_a_window_does_not_start_or_stop_someone_elses_profiler(tmp_path):
    window = ProfileWindow(None)
    tf.profiler.experimental.start(str(tmp_path))
    try:
        assert not window.start() and not window.running
        window.close()  # must not stop the profiler it did not start
        other = ProfileWindow(None)
        assert not other.start()  # still running
        other.close()
    finally:
        tf.profiler.experimental.stop()
    assert window.start()  # free now
    window.close()
    assert not window.running
