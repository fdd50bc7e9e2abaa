"""``kswap.plan``: what to swap, recompute or keep, planned before anything runs.

:func:`plan` estimates one training step of a Keras model from its shapes
(:func:`~kswap.estimate.estimate_workload`) on a device preset and plans it
under a memory budget with :func:`kswap.planning.make_plan`.
:func:`static_plan` returns the workload and the device beside the plan, for
reports (the command line's ``kswap plan``).

Example:
    >>> import keras, kswap
    >>> layers = [keras.Input((256,))]
    >>> for i in range(4):
    ...     layers += [keras.layers.Dense(512, name=f"d{i}"), keras.layers.ReLU(name=f"r{i}")]
    >>> model = keras.Sequential(layers + [keras.layers.Dense(10, name="out")])
    >>> model.compile("adam", "mse")
    >>> p = kswap.plan(model, batch_size=2048, budget=0.8, device="k40", link="pcie3")
    >>> p.fits, p.baseline_peak_bytes > p.budget_bytes >= p.predicted_peak_bytes
    (True, True)
    >>> p.counts()["keep"] < len(p.blocks)      # something is swapped or recomputed
    True
    >>> kswap.plan(model, batch_size=2048, budget=0, device="k40")
    Traceback (most recent call last):
    ValueError: `budget` must be in (0, 1] or a byte count. Received: budget=0
    >>> kswap.plan(model, batch_size=2048, budget="1MiB", device="k40")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: No plan meets budget='1MiB' (1 MiB). The smallest feasible budget is ...
"""

from __future__ import annotations

import dataclasses
from typing import Any

import keras

from kswap.estimate.workload import check_batch_size, estimate_workload
from kswap.planning.budget import Budget, parse_budget
from kswap.planning.devices import Device, as_device
from kswap.planning.link import Link, as_link
from kswap.planning.plan import Plan
from kswap.planning.strategies import STRATEGIES, make_plan
from kswap.planning.workload import Workload

__all__ = ["StaticPlan", "check_plan_arguments", "plan", "static_plan"]


@dataclasses.dataclass(frozen=True)
class StaticPlan:
    """A plan with what it was made from.

    Attributes:
        plan: The :class:`~kswap.planning.Plan`.
        workload: The estimated :class:`~kswap.planning.Workload`.
        device: The device preset the times and the capacity are of.
    """

    plan: Plan
    workload: Workload
    device: Device

    @property
    def baseline_fits_device(self) -> bool | None:
        """Whether the baseline's estimated peak fits the device's memory (None if unknown)."""
        if self.device.memory_bytes is None:
            return None
        return self.plan.baseline_peak_bytes <= self.device.memory_bytes

    def to_dict(self) -> dict[str, Any]:
        """The plan's JSON fields, plus the device, its memory and the per-block bytes."""
        out = self.plan.to_dict()
        out["device"] = self.device.name
        out["device_memory_bytes"] = self.device.memory_bytes
        out["baseline_fits_device"] = self.baseline_fits_device
        out["fits"] = self.plan.fits
        out["slowdown"] = self.plan.slowdown
        out["batch_size"] = self.workload.metadata.get("batch_size")
        out["persistent_bytes"] = {
            "weights": self.workload.weight_bytes,
            "gradients": self.workload.gradient_bytes,
            "optimizer": self.workload.optimizer_bytes,
            "other": self.workload.other_bytes,
        }
        out["saved_bytes"] = [b.saved_bytes for b in self.workload.blocks]
        out["kinds"] = [b.kind for b in self.workload.blocks]
        return out


def check_plan_arguments(
    budget: Any, link: Any, device: Any, strategy: Any
) -> tuple[Budget, Link, Device]:
    """Checks :func:`plan`'s arguments that need no model; ValueError naming the bad one.

    A budget of None means the device's memory, which the ``cpu`` preset does not know.
    """
    device = as_device(device)
    link = as_link(device.link if link is None else link)
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        known = ", ".join(repr(s) for s in STRATEGIES)
        raise ValueError(
            f"Unknown `strategy`. Expected one of {known}. Received: strategy={strategy!r}"
        )
    if budget is None:
        if device.memory_bytes is None:
            raise ValueError(
                f"`budget` is needed: device {device.name!r} has no known memory capacity. "
                "Received: budget=None"
            )
        return Budget(bytes=device.memory_bytes), link, device
    return parse_budget(budget), link, device


def static_plan(
    model: keras.Model,
    batch_size: int,
    budget: Budget | float | int | str | None = None,
    *,
    link: Link | str | None = None,
    device: Device | str = "cpu",
    strategy: str = "auto",
    optimizer: Any = None,
    input_shape: Any = None,
) -> StaticPlan:
    """:func:`plan`, returning the workload and the device with the plan."""
    batch_size = check_batch_size(batch_size)
    parsed, link, device = check_plan_arguments(budget, link, device, strategy)
    work = estimate_workload(
        model, batch_size, device=device, optimizer=optimizer, input_shape=input_shape
    )
    shown = parsed if budget is None else budget
    try:
        made = make_plan(work, parsed, link, strategy=strategy)
    except ValueError as error:
        if budget is None or isinstance(budget, Budget):
            raise
        # make_plan names the parsed budget; name the one the user wrote
        raise ValueError(str(error).replace(f"budget={parsed}", f"budget={shown!r}")) from None
    return StaticPlan(made, work, device)


def plan(
    model: keras.Model,
    batch_size: int,
    budget: Budget | float | int | str | None = None,
    *,
    link: Link | str | None = None,
    device: Device | str = "cpu",
    strategy: str = "auto",
    optimizer: Any = None,
    input_shape: Any = None,
) -> Plan:
    """Plans training ``model`` at ``batch_size`` within ``budget``, statically.

    The step is estimated from the model's shapes on ``device`` (nothing runs;
    see :func:`~kswap.estimate.estimate_workload`) and planned by
    ``strategy``. The plan records the estimated baseline (everything kept on
    the device) beside its own predicted peak and step time.

    Args:
        model: A built Sequential or functional Keras model.
        batch_size: Samples per step.
        budget: Device memory to plan for: a fraction in (0, 1] of the
            baseline's estimated peak, a byte count, or text (``"12GiB"``,
            ``"50%"``). Default: the device's memory.
        link: The host link: a :class:`~kswap.planning.Link` or a preset's
            name (``"pcie3"``, ``"pcie4"``, ``"pcie5"``, ``"nvlink-c2c"``,
            ``"cpu"``). Default: the device's.
        device: A :class:`~kswap.planning.Device` or a preset's name
            (``"k40"``, ``"v100"``, ``"a100"``, ``"h100"``, ``"h200"``, ``"cpu"``).
        strategy: One of :data:`kswap.planning.STRATEGIES`; ``"auto"`` takes
            the fastest plan that meets the budget.
        optimizer: The optimizer whose slots to count (a name or an object);
            default: the model's compiled one.
        input_shape: Shapes for model inputs with unknown dimensions.

    Returns:
        The :class:`~kswap.planning.Plan`.

    Raises:
        ValueError: naming the argument and the value received: a budget
            <= 0, a fraction > 1 or text that is no budget; a budget below
            the smallest feasible one (which the message states); an unknown
            strategy, link or device; a bad batch size or optimizer.
    """
    return static_plan(
        model,
        batch_size,
        budget,
        link=link,
        device=device,
        strategy=strategy,
        optimizer=optimizer,
        input_shape=input_shape,
    ).plan
