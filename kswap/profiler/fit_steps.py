"""Training steps run the way ``model.fit`` runs them.

:class:`FitSteps` runs one batch at a time as one call of the model's
``train_function`` on a dataset of that batch alone, so the graph that runs is
the one ``model.fit`` traced (not ``train_on_batch``'s). :func:`run_steps` runs
a list of batches so; :func:`keras_batch_size` counts a batch's samples.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from kswap.trace import STEP_MARKER

__all__ = ["FitSteps", "keras_batch_size", "run_steps"]


class FitSteps:
    """Training steps run the way ``model.fit`` runs them.

    ``fit`` calls the model's ``train_function`` with an iterator over a
    ``tf.data`` dataset, whose batch dimension is unknown (for arrays with a
    partial last batch, and for datasets batched without
    ``drop_remainder``); Keras traces that call, with the training step
    nested in it, as a graph of its own. ``train_on_batch`` traces another
    graph, for the static shape of its first batch, and neither ever runs
    the other's. So each step here is one call of ``train_function`` with an
    iterator over a dataset of one batch whose batch dimension is unknown
    (or known, ``static_batch=True``, as fit traces a dataset batched with
    ``drop_remainder=True``); the other dimensions are the batch's own.

    Args:
        model: A compiled ``keras.Model``.
        batches: ``(x, y)`` batches (``y`` may be None).
        static_batch: Give the traced graph the batches' own batch size.

    Example:
        >>> import keras, numpy as np
        >>> from kswap.profiler.fit_steps import FitSteps
        >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        >>> model.compile("sgd", "mse")
        >>> steps = FitSteps(model, [(np.ones((8, 4)), np.ones((8, 2)))] * 2)
        >>> steps.dataset(0).element_spec[0]
        TensorSpec(shape=(None, 4), dtype=tf.float64, name=None)
        >>> seconds = steps.warm_up(0)    # through model.fit: traces the step
        >>> seconds = steps.run(1)        # model.train_function, fit's graph
    """

    def __init__(self, model, batches: Sequence[tuple], *, static_batch: bool = False):
        self.model = model
        self.batches = list(batches)
        self.static_batch = bool(static_batch)

    def __len__(self) -> int:
        return len(self.batches)

    def dataset(self, i: int) -> tf.data.Dataset:
        """A dataset of batch ``i`` alone, as fit's dataset would yield it."""
        x, y = self.batches[i]
        element = (x,) if y is None else (x, y)
        element = keras.tree.lists_to_tuples(element)
        dataset = tf.data.Dataset.from_tensor_slices(element).batch(
            keras_batch_size(self.batches[i]), drop_remainder=self.static_batch
        )
        # fit counts the batches of a dataset whose cardinality it knows,
        # and warns at the end of one it cannot count
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(1))
        options = tf.data.Options()
        # no prefetch: the batch is made when its step asks for it, not before
        options.experimental_optimization.inject_prefetch = False
        return dataset.with_options(options)

    def _iterator(self, i: int):
        strategy = self.model.distribute_strategy
        return iter(strategy.experimental_distribute_dataset(self.dataset(i)))

    def warm_up(self, i: int = 0) -> float:
        """Runs batch ``i`` through ``model.fit`` (one step); returns its wall time (s).

        ``fit`` builds what the first step needs (loss and metric state) and
        traces its training function; its ``History`` is not left on the model.
        """
        model = self.model
        had_history = "history" in vars(model)
        history = vars(model).get("history")
        dataset = self.dataset(i)
        t0 = time.perf_counter()
        model.fit(dataset, epochs=1, verbose=0, shuffle=False)
        seconds = time.perf_counter() - t0
        if had_history:
            model.history = history
        elif "history" in vars(model):
            del model.history
        return seconds

    def run(self, i: int, marker: int | None = None) -> float:
        """Runs batch ``i`` as one call of ``train_function``; returns its wall time (s).

        The iterator is made first, outside the time and the marker. With
        ``marker``, the step runs inside kswap's profiler step marker of that
        number. A model without a training function yet is warmed up instead
        (:meth:`warm_up`).
        """
        model = self.model
        if model.train_function is None:
            return self.warm_up(i)
        iterator = self._iterator(i)
        t0 = time.perf_counter()
        if marker is None:
            _finish(model.train_function(iterator))
        else:
            with tf.profiler.experimental.Trace(STEP_MARKER, step_num=marker, _r=1):
                _finish(model.train_function(iterator))
        return time.perf_counter() - t0


def _finish(logs) -> None:
    """Waits for the step: reads its logs (a few scalars) back."""
    for value in tf.nest.flatten(logs):
        np.asarray(value)


def run_steps(model, batches: Sequence[tuple], *, static_batch: bool = False) -> list[float]:
    """Runs one training step per batch, as ``model.fit`` runs them (:class:`FitSteps`).

    A model that has no training function yet gets its first step through
    ``model.fit``, which builds and traces it.

    Returns:
        Each step's wall time (s).
    """
    steps = FitSteps(model, batches, static_batch=static_batch)
    return [steps.run(i) for i in range(len(steps))]


def keras_batch_size(batch: tuple) -> int:
    """The number of samples in one ``(x, y)`` batch."""
    return int(keras.tree.flatten(batch[0])[0].shape[0])
