"""AutoTune before the first step: the budget checked, and the static plan to start from.

At ``on_train_begin`` :class:`kswap.AutoTune` refuses a budget below the
device bytes no plan removes (:func:`floor_bytes`: every weight, and the
trainable ones' gradients). With ``batch_size``, the static estimate
(:func:`kswap.estimate.plan.static_plan`, timed with the device's preset,
:func:`kswap.tuning.device.device_preset`) also refuses a budget no plan
meets, naming the smallest feasible one, and a model made with
``OffloadingModel(model, policy="auto")`` starts from the static plan
(:attr:`AutoTune.static_plan`) rather than with every block swapped.

Example:
    >>> import keras
    >>> from kswap.tuning.static_start import floor_bytes
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    >>> floor_bytes(model)   # 36 float32 weights, and their gradients
    288
"""

from __future__ import annotations

import warnings

from kswap.planning.budget import format_bytes
from kswap.tuning.apply import apply_plan
from kswap.tuning.closed_loop import plan_counts
from kswap.tuning.device import device_preset

__all__ = ["StaticStartMixin", "floor_bytes"]


class StaticStartMixin:
    """:class:`kswap.AutoTune`'s checks and static plan before the first step.

    Mixed into :class:`kswap.AutoTune`: uses its ``model``, ``budget``,
    ``_budget`` (the budget resolved at train begin), ``batch_size``,
    ``link``, ``device``, ``strategy`` and ``verbose``, and sets
    ``static_plan``.
    """

    def _check_floor(self) -> None:
        """Refuses a budget in bytes below what every plan leaves on the device."""
        floor = floor_bytes(self.model)
        if self._budget.bytes is not None and self._budget.bytes < floor:
            raise ValueError(
                f"No plan meets `budget`={format_bytes(self._budget.bytes)}: the model's "
                f"weights and their gradients alone take {format_bytes(floor)} of device "
                "memory, whatever is swapped or recomputed. The smallest feasible budget is "
                f"above that. Received: budget={self.budget}"
            )

    def _static_start(self) -> None:
        """Before the first step: the static plan, or the refusal of a budget none meets."""
        from kswap.estimate.plan import static_plan

        device = self.device or device_preset()
        try:
            result = static_plan(
                self.model,
                self.batch_size,
                self._budget,
                link=self.link,
                device=device,
                strategy=self.strategy,
            )
        except ValueError as error:
            message = " ".join(str(error).split())
            raise ValueError(
                f"kswap.AutoTune: by the static estimate at batch_size={self.batch_size}, "
                f"{message[0].lower()}{message[1:]} Received: budget={self.budget}"
            ) from None
        if getattr(self.model, "_kswap_policy", None) != "auto":
            return
        try:
            apply_plan(self.model, result.plan)
        except ValueError as error:  # a block the estimate names that is not wrapped
            warnings.warn(
                f"kswap.AutoTune cannot start from the static plan ({error}); every block "
                "stays swapped until the first plan.",
                stacklevel=2,
            )
            return
        self.model.make_train_function(force=True)
        self.static_plan = result.plan
        if self.verbose:
            print(
                f"AutoTune: starts from the static plan for batch {self.batch_size} on "
                f"{device.name}: {plan_counts(result.plan)}; estimated peak "
                f"{format_bytes(result.plan.predicted_peak_bytes)} of "
                f"{format_bytes(result.plan.budget_bytes or 0)}"
            )


def floor_bytes(model) -> int:
    """Device bytes no plan removes: every weight, and the trainable ones' gradients."""
    from kswap.estimate.state import state_bytes

    state = state_bytes(model)
    return state.weight_bytes + state.gradient_bytes
