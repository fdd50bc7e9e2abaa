"""Recompute fallback: the backward re-runs a layer from its swapped-in inputs.

Used for layers whose forward cannot be replayed op by op (control flow,
function calls, ops without a registered gradient) and in eager mode. The
re-run must give the forward's values, so it:

- reuses the forward's random seeds: every seed generator of the layer is set
  back to its state before the forward for the re-run, then restored;
- does not update state twice: every non-trainable variable (BatchNormalization
  moving statistics...) is read before the re-run and assigned back after it.

Example:
    >>> import keras, tensorflow as tf
    >>> from kswap.layers.recompute import layer_state, rerun_gradients
    >>> layer = keras.layers.Dense(2)
    >>> x = tf.ones((1, 3))
    >>> _ = layer(x)
    >>> seeds = layer_state(layer).seed_values()
    >>> variables = [v.value for v in layer.trainable_weights]
    >>> grads, var_grads = rerun_gradients(
    ...     layer, [x], lambda xs: layer(xs[0]), [tf.ones((1, 2))], variables, seeds)
    >>> grads[0].shape
    TensorShape([1, 3])
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

__all__ = ["LayerState", "layer_state", "rerun_gradients"]


def _seed_generators(layer) -> list:
    found, seen = [], set()
    for sub in [layer, *getattr(layer, "_flatten_layers", lambda: [])()]:
        for sg in getattr(sub, "_seed_generators", []) or []:
            if id(sg) not in seen:
                seen.add(id(sg))
                found.append(sg)
    return found


@dataclasses.dataclass
class LayerState:
    """Seed generators and non-trainable variables of a layer (and sublayers)."""

    seeds: list
    non_trainable: list

    def seed_values(self) -> list[tf.Tensor]:
        """The seed states now (read before the forward)."""
        return [tf.identity(sg.state.value) for sg in self.seeds]


def layer_state(layer) -> LayerState:
    seeds = _seed_generators(layer)
    seed_vars = {id(sg.state) for sg in seeds}
    non_trainable = [v for v in layer.non_trainable_weights if id(v) not in seed_vars]
    return LayerState(seeds, non_trainable)


def _tape_scope():
    """The root name scope in a graph, where Keras's ``tape.gradient()`` runs.

    The tape names a gradient op after its forward op wherever it runs, but
    sums a tensor's gradients (``AddN``) in the scope it is called in. Grappler
    sorts the inputs of commutative ops by name before it reassociates
    products, so sums named as the plain tape names them (``AddN_<n>``, not
    ``gradient_tape/<layer>/AddN_<n>``) keep the plain model's rounding.
    """
    if tf.executing_eagerly():
        return contextlib.nullcontext()
    return tf.compat.v1.get_default_graph().name_scope("")


def rerun_gradients(
    layer,
    inputs: Sequence[tf.Tensor],
    call: Callable[[list], object],
    upstream: Sequence[tf.Tensor | None],
    variables: Sequence,
    seeds_before: Sequence[tf.Tensor],
    after: Sequence[tf.Tensor] = (),
) -> tuple[list, list]:
    """Re-runs ``call(inputs)`` under a tape and returns input and variable gradients.

    Args:
        layer: The layer ``call`` runs (its state is protected).
        inputs: The forward's inputs, already back on the device. A tensor
            given at several positions gets its full gradient at each.
        call: Runs the layer on a list of inputs.
        upstream: Gradient for each flat output.
        variables: Variables to differentiate (``tf.Variable``s).
        seeds_before: Seed states read before the forward, in
            ``layer_state(layer).seeds`` order.
        after: What the re-run waits for (control dependencies): the
            block's upstream gradient in a graph. Without it TensorFlow's
            executor runs the re-run as soon as its inputs exist, which for
            inputs kept on the device is during the forward, and the
            recomputed activations are held as long as the forward's were.
    """
    state = layer_state(layer)
    seeds_after = [tf.identity(sg.state.value) for sg in state.seeds]
    stats_after = [tf.identity(v.value) for v in state.non_trainable]
    for sg, value in zip(state.seeds, seeds_before, strict=True):
        sg.state.assign(value)
    # one re-run input per tensor: a tensor passed twice (``Multiply()([h, h])``)
    # then gets its full gradient at every position, as the caller expects
    copies: dict = {}
    with tf.control_dependencies(list(after)):
        for t in inputs:
            if t.ref() not in copies:
                copies[t.ref()] = tf.identity(t)
    inputs = [copies[t.ref()] for t in inputs]
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(inputs)
        for v in variables:
            tape.watch(v)
        outputs = keras.tree.flatten(call(inputs))
    pairs = [(o, g) for o, g in zip(outputs, upstream, strict=True) if g is not None]
    with _tape_scope():
        grads = tape.gradient(
            [o for o, _ in pairs],
            list(inputs) + list(variables),
            output_gradients=[g for _, g in pairs],
        )
    # gradient ops read the re-run's values: restore state only after them
    deps = [g for g in grads if g is not None]
    with tf.control_dependencies(deps):
        for sg, value in zip(state.seeds, seeds_after, strict=True):
            sg.state.assign(value)
        for v, value in zip(state.non_trainable, stats_after, strict=True):
            v.assign(value)
    n = len(inputs)
    return list(grads[:n]), list(grads[n:])
