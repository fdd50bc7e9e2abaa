"""Custom Keras objects in an importable module, for the profiler tests.

``ScaleShift`` and ``StepShapes`` are registered when this module is
imported, as ``keras.saving.register_keras_serializable`` is meant to be
used. ``StepShapes`` records the shape of the inputs each trace of its
training step sees: in ``TRACED`` (this process) and, when the environment
variable ``KSWAP_TEST_STEP_LOG`` names a file, as one JSON line there (a
fresh process's traces too).
"""

import json
import os

import keras

STEP_LOG = "KSWAP_TEST_STEP_LOG"
#: ``(model name, input shape)`` of every trace of a ``StepShapes`` train step.
TRACED: list[tuple[str, tuple]] = []


@keras.saving.register_keras_serializable(package="kswap_tests")
class ScaleShift(keras.layers.Layer):
    """``x * scale + shift``, one scale and shift per feature."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=input_shape[-1:], initializer="ones", name="scale")
        self.shift = self.add_weight(shape=input_shape[-1:], initializer="zeros", name="shift")

    def call(self, x):
        return x * self.scale + self.shift


@keras.saving.register_keras_serializable(package="kswap_tests")
class StepShapes(keras.Model):
    """A functional model that records the input shape of each traced train step."""

    def train_step(self, data):
        shape = tuple(keras.tree.flatten(data)[0].shape)
        TRACED.append((self.name, shape))
        path = os.environ.get(STEP_LOG)
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"model": self.name, "shape": list(shape)}) + "\n")
        return super().train_step(data)


def traced(name: str) -> list[tuple]:
    """Input shapes of the traced train steps of model ``name``, in this process."""
    return [shape for model, shape in TRACED if model == name]


def scale_shift_model(name: str, features: int = 16, units: int = 4) -> StepShapes:
    inp = keras.Input((features,))
    h = ScaleShift(name="scale_shift")(inp)
    out = keras.layers.Dense(units, name="head")(h)
    model = StepShapes(inp, out, name=name)
    model.compile(keras.optimizers.SGD(0.01), "mse")
    return model


class Unregistered(keras.layers.Layer):
    """A custom layer never registered: a saved model cannot name it."""

    def call(self, x):
        return x + 1.0


class LateRegistered(keras.layers.Layer):
    """Registered only by :func:`register_late`, not by importing this module."""

    def call(self, x):
        return x * 2.0


def register_late() -> type:
    return keras.saving.register_keras_serializable(package="kswap_tests_late")(LateRegistered)


class NeedsUnits(keras.layers.Layer):
    """Takes an object Keras cannot serialize and has no ``get_config``: it cannot be saved."""

    def __init__(self, picker, **kwargs):
        super().__init__(**kwargs)
        self.picker = picker

    def call(self, x):
        return self.picker(x)


class FirstUnits:
    """A plain Python object (not serializable by Keras)."""

    def __init__(self, units):
        self.units = units

    def __call__(self, x):
        return x[..., : self.units]
