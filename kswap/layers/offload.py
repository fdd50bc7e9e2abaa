"""``Offload``: a wrapper layer whose activations wait in host memory.

Forward runs the wrapped layer, copies to the host tier the tensors its
backward reads, and keeps nothing else for backward. Backward brings them back
(scheduled one block ahead, see :mod:`kswap.layers.schedule`) and computes the
gradients with TensorFlow's own gradient functions (:mod:`kswap.layers.replay`)
— exactly, without re-running the forward. Layers whose forward cannot be
replayed fall back to recomputation with the forward's seeds
(:mod:`kswap.layers.recompute`).

Each offloaded call is one ``tf.custom_gradient`` block whose inputs are the
tensors the layer is called with (:mod:`kswap.layers.arguments`), each passed
once more per further use (:mod:`kswap.layers.per_use`); what its forward
sends to host memory and its gradient functions are in
:mod:`kswap.layers.backward`.

A wrapper's ``action`` (a :class:`kswap.planning.Action`, as a plan gives it)
says what happens to its block: ``"swap"`` (the above, with ``prefetch``),
``"keep"`` (the layer runs as without kswap: TensorFlow keeps what its backward
reads on the device), ``"recompute"`` (only the block's inputs are kept; its
forward runs again in backward) or ``"recompute:host"`` (its inputs wait in host
memory too). Changing it takes effect when the training step is traced again.

Example:
    >>> import keras
    >>> from kswap.layers import Offload
    >>> layer = Offload(keras.layers.Dense(4, activation="relu"))
    >>> model = keras.Sequential([keras.Input((8,)), layer])
    >>> model.compile("sgd", "mse")
    >>> import numpy as np
    >>> _ = model.fit(np.ones((16, 8)), np.ones((16, 4)), verbose=0)
"""

from __future__ import annotations

import numbers
import warnings

import keras
import tensorflow as tf
from tensorflow.python.eager import record

from kswap.layers import backward, per_use, recompute, replay
from kswap.layers.arguments import call_arguments, hidden_float_values, keep_keras_attributes
from kswap.layers.schedule import graph_state
from kswap.planning.actions import Action

__all__ = ["Offload", "MIN_OFFLOAD_BYTES", "check_action"]

#: Tensors smaller than this stay on the device (a copy would cost more).
MIN_OFFLOAD_BYTES = 16 * 1024

_warned_eager = False


def check_prefetch(prefetch) -> int:
    if isinstance(prefetch, bool) or not isinstance(prefetch, numbers.Integral) or prefetch < 0:
        raise ValueError(f"`prefetch` must be an integer >= 0. Received: prefetch={prefetch!r}")
    return int(prefetch)


def check_action(action, prefetch: int = 1) -> Action:
    """The :class:`Action` of ``action``: an Action, or its text form.

    ``"swap"`` and ``"recompute:host"`` take ``prefetch``; a form that gives
    its own (``"swap:0"``) keeps it.
    """
    if isinstance(action, Action):
        return action
    if isinstance(action, str) and action.strip() in ("swap", "recompute:host"):
        kind, _, checkpoint = action.strip().partition(":")
        return Action(kind, check_prefetch(prefetch), checkpoint or "device")
    return Action.parse(action)  # names `action` when it is not one


def _bytes(t: tf.Tensor) -> int | None:
    n = t.shape.num_elements()
    return None if n is None else n * t.dtype.size


def _worth_offloading(t: tf.Tensor) -> bool:
    if not (t.dtype.is_floating or t.dtype.is_integer or t.dtype.is_bool or t.dtype.is_complex):
        return False  # handles (resource, variant) and strings stay where they are
    if not tf.executing_eagerly() and t.op.type in (
        "ReadVariableOp",
        "Const",
        "VarHandleOp",
        "Shape",
    ):
        return False
    size = _bytes(t)
    return size is None or size >= MIN_OFFLOAD_BYTES


@keras.saving.register_keras_serializable(package="kswap")
class Offload(keras.layers.Wrapper):
    """Keeps the activations a layer's backward needs in host memory.

    Args:
        layer: The layer to wrap. Its weights are the wrapper's weights (the
            same variables, not copies).
        prefetch: How many blocks ahead backward brings tensors back: 1 starts
            a block's swap-ins when the backward of the next block begins; 0
            when its own begins and the next block's has ended.
        action: What happens to the block (module docstring): ``"swap"``
            (default), ``"keep"``, ``"recompute"``, ``"recompute:host"``, a
            form with its own prefetch (``"swap:0"``) or a
            :class:`kswap.planning.Action`.
        **kwargs: Keras layer arguments (``name``...). The name defaults to
            the wrapped layer's.
    """

    def __init__(self, layer, prefetch: int = 1, action: str | Action = "swap", **kwargs):
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(
                f"`layer` must be a keras.layers.Layer. Received: layer={layer!r} "
                f"of type {type(layer).__name__}"
            )
        if isinstance(layer, Offload):
            raise ValueError(f"`layer` is already offloaded. Received: layer={layer.name!r}")
        kwargs.setdefault("name", layer.name)
        super().__init__(layer, **kwargs)
        self.prefetch = check_prefetch(prefetch)
        self.action = action
        self.supports_jit = False  # XLA ignores device placement
        self.fallbacks: list[str] = []

    @property
    def action(self) -> Action:
        """What happens to the block; setting it also sets ``prefetch``."""
        return self._action

    @action.setter
    def action(self, value: str | Action) -> None:
        action = check_action(value, self.prefetch)
        self._action = action
        if action.copies:
            self.prefetch = action.prefetch

    def build(self, input_shape=None):
        if not self.layer.built:
            self.layer.build(input_shape)
        self.built = True

    def compute_output_shape(self, *args, **kwargs):
        return self.layer.compute_output_shape(*args, **kwargs)

    def compute_output_spec(self, *args, **kwargs):
        return self.layer.compute_output_spec(*args, **kwargs)

    def compute_mask(self, inputs, previous_mask=None):
        # The wrapped layer is called with the masked tensors and sets its outputs'
        # masks itself; Keras asks this only for outputs it left without one. A layer
        # that does not support masking drops the mask, as it does unwrapped.
        if not self.layer.supports_masking:
            return None
        return self.layer.compute_mask(inputs, previous_mask)

    def call(self, inputs, *args, training=None, **kwargs):
        # Keras resolves `training` from the call context; pass it on explicitly,
        # so a recomputation in backward (outside that context) sees it too.
        if getattr(self.layer, "_call_has_training_arg", False):
            kwargs["training"] = training
        if self._action.kind == "keep" or not record.could_possibly_record():
            return self.layer(inputs, *args, **kwargs)  # as without kswap, or no backward
        if hidden_float_values(args, kwargs):
            # composite values (ragged, sparse) cannot be block inputs, and a
            # closed-over float value would get no gradient: TensorFlow differentiates it
            _warn_not_offloaded(self)
            return self.layer(inputs, *args, **kwargs)
        if tf.executing_eagerly():
            _warn_eager()
            return _block(self, inputs, args, kwargs, graph=False)
        return _block(self, inputs, args, kwargs, graph=True)

    def get_config(self):
        config = super().get_config()
        config["prefetch"] = self.prefetch
        config["action"] = str(self._action)
        return config


def _warn_not_offloaded(wrapper: Offload) -> None:
    if getattr(wrapper, "_warned_arguments", False):
        return
    wrapper._warned_arguments = True
    wrapper.fallbacks.append("composite float values (ragged or sparse) passed besides the inputs")
    warnings.warn(
        f"kswap does not offload layer {wrapper.layer.name!r} "
        f"({type(wrapper.layer).__name__}): it is called with ragged or sparse float "
        "values besides its first argument, which must get gradients too. TensorFlow "
        "differentiates it as without kswap (same gradients; its activations stay on "
        "the device).",
        stacklevel=2,
    )


def _warn_eager() -> None:
    global _warned_eager
    if not _warned_eager:
        _warned_eager = True
        warnings.warn(
            "kswap offloading runs eagerly (run_eagerly=True or a loop without "
            "tf.function): copies to and from the host are synchronous and layers "
            "are recomputed in backward. Train inside tf.function (the default of "
            "model.fit) for overlapped transfers.",
            stacklevel=3,
        )


def _block(wrapper: Offload, inputs, args, kwargs, graph: bool):
    tensors, rebuild = call_arguments(inputs, args, kwargs)
    state = graph_state() if graph else None
    index = state.register_block() if graph else -1
    lstate = recompute.layer_state(wrapper.layer)

    def call(ts):
        inputs_, args_, kwargs_ = rebuild(ts)
        return wrapper.layer(inputs_, *args_, **kwargs_)

    structure = {}

    @tf.custom_gradient
    def block(*args):
        *xs, uses = args  # ``uses``: more inputs, filled in below (see per_use)
        xs = tuple(xs)
        seeds_before = lstate.seed_values()
        planned_recompute = wrapper.action.kind == "recompute"  # the forward runs again
        if graph and not planned_recompute:
            with record.VariableWatcher() as watcher:
                outputs, ops, scopes = replay.record_ops(lambda: call(xs))
            state.gate_forward(ops)
        else:
            outputs, ops, scopes = call(xs), [], {}
        structure["outputs"] = outputs
        flat_out = [tf.convert_to_tensor(o) for o in keras.tree.flatten(outputs)]
        if planned_recompute:
            host = wrapper.action.checkpoint == "host"
            grad = backward.recompute_grad(
                wrapper, state, index, xs, call, seeds_before, host, worth=_worth_offloading
            )
            return flat_out, grad
        plan = replay.plan_replay(ops, xs, flat_out, watcher.watched_variables()) if graph else None
        if plan is not None and plan.replayable:
            specials = backward.offload_reads(state, plan, xs, worth=_worth_offloading)
            slots = structure["slots"] = per_use.per_use_inputs(plan, xs, uses)
            structure["uses"] = uses
            grad = backward.replay_grad(
                wrapper,
                state,
                index,
                plan,
                xs,
                flat_out,
                scopes,
                specials,
                slots,
                worth=_worth_offloading,
            )
        else:
            if plan is not None:
                _fall_back(wrapper, plan.reason)
            grad = backward.recompute_grad(
                wrapper, state, index, xs, call, seeds_before, worth=_worth_offloading
            )
        return flat_out, grad

    uses: list = []
    out = keras.tree.flatten(block(*tensors, uses))
    if "slots" in structure:  # the list the block got is a copy of ``uses``
        structure["slots"].recorded = per_use.recorded(out, len(tensors), structure["uses"])
    for new, inner in zip(out, keras.tree.flatten(structure["outputs"]), strict=True):
        keep_keras_attributes(new, inner)
    return keras.tree.pack_sequence_as(structure["outputs"], out)


def _fall_back(wrapper: Offload, reason: str) -> None:
    """Records that a layer is recomputed, and warns the first time for that layer."""
    if reason in wrapper.fallbacks:
        return
    wrapper.fallbacks.append(reason)
    if len(wrapper.fallbacks) > 1:  # warned already (another trace of the same layer)
        return
    warnings.warn(
        f"kswap cannot replay the backward of layer {wrapper.layer.name!r} "
        f"({type(wrapper.layer).__name__}): {reason}. It is recomputed in backward "
        "instead: the gradients are the same, but its forward runs twice per step "
        "(more time), and its working set is on the device during its backward. "
        "`layer.fallbacks` lists the reasons.",
        stacklevel=2,
    )
