"""``kswap.OffloadingModel`` and ``kswap.strip``: offloading on and off in one line.

``OffloadingModel(model)`` returns a model with the same layers and the same
weight objects, in which the selected layers are wrapped in
:class:`kswap.layers.Offload`. It is compiled like the original (same
optimizer object, so optimizer state carries over) when the original was
compiled. ``strip`` is its inverse.

Example:
    >>> import keras, kswap
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, name="d")])
    >>> offloaded = kswap.OffloadingModel(model)
    >>> type(offloaded.get_layer("d")).__name__
    'Offload'
    >>> plain = kswap.strip(offloaded)
    >>> plain.get_layer("d") is model.get_layer("d")
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from kswap.layers.offload import Offload, check_action, check_prefetch
from kswap.optimizer_state import check_optimizer_state, place_optimizer_state
from kswap.planning.actions import Action
from kswap.planning.plan import Plan

__all__ = ["OffloadingModel", "strip", "POLICIES", "CONV_LAYERS"]

#: Named policies.
POLICIES = ("all", "conv", "auto")

#: Layer classes the ``"conv"`` policy offloads (vDNN_conv: convolution inputs).
CONV_LAYERS = (
    keras.layers.Conv1D,
    keras.layers.Conv2D,
    keras.layers.Conv3D,
    keras.layers.DepthwiseConv2D,
    keras.layers.SeparableConv1D,
    keras.layers.SeparableConv2D,
    keras.layers.Conv1DTranspose,
    keras.layers.Conv2DTranspose,
    keras.layers.Conv3DTranspose,
)


#: Layers whose backward reads at most their output: the ``"conv"`` policy
#: also offloads them when they produce a convolution's input, so that tensor
#: leaves the device (in Keras the activation before a convolution is a layer
#: of its own, which would otherwise keep it for its own backward).
PASS_THROUGH_LAYERS = (
    keras.layers.Activation,
    keras.layers.ReLU,
    keras.layers.LeakyReLU,
    keras.layers.ELU,
    keras.layers.ZeroPadding1D,
    keras.layers.ZeroPadding2D,
    keras.layers.ZeroPadding3D,
    keras.layers.Add,
    keras.layers.Concatenate,
    keras.layers.MaxPooling1D,
    keras.layers.MaxPooling2D,
    keras.layers.MaxPooling3D,
    keras.layers.AveragePooling1D,
    keras.layers.AveragePooling2D,
    keras.layers.AveragePooling3D,
    keras.layers.Dropout,
    keras.layers.Reshape,
    keras.layers.Flatten,
)


def _conv_producers(model) -> set[int]:
    """ids of pass-through layers whose outputs feed a convolution (any depth)."""
    found: set[int] = set()
    layers = list(model.layers)
    for i, layer in enumerate(layers):
        if _is_graph_model(layer):
            found |= _conv_producers(layer)
        if not isinstance(layer, CONV_LAYERS):
            continue
        producers = []
        for node in getattr(layer, "_inbound_nodes", []):
            for t in node.input_tensors:
                history = getattr(t, "_keras_history", None)
                if history is not None:
                    producers.append(history.operation)
        if not producers and i > 0:  # Sequential without recorded nodes
            producers.append(layers[i - 1])
        stack = producers
        while stack:  # through chains of pass-through layers (pad -> relu -> conv)
            p = stack.pop()
            if isinstance(p, PASS_THROUGH_LAYERS) and id(p) not in found:
                found.add(id(p))
                for node in getattr(p, "_inbound_nodes", []):
                    stack.extend(
                        t._keras_history.operation
                        for t in node.input_tensors
                        if getattr(t, "_keras_history", None) is not None
                    )
    return found


def _is_graph_model(model) -> bool:
    from keras.src.models.functional import Functional

    return isinstance(model, (keras.Sequential, Functional))


def _layer_names(model) -> set[str]:
    names = set()
    for layer in model.layers:
        names.add(layer.name)
        if _is_graph_model(layer):
            names |= _layer_names(layer)
    return names


def planned_actions(policy, prefetch: int = 1) -> dict[str, Action] | None:
    """The per-layer actions of a :class:`~kswap.planning.Plan` or a mapping, else None.

    A mapping gives layer names their actions (``{"conv1": "recompute",
    "conv2": "swap:0"}``); ``"swap"`` and ``"recompute:host"`` take ``prefetch``.
    A nested model's layer may be named by its path, as traces and plans name
    it (``"backbone/block_0"``): Keras names hold no ``/``, and kswap's
    wrappers are unique by name in the whole model, so the last part names it.
    """
    if isinstance(policy, Plan):
        pairs = zip(policy.blocks, policy.actions, strict=True)
    elif isinstance(policy, Mapping):
        bad = [k for k in policy if not isinstance(k, str)]
        if bad:
            raise ValueError(
                f"`policy` as a mapping must map layer names to actions. Received keys: {bad!r}"
            )
        pairs = ((name, check_action(a, prefetch)) for name, a in policy.items())
    else:
        return None
    return {name.rsplit("/", 1)[-1]: action for name, action in pairs}


def _selector(policy, model) -> Callable[[keras.layers.Layer], bool]:
    if isinstance(policy, str):
        if policy == "all":
            return lambda layer: True
        if policy == "conv":
            producers = _conv_producers(model)
            return lambda layer: isinstance(layer, CONV_LAYERS) or id(layer) in producers
        if policy == "auto":  # every layer; kswap.AutoTune chooses the actions
            return lambda layer: True
        raise ValueError(
            f"`policy` must be one of {POLICIES}, a list of layer names or a callable "
            f"layer -> bool. Received: policy={policy!r}"
        )
    if callable(policy):
        return lambda layer: bool(policy(layer))
    if isinstance(policy, Sequence) and all(isinstance(n, str) for n in policy):
        wanted = set(policy)
        unknown = sorted(wanted - _layer_names(model))
        if unknown:
            raise ValueError(
                f"`policy` names layers the model does not have: {unknown}. "
                f"Layers: {sorted(_layer_names(model))}"
            )
        return lambda layer: layer.name in wanted
    raise ValueError(
        "`policy` must be 'all', 'conv', 'auto', a list of layer names or a callable "
        f"layer -> bool. Received: policy={policy!r} of type {type(policy).__name__}"
    )


def _check_model(model, fn: str) -> None:
    if not isinstance(model, keras.Model):
        raise ValueError(
            f"`model` must be a keras.Model. Received: model={model!r} of type "
            f"{type(model).__name__}"
        )
    if not _is_graph_model(model):
        raise ValueError(
            f"kswap.{fn} supports Sequential and functional models (and models nested "
            "in them), whose layer graph it can rebuild. Received: a subclassed model "
            f"{model.name!r} of type {type(model).__name__}. Build it functionally, or "
            "wrap its layers yourself with kswap.layers.Offload."
        )


def _transform(model, fn: Callable) -> keras.Model:
    def clone(layer):
        if _is_graph_model(layer):
            return _transform(layer, fn)
        return fn(layer)

    return keras.models.clone_model(model, clone_function=clone)


def _compile_like(new: keras.Model, model: keras.Model) -> None:
    if not getattr(model, "compiled", False):
        return
    config = dict(model._compile_config.config)
    config["optimizer"] = model.optimizer  # same object: its state carries over
    if config.get("jit_compile") is True:
        raise ValueError(
            "Offloaded layers cannot run under XLA (XLA ignores device placement). "
            "Received: a model compiled with jit_compile=True. Compile it with "
            "jit_compile=False or 'auto'."
        )
    config["jit_compile"] = False
    new.compile(**config)


def _place_state(new: keras.Model, model: keras.Model, tier: str) -> None:
    """Puts the shared optimizer's slots in ``tier``; ``model``'s traced steps are reset."""
    if getattr(new, "optimizer", None) is None:
        return
    if not place_optimizer_state(new.optimizer, tier, new.trainable_variables):
        return
    # steps traced before the move would go on updating the old slot variables
    for m in (model, new):
        m.train_function = m.test_function = m.predict_function = None


def OffloadingModel(  # noqa: N802
    model, policy="all", *, prefetch: int = 1, optimizer_state: str | None = None
) -> keras.Model:
    """A model that keeps the activations its backward needs in host memory.

    Args:
        model: A Sequential or functional ``keras.Model`` (models nested in it
            are handled too). Its weights are shared, not copied.
        policy: Which layers to offload: ``"all"`` (every layer: vDNN_all),
            ``"conv"`` (the inputs of convolutions: vDNN_conv; the
            convolutions and the pass-through layers such as activations and
            padding that produce their inputs), a list of layer names, or a
            callable ``layer -> bool``. A :class:`kswap.planning.Plan`, or a
            mapping from layer names to actions (``{"c1": "recompute",
            "c2": "swap:0"}``, see :class:`kswap.layers.Offload`), wraps
            the layers it names with their actions. ``"auto"`` wraps every
            layer, as ``"all"``, and leaves the choice of the actions to
            :class:`kswap.AutoTune`: given the batch size, it starts ``fit``
            from the static plan (:func:`kswap.plan`); until it has planned
            (or without it) every block is swapped, the safe start.
        prefetch: How many blocks ahead the backward brings tensors back
            (default 1: copies overlap the next block's backward). 0 brings a
            block's tensors back only once its own backward can start and the
            block after it has finished: less memory, less overlap.
        optimizer_state: Where the optimizer's slots (Adam's moments,
            momentum buffers) live: ``"device"`` or ``"host"``; by default
            the plan's when ``policy`` is a plan, else ``"device"``.
            The optimizer object is shared with ``model``, so the move
            applies to both; see :mod:`kswap.optimizer_state`.

    Returns:
        A new ``keras.Model`` with the same weight objects, compiled with the
        original's optimizer object, loss and metrics if the original was
        compiled. Calling it on a model that is already offloaded wraps only
        layers that are not wrapped yet. The optimizer is built, if it was
        not (outside a distribution strategy; Keras builds it under one), so
        that ``fit`` traces the step once, not twice.
    """
    _check_model(model, "OffloadingModel")
    prefetch = check_prefetch(prefetch)
    actions = planned_actions(policy, prefetch)
    if optimizer_state is None:
        optimizer_state = policy.optimizer_state if isinstance(policy, Plan) else "device"
    optimizer_state = check_optimizer_state(optimizer_state)
    if optimizer_state == "host" and getattr(model, "optimizer", None) is None:
        raise ValueError(
            "`optimizer_state='host'` moves the optimizer's state, and this model has "
            "no optimizer. Received: an uncompiled model; compile it first."
        )
    select = _selector(list(actions) if actions is not None else policy, model)

    def wrap(layer):
        # clone_model hands over every keras.Operation (``x + 1.0``, ``outputs["a"]``):
        # operations that are not layers stay as they are, differentiated by TensorFlow
        if not isinstance(layer, keras.layers.Layer) or isinstance(
            layer, (Offload, keras.layers.InputLayer)
        ):
            return layer
        if not select(layer):
            return layer
        action = actions[layer.name] if actions is not None else "swap"
        return Offload(layer, prefetch=prefetch, action=action)

    new = _transform(model, wrap)
    #: read by kswap.AutoTune: the actions are its to choose, from the start
    new._kswap_policy = policy if isinstance(policy, str) else None
    _compile_like(new, model)
    _place_state(new, model, optimizer_state)
    _build_optimizer(new)
    return new


def _build_optimizer(model: keras.Model) -> None:
    """Builds a compiled model's optimizer now, so that ``fit`` traces its step once.

    Without a distribution strategy Keras builds the optimizer inside the
    first traced step, and ``tf.function``, having seen variables made,
    traces the step a second time; under a strategy Keras builds it before
    tracing (``_symbolic_build``), as this does. The slots are the ones Keras
    makes (zeros, the same names), so training is the same; the first ``fit``
    takes about half as long.
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built:
        return
    if getattr(model, "_distribute_strategy", None) is not None or tf.distribute.has_strategy():
        return  # Keras builds it under the strategy's scope
    optimizer.build(model.trainable_variables)


def strip(model) -> keras.Model:
    """The model without kswap's wrappers, with the same weight objects.

    The optimizer's state goes back to the device if it was in host memory.
    """
    _check_model(model, "strip")
    new = _transform(model, lambda layer: layer.layer if isinstance(layer, Offload) else layer)
    _compile_like(new, model)
    _place_state(new, model, "device")
    return new
