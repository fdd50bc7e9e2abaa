"""Tuning an offloaded model: applying plans to its wrappers (and AutoTune).

Example:
    >>> import keras, kswap
    >>> from kswap.tuning import apply_plan, current_actions
    >>> model = kswap.OffloadingModel(keras.Sequential(
    ...     [keras.Input((8,)), keras.layers.Dense(4, name="a"), keras.layers.Dense(2, name="b")]))
    >>> before = apply_plan(model, {"a": "recompute", "b": "keep"})
    >>> {name: str(a) for name, a in current_actions(model).items()}
    {'a': 'recompute', 'b': 'keep'}
    >>> _ = apply_plan(model, before)   # the inverse
    >>> {name: str(a) for name, a in current_actions(model).items()}
    {'a': 'swap', 'b': 'swap'}
"""

from __future__ import annotations

from kswap.tuning.apply import apply_plan, current_actions, wrappers
from kswap.tuning.autotune import AutoTune, Round

__all__ = ["AutoTune", "Round", "apply_plan", "current_actions", "wrappers"]
