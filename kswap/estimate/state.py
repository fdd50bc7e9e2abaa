"""Persistent bytes of training: weights, their gradients, the optimizer's slots.

Weights are every variable of the model (trainable or not: BatchNormalization's
moving statistics too), each counted once. Gradients are one per trainable
weight, of its size, all counted alive together at the backward's end: Keras's
step applies them after the backward, and although TensorFlow's executor may
run an update as soon as its gradient is ready, it need not (an upper bound).
The optimizer's slots are counted from the optimizer's own variables when it is
built (every variable that is not a scalar, as :mod:`kswap.optimizer_state`
moves them), and otherwise from its class: Adam, AdamW, Nadam, Adamax,
Adadelta, Ftrl and Lamb keep 2 slots per trainable weight (Adam with
``amsgrad``: 3), SGD with momentum, Adagrad, Lion 1, plain SGD 0, RMSprop 1
(plus 1 with momentum, 1 more centered).

Example:
    >>> import keras
    >>> from kswap.estimate.state import slots_per_weight, state_bytes
    >>> model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(5)])
    >>> slots_per_weight("adam"), slots_per_weight(keras.optimizers.SGD(momentum=0.9))
    (2, 1)
    >>> state_bytes(model, "adam")       # 55 weights of 4 bytes: weights, gradients, 2 slots
    StateBytes(weight_bytes=220, gradient_bytes=220, optimizer_bytes=440, slots=2)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import keras
import numpy as np

__all__ = ["StateBytes", "resolve_optimizer", "slots_per_weight", "state_bytes"]

_TWO = ("Adam", "AdamW", "Nadam", "Adamax", "Adadelta", "Ftrl", "Lamb")
_ONE = ("Adagrad", "Lion")


@dataclasses.dataclass(frozen=True)
class StateBytes:
    """Weights, gradients and optimizer slots in bytes; ``slots`` per trainable weight."""

    weight_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    slots: float


def resolve_optimizer(
    model: keras.Model, optimizer: Any = None
) -> keras.optimizers.Optimizer | None:
    """The optimizer to count: ``optimizer`` (a name or an object), else the model's compiled one.

    Raises:
        ValueError: naming the value, if ``optimizer`` is not a Keras optimizer or its name.
    """
    if optimizer is None:
        return getattr(model, "optimizer", None)
    if isinstance(optimizer, keras.optimizers.Optimizer):
        return optimizer
    if isinstance(optimizer, str):
        try:
            return keras.optimizers.get(optimizer)
        except ValueError:
            pass
    raise ValueError(
        "`optimizer` must be a keras.optimizers.Optimizer or the name of one ('adam', "
        f"'sgd', ...). Received: optimizer={optimizer!r}"
    )


def _inner(optimizer: Any) -> Any:
    while getattr(optimizer, "inner_optimizer", None) is not None:  # LossScaleOptimizer
        optimizer = optimizer.inner_optimizer
    return optimizer


def slots_per_weight(optimizer: Any) -> float:
    """Slots an optimizer keeps per trainable weight, from its class and settings.

    Args:
        optimizer: A Keras optimizer or its name; None for no optimizer (0).
    """
    if optimizer is None:
        return 0
    if isinstance(optimizer, str):
        optimizer = resolve_optimizer(None, optimizer)  # type: ignore[arg-type]
    optimizer = _inner(optimizer)
    names = {c.__name__ for c in type(optimizer).__mro__}
    if "RMSprop" in names:
        return (
            1
            + (getattr(optimizer, "momentum", 0) > 0)
            + bool(getattr(optimizer, "centered", False))
        )
    if "SGD" in names:
        return 1 if getattr(optimizer, "momentum", 0) > 0 else 0
    if names.intersection(_TWO):
        return 3 if getattr(optimizer, "amsgrad", False) else 2
    if names.intersection(_ONE):
        return 1
    return 2  # an optimizer we do not know: Adam's count


def _bytes(variables) -> int:
    """Bytes of variables, each counted once."""
    seen: dict[int, int] = {}
    for v in variables:
        count = 1
        for d in v.shape:
            count *= int(d)
        seen[id(v)] = count * np.dtype(keras.backend.standardize_dtype(v.dtype)).itemsize
    return sum(seen.values())


def state_bytes(model: keras.Model, optimizer: Any = None) -> StateBytes:
    """Weights, gradients and optimizer slots of training ``model``.

    Args:
        model: A built Keras model.
        optimizer: The optimizer to count (a name or an object); by default
            the model's compiled optimizer, none if it is not compiled.
    """
    optimizer = resolve_optimizer(model, optimizer)
    weights = _bytes(model.weights)
    trainable = _bytes(model.trainable_weights)
    inner = _inner(optimizer) if optimizer is not None else None
    built = inner is not None and getattr(inner, "built", False)
    if built:
        slots_bytes = _bytes(v for v in inner.variables if len(v.shape) > 0)
        slots = slots_bytes / trainable if trainable else 0
    else:
        slots = slots_per_weight(optimizer)
        slots_bytes = int(slots * trainable)
    return StateBytes(weights, trainable, slots_bytes, slots)
