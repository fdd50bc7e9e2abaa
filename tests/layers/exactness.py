"""Measured exactness: a model trained plain, with kswap, and plain with the remapper off.

kswap's copies are extra readers of the tensors they copy and extra inputs of
the gradient ops that read them back. Grappler rewrites a graph according to
such details (it fuses an op into its producer only when nothing else reads
the intermediate, reassociates products only where no node has a control
edge, and orders the inputs of commutative ops by name), so where kswap
changes them the offloaded model can round differently in the last bits.
How much a TensorFlow rewrite changes training is measured here by switching
Grappler's remapper (its op fusions) off for the plain model.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

import kswap

__all__ = ["SEED", "Run", "Deviation", "remapper", "train", "deviation"]

SEED = 0


@contextlib.contextmanager
def remapper(enabled: bool):
    """Grappler's remapper (op fusions) on or off for the functions traced inside.

    The option is process-global and read when a function is traced, so a
    model must be built and trained (its functions traced) inside. Afterwards
    the option is what it was (on, TensorFlow's default, if it was not set).
    """
    before = tf.config.optimizer.get_experimental_options().get("remapping", True)
    tf.config.optimizer.set_experimental_options({"remapping": enabled})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"remapping": before})


@dataclasses.dataclass(frozen=True)
class Run:
    """What one training gave.

    Attributes:
        outputs: The model's outputs on the first batch with ``training=False``,
            before training (``predict_on_batch``).
        losses: ``fit``'s loss after each step (the epoch's running mean; the
            first is the first step's loss).
        weights: Every weight after training (BatchNormalization statistics
            included), flattened into one vector.
        fallbacks: The offloaded model's wrapped layers that fell back to
            recomputation (none for a plain model).
    """

    outputs: list[np.ndarray]
    losses: np.ndarray
    weights: np.ndarray
    fallbacks: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Deviation:
    """How far one run is from another.

    Attributes:
        outputs: Largest elementwise difference of the outputs, relative to
            the largest output magnitude.
        first_loss: Relative difference of the first step's loss.
        losses: Largest relative difference of the losses over the steps.
        weights: Normwise relative difference of the weights after the steps.
    """

    outputs: float
    first_loss: float
    losses: float
    weights: float

    def within(self, bound: Deviation) -> bool:
        return all(
            getattr(self, f.name) <= getattr(bound, f.name) for f in dataclasses.fields(self)
        )

    def __str__(self) -> str:
        return ", ".join(f"{f.name} {getattr(self, f.name):.2e}" for f in dataclasses.fields(self))


def _first(x, batch_size: int):
    return keras.tree.map_structure(lambda a: a[:batch_size], x)


def train(
    build: Callable[[], keras.Model],
    x,
    y,
    batch_size: int,
    *,
    offload: bool = False,
    remapping: bool = True,
    dataset: bool = False,
    policy="all",
) -> Run:
    """Builds a compiled model from seed :data:`SEED` and trains it one epoch through ``fit``.

    Args:
        build: Returns a new compiled model (called once, after seeding).
        x, y: The training data, one step per ``batch_size`` examples.
        batch_size: Examples per step.
        offload: Train ``kswap.OffloadingModel(model)`` instead.
        remapping: Whether Grappler's remapper runs on the model's functions.
        dataset: Train from a ``tf.data`` pipeline instead of arrays: the
            training step is traced with an unknown batch dimension (Keras
            gives array batches a static one when the batch size divides
            the number of examples).
        policy: The layers offloaded (``kswap.OffloadingModel``'s ``policy``).
    """
    with remapper(remapping):
        keras.utils.set_random_seed(SEED)
        model = build()
        if offload:
            model = kswap.OffloadingModel(model, policy)
        elif model.built:
            # as OffloadingModel does: fit then traces the step once, not also a
            # symbolic build (the numbers are the same; the examples train a
            # plain model whose optimizer fit builds)
            model.optimizer.build(model.trainable_variables)
        outputs = [
            np.asarray(o) for o in keras.tree.flatten(model.predict_on_batch(_first(x, batch_size)))
        ]
        losses = []
        record = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"]))
        )
        keras.utils.set_random_seed(SEED + 1)
        if dataset:
            batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)
            model.fit(batches, epochs=1, shuffle=False, verbose=0, callbacks=[record])
        else:
            model.fit(
                x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[record]
            )
        weights = np.concatenate([np.asarray(w.numpy(), np.float64).ravel() for w in model.weights])
    fallbacks = tuple(layer.name for layer in model.layers if getattr(layer, "fallbacks", None))
    return Run(outputs, np.asarray(losses), weights, fallbacks)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.abs(b))) if a.size else 0.0


def deviation(run: Run, reference: Run) -> Deviation:
    """How far ``run`` is from ``reference`` (see :class:`Deviation`)."""
    outputs = max(
        (float(np.max(np.abs(a - b))) / (float(np.max(np.abs(b))) or 1.0))
        for a, b in zip(run.outputs, reference.outputs, strict=True)
    )
    norm = float(np.linalg.norm(reference.weights)) or 1.0
    return Deviation(
        outputs=outputs,
        first_loss=_relative(run.losses[:1], reference.losses[:1]),
        losses=_relative(run.losses, reference.losses),
        weights=float(np.linalg.norm(run.weights - reference.weights)) / norm,
    )
