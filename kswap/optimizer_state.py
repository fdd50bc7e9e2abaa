"""Optimizer state in host memory: an optimizer's slots off the device.

Adam keeps two slots per weight, so with Adam the optimizer's state is twice
the weights and stays on the device for the whole step; for a model at a
small input it outweighs the activations. :func:`place_optimizer_state` moves
the slots (every optimizer variable that is not a scalar: Adam's moments,
momentum buffers, EMA copies; counters and the learning rate stay) to the
host tier, and back. The optimizer object, its variables' identities and its
update code stay the same, so training gives exactly the same numbers.

On a GPU the slots live in host memory: TensorFlow runs each slot's
assignment on the host and copies what the update reads of it to the device,
one weight's update at a time (the updates run as each gradient is ready).
When the tiers are emulated on CPU, the slots' bytes and the buffers their
updates allocate are counted as host bytes; the device copies that a GPU
makes of one weight's slots while updating it are not emulated.

Example:
    >>> import keras
    >>> from kswap.optimizer_state import place_optimizer_state, host_variables
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    >>> model.compile("adam", "mse")
    >>> place_optimizer_state(model.optimizer, "host", model.trainable_variables)
    True
    >>> len(host_variables(model.optimizer))   # two moments for kernel and bias
    4
    >>> place_optimizer_state(model.optimizer, "device")
    True
    >>> host_variables(model.optimizer)
    []
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import tensorflow as tf

from kswap import transfer

__all__ = [
    "TIERS",
    "check_optimizer_state",
    "distributed",
    "host_variables",
    "place_optimizer_state",
    "slot_variables",
]

#: Where ``optimizer_state`` may put an optimizer's slots.
TIERS = ("device", "host")
_ASSIGNS = ("assign", "assign_add", "assign_sub")
_HOST = "_kswap_host_state"
_DISTRIBUTED = (
    "`optimizer_state='host'` does not support tf.distribute yet: the optimizer's "
    "variables are distributed by a strategy. Keep optimizer_state='device' under "
    "a distribution strategy."
)


def check_optimizer_state(optimizer_state: str) -> str:
    if optimizer_state not in TIERS:
        raise ValueError(
            f"`optimizer_state` must be one of {TIERS}. Received: "
            f"optimizer_state={optimizer_state!r}"
        )
    return optimizer_state


def _chain(optimizer: keras.optimizers.Optimizer) -> list:
    """The optimizer and the ones it wraps (LossScaleOptimizer's inner one)."""
    chain = [optimizer]
    while getattr(chain[-1], "inner_optimizer", None) is not None:
        chain.append(chain[-1].inner_optimizer)
    return chain


def slot_variables(optimizer: keras.optimizers.Optimizer) -> list:
    """The optimizer's variables that can move: every one that is not a scalar."""
    return [v for v in optimizer.variables if len(v.shape) > 0]


def host_variables(optimizer: keras.optimizers.Optimizer) -> list:
    """The optimizer's variables that live in the host tier."""
    return slot_variables(optimizer) if getattr(optimizer, _HOST, False) else []


def distributed(optimizer: keras.optimizers.Optimizer) -> bool:
    """Whether a ``tf.distribute`` strategy holds the optimizer's variables.

    Their slots then stay on the device: :func:`place_optimizer_state`
    refuses to move them.
    """
    strategy = getattr(optimizer, "_distribution_strategy", None)
    if tf.distribute.has_strategy() or strategy not in (None, tf.distribute.get_strategy()):
        return True
    return any(isinstance(v._value, tf.distribute.DistributedValues) for v in optimizer.variables)


def place_optimizer_state(
    optimizer: keras.optimizers.Optimizer, tier: str, variables: list | None = None
) -> bool:
    """Moves ``optimizer``'s slots to ``tier`` (``"host"`` or ``"device"``).

    Args:
        optimizer: A built Keras optimizer, or one to build for ``variables``.
        tier: ``"host"`` or ``"device"``. Moving to where the slots already
            are does nothing.
        variables: The variables the optimizer trains, to build it with if it
            is not built yet.

    The old variables' buffers are freed at once, so functions traced
    before the move (a model's ``train_function``) cannot run any more:
    set them to None (:func:`kswap.OffloadingModel` and
    :func:`kswap.apply_plan` do) and Keras traces them again.

    Returns:
        Whether anything moved.

    Raises:
        ValueError: ``tier`` is not a tier; the optimizer is not built and no
            ``variables`` are given; or its variables are distributed
            (``tf.distribute``), which this does not support.
    """
    tier = check_optimizer_state(tier)
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise ValueError(
            f"`optimizer` must be a Keras optimizer. Received: optimizer={optimizer!r}"
        )
    if getattr(optimizer, _HOST, False) == (tier == "host"):
        return False
    if distributed(optimizer):
        raise ValueError(_DISTRIBUTED)
    if not optimizer.built:
        if variables is None:
            raise ValueError(
                "The optimizer is not built yet, so it has no state to move: pass the "
                "variables it trains (`variables`). Received: variables=None"
            )
        optimizer.build(variables)
    slots = slot_variables(optimizer)
    if distributed(optimizer):  # built just now, under a strategy
        raise ValueError(_DISTRIBUTED)
    for v in slots:  # the Keras variable stays; the TensorFlow variable under it moves
        old, v._value = v._value, transfer.move_variable(v._value, tier)
        transfer.release_variable(old)  # a traced step's capture would keep it alive
    host = {id(v) for v in slots}
    for opt in _chain(optimizer):
        for name in _ASSIGNS:
            if tier == "host":
                setattr(opt, name, _in_host_tier(getattr(type(opt), name).__get__(opt), host))
            else:
                opt.__dict__.pop(name, None)
    setattr(optimizer, _HOST, tier == "host")
    return True


def _in_host_tier(assign: Callable, host: set[int]) -> Callable:
    """``assign`` (an optimizer's assign method), in the host tier for ``host`` variables."""

    def wrapped(variable, value):
        if id(variable) not in host:
            return assign(variable, value)
        with transfer.host_update():
            return assign(variable, value)

    return wrapped
