"""Builds a model and synthetic data from a text spec (command line, benchmarks).

A spec is either a dotted path to a callable, ``keras.applications.ResNet50``,
or ``package.module:factory``. keras.applications models are built with
``weights=None``: nothing is downloaded.

Example:
    >>> from kswap.modelspec import build_model, synthetic_data
    >>> model = build_model("keras.applications.MobileNetV2", input_shape=(64, 64, 3))
    >>> x, y = synthetic_data(model, 32)
    >>> x.shape, y.shape
    ((32, 64, 64, 3), (32,))
"""

from __future__ import annotations

import importlib
import inspect

import keras
import numpy as np

__all__ = ["resolve", "build_model", "synthetic_data", "parse_shape"]


_MUST_NAME_A_MODEL = "`model` must name a Keras model or a function that returns one."


def parse_shape(text: str) -> tuple[int, ...]:
    """``"64,64,3"`` -> ``(64, 64, 3)``."""
    try:
        shape = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        shape = ()
    if not shape or any(d < 1 for d in shape):
        raise ValueError(
            f"`input` must be positive integers separated by commas, e.g. 64,64,3. "
            f"Received: input={text!r}"
        )
    return shape


def resolve(spec: str):
    """Returns the callable a spec names."""
    if ":" in spec:
        module_name, attr = spec.split(":", 1)
    else:
        module_name, _, attr = spec.rpartition(".")
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(
            "`model` must name a callable that returns a keras.Model, as "
            "'keras.applications.ResNet50' or 'package.module:factory'. "
            f"Received: model={spec!r} ({e})"
        ) from None
    if not callable(obj):
        raise ValueError(f"`model` must name a callable. Received: model={spec!r}")
    return obj


def build_model(
    spec: str,
    input_shape: tuple[int, ...] | None = None,
    *,
    classes: int = 10,
    optimizer: str = "adam",
    compile: bool = True,
    **kwargs,
) -> keras.Model:
    """Builds (and compiles) the model a spec names.

    Keyword arguments the factory accepts are passed: ``weights=None``,
    ``input_shape``, ``classes``; ``kwargs`` are passed as given.
    """
    factory = resolve(spec)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if "weights" in params:
        kwargs["weights"] = None
    if input_shape is not None and "input_shape" in params:
        kwargs["input_shape"] = tuple(input_shape)
    if "classes" in params and kwargs.get("include_top", True):
        kwargs["classes"] = classes
    try:
        model = factory(**kwargs)
    except TypeError as error:
        if error.__traceback__ is None or error.__traceback__.tb_next is not None:
            raise  # raised inside the factory: its own error
        # the call itself failed: the factory needs arguments kswap does not pass
        given = f"the arguments {', '.join(kwargs)}" if kwargs else "no arguments"
        raise ValueError(
            f"{_MUST_NAME_A_MODEL} Received: model={spec!r}, which cannot be called with "
            f"{given} ({' '.join(str(error).split())})"
        ) from None
    if not isinstance(model, keras.Model):
        raise ValueError(
            f"{_MUST_NAME_A_MODEL} Received: model={spec!r}, which returned {type(model).__name__}"
        )
    if compile and not getattr(model, "compiled", False):
        model.compile(optimizer=optimizer, loss=default_loss(model))
    return model


def default_loss(model: keras.Model) -> str:
    """Sparse categorical cross-entropy for classifiers, mean squared error otherwise."""
    shape = model.outputs[0].shape if getattr(model, "outputs", None) else None
    if shape is not None and len(shape) == 2 and (shape[-1] or 1) > 1:
        return "sparse_categorical_crossentropy"
    return "mse"


def synthetic_data(model: keras.Model, samples: int, seed: int = 0):
    """Random inputs and targets shaped for ``model``."""
    rng = np.random.default_rng(seed)
    inputs = [rng.random((samples, *t.shape[1:]), dtype=np.float32) for t in model.inputs]
    x = inputs[0] if len(inputs) == 1 else inputs
    outs = []
    for t in model.outputs:
        if default_loss(model) == "sparse_categorical_crossentropy":
            outs.append(rng.integers(0, t.shape[-1], size=(samples,)))
        else:
            outs.append(rng.random((samples, *t.shape[1:]), dtype=np.float32))
    y = outs[0] if len(outs) == 1 else outs
    return x, y
