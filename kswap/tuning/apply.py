"""Applying a plan: each wrapper's action, and where the optimizer's slots live.

A plan (:class:`kswap.planning.Plan`, or a mapping from layer names to
actions) names blocks by the names of the layers kswap wraps. Applying it sets
the :attr:`~kswap.layers.Offload.action` of those wrappers and, for a
``Plan``, moves the optimizer's slots to its tier. A wrapper reads its action
when the training step is traced, so applying a plan resets the model's traced
functions: ``fit`` traces the step again (a callback that applies a plan while
``fit`` runs calls ``model.make_train_function(force=True)``).

Example:
    >>> import keras, kswap
    >>> from kswap.tuning import apply_plan
    >>> plain = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, name="d")])
    >>> model = kswap.OffloadingModel(plain)
    >>> previous = apply_plan(model, {"d": "swap:0"})
    >>> str(previous["d"]), model.get_layer("d").prefetch
    ('swap', 0)
"""

from __future__ import annotations

from collections.abc import Mapping

import keras

from kswap.layers.offload import Offload, check_action, check_prefetch
from kswap.offloading import planned_actions
from kswap.optimizer_state import place_optimizer_state
from kswap.planning.actions import Action
from kswap.planning.plan import Plan

__all__ = ["apply_plan", "current_actions", "wrappers"]

_NOT_OFFLOADED = (
    "`model` has no kswap wrappers to apply a plan to: wrap it first, "
    "`model = kswap.OffloadingModel(model)`."
)


def wrappers(model: keras.Model) -> dict[str, Offload]:
    """The model's :class:`~kswap.layers.Offload` wrappers by name, nested models included.

    Raises:
        ValueError: If two different wrappers share a name (a plan could not
            tell them apart).
    """
    found: dict[str, Offload] = {}
    for layer in model._flatten_layers(include_self=False):
        if not isinstance(layer, Offload):
            continue
        if found.get(layer.name, layer) is not layer:
            raise ValueError(
                f"Two offloaded layers of `model` are named {layer.name!r}: a plan names "
                "blocks by layer name. Give the layers unique names."
            )
        found[layer.name] = layer
    return found


def current_actions(model: keras.Model) -> dict[str, Action]:
    """Each wrapper's action, by layer name (what :func:`apply_plan` takes back)."""
    return {name: w.action for name, w in wrappers(model).items()}


def apply_plan(
    model: keras.Model,
    plan: Plan | Mapping[str, Action | str] | Action | str,
    *,
    prefetch: int = 1,
) -> dict[str, Action]:
    """Sets the actions of ``model``'s wrappers; its traced functions are reset.

    Args:
        model: A model made by :func:`kswap.OffloadingModel`.
        plan: A :class:`~kswap.planning.Plan` (its optimizer tier is applied
            too), a mapping from layer names to actions, or one action for
            every wrapper (``"swap"``, ``"recompute:host:2"``...).
        prefetch: The prefetch of ``"swap"`` and ``"recompute:host"`` given
            without one.

    Returns:
        The actions the named wrappers had before: ``apply_plan(model,
        returned)`` undoes the call (but for the optimizer's tier).

    Raises:
        ValueError: If ``model`` has no wrappers, ``plan`` names a layer that
            is not wrapped, or an action is not one.
    """
    prefetch = check_prefetch(prefetch)
    found = wrappers(model)
    if not found:
        raise ValueError(f"{_NOT_OFFLOADED} Received: model={model.name!r}")
    actions = planned_actions(plan, prefetch)
    if actions is None:
        if not isinstance(plan, (Action, str)):
            raise ValueError(
                "`plan` must be a kswap.planning.Plan, a mapping from layer names to "
                f"actions, or an action. Received: plan={plan!r} of type {type(plan).__name__}"
            )
        one = check_action(plan, prefetch)
        actions = dict.fromkeys(found, one)
    unknown = sorted(set(actions) - set(found))
    if unknown:
        raise ValueError(
            f"`plan` names layers that are not offloaded in `model`: {unknown}. "
            f"Offloaded layers: {sorted(found)}"
        )
    previous = {name: found[name].action for name in actions}
    for name, action in actions.items():
        found[name].action = action
    if isinstance(plan, Plan) and getattr(model, "optimizer", None) is not None:
        place_optimizer_state(model.optimizer, plan.optimizer_state, model.trainable_variables)
    model.train_function = model.test_function = model.predict_function = None
    return previous
