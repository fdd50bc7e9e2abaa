"""keras.applications models as the tests build them, and a hand-over between test modules.

Tracing the training step of a keras.applications model costs seconds to
tens of seconds (ResNet50: about 20 s of CPU), far more than running it. A
test that has traced a plain model's step (``tests/layers/test_applications.py``
trains one for five steps) hands the model over with :func:`keep`; a later
test that only needs some compiled model with a traced step (the profiler's
peak check) takes it with :func:`take`, which builds a new one the same way
when nothing was handed over (that test run alone, or the other skipped).
"""

from __future__ import annotations

import keras

#: What every shared model is built with: small inputs, a few classes.
INPUT_SHAPE = (32, 32, 3)
CLASSES = 5

#: Each model's optimizer. SGD: tracing Adam's update costs about 40 ms of CPU per
#: variable (ResNet50 has 214, MobileNetV2 158), SGD's little; the
#: gradients are what kswap changes, and Adam's update of bit-identical gradients
#: is bit-identical (the exactness tests train the small models and GPT-2 with Adam).
OPTIMIZERS = {"ResNet50": "sgd", "MobileNetV2": "sgd"}

#: The models a later test takes (``tests/profiler/test_applications.py``); others are not kept.
SHARED = frozenset({"ResNet50", "MobileNetV2"})

_KEPT: dict[str, keras.Model] = {}


def build(name: str, *, seed: int = 0) -> keras.Model:
    """``keras.applications.<name>`` without weights, compiled, its optimizer built.

    The optimizer is built here, before ``fit``: then ``fit`` traces its step
    once. Left to ``fit``, the optimizer's slots are created inside the first
    trace, and TensorFlow traces the step a second time without them; the
    graph that runs is the same either way (the second trace), only the first
    is thrown away. (Plain models compiled and fitted the lazy way are the
    references of ``tests/layers/test_exactness.py``; ``kswap.OffloadingModel``
    builds the optimizer of the model it returns.)
    """
    keras.utils.set_random_seed(seed)
    model = getattr(keras.applications, name)(
        weights=None, input_shape=INPUT_SHAPE, classes=CLASSES
    )
    model.compile(OPTIMIZERS.get(name, "adam"), "sparse_categorical_crossentropy")
    model.optimizer.build(model.trainable_variables)
    return model


def keep(name: str, model: keras.Model) -> None:
    """Hands over a plain model built by :func:`build` whose training step has been traced."""
    if name in SHARED:
        _KEPT[name] = model


def take(name: str) -> keras.Model:
    """The model handed over for ``name`` (no longer kept), or a new one from :func:`build`."""
    model = _KEPT.pop(name, None)
    return model if model is not None else build(name)
