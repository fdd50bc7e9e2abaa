"""The plan: what to do with each block, and what the simulator predicts of it.

A :class:`Plan` records one action per block, the optimizer state's tier,
the predicted device peak and step time beside the baseline's (everything
kept), and what it was made from: the strategy, the budget, the link and the
workload's fingerprint. It is frozen and saves as validated JSON.

Example:
    >>> from kswap.planning import Block, Link, Plan, Workload
    >>> w = Workload((Block("a", 100, 1.0, 2.0), Block("b", 100, 1.0, 2.0),
    ...               Block("c", 100, 1.0, 2.0)), weight_bytes=50)
    >>> plan = Plan.evaluate(w, ["swap", "keep", "keep"], Link(100.0, 100.0))
    >>> plan.baseline_peak_bytes, plan.predicted_peak_bytes, plan.predicted_step_seconds
    (350, 250, 9.0)
    >>> print(plan.table(w))
    block  kind   saved bytes  action
    a      other          100  swap
    b      other          100  keep
    c      other          100  keep
    >>> Plan.from_json(plan.to_json()) == plan
    True
    >>> Plan.from_json('{"format": "kswap.plan/1"}')
    Traceback (most recent call last):
    ValueError: Not a valid kswap plan: missing field(s) blocks, actions, link, ...
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from kswap.planning._checks import as_bytes, as_seconds, load_json, require
from kswap.planning._engine import Engine, code_of
from kswap.planning.actions import Action, as_action
from kswap.planning.link import Link, as_link
from kswap.planning.simulate import resolve_actions
from kswap.planning.workload import TIERS, Workload

__all__ = ["Plan"]

_FORMAT = "kswap.plan/1"
_REQUIRED = (
    "blocks",
    "actions",
    "link",
    "predicted_peak_bytes",
    "predicted_step_seconds",
    "baseline_peak_bytes",
    "baseline_step_seconds",
    "workload_fingerprint",
)


@dataclasses.dataclass(frozen=True)
class Plan:
    """Per-block actions and their predicted cost.

    Attributes:
        blocks: The blocks' names, in forward order.
        actions: One :class:`Action` per block.
        link: The link the prediction assumed.
        predicted_peak_bytes: Simulated device peak under the plan.
        predicted_step_seconds: Simulated step time under the plan.
        baseline_peak_bytes: Simulated device peak with every block kept and
            the optimizer's slots on the device.
        baseline_step_seconds: Simulated step time of that baseline.
        workload_fingerprint: :meth:`Workload.fingerprint` of the workload.
        optimizer_state: Where the optimizer's slots are: ``"device"`` or ``"host"``.
        strategy: The strategy that made the plan (``"manual"`` if none).
        budget_bytes: The device budget it was made for, if any.
        swapped_bytes: Bytes the plan sends to the host and back per step.
        recomputed_bytes: Saved bytes the plan recomputes instead of keeping.
        workload_name: The workload's name.
    """

    blocks: tuple[str, ...]
    actions: tuple[Action, ...]
    link: Link
    predicted_peak_bytes: int
    predicted_step_seconds: float
    baseline_peak_bytes: int
    baseline_step_seconds: float
    workload_fingerprint: str
    optimizer_state: str = "device"
    strategy: str = "manual"
    budget_bytes: int | None = None
    swapped_bytes: int = 0
    recomputed_bytes: int = 0
    workload_name: str = ""

    def __post_init__(self) -> None:
        blocks, actions = tuple(self.blocks), tuple(self.actions)
        if not all(isinstance(b, str) for b in blocks):
            raise ValueError("`blocks` must be block names (strings).")
        actions = tuple(as_action(a) for a in actions)
        if len(actions) != len(blocks):
            raise ValueError(
                f"`actions` must hold one action per block ({len(blocks)}). "
                f"Received: {len(actions)}"
            )
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "actions", actions)
        if not isinstance(self.link, Link):
            raise ValueError(f"`link` must be a Link. Received: link={self.link!r}")
        for name in ("predicted_peak_bytes", "baseline_peak_bytes", "swapped_bytes"):
            object.__setattr__(self, name, as_bytes(name, getattr(self, name)))
        object.__setattr__(
            self, "recomputed_bytes", as_bytes("recomputed_bytes", self.recomputed_bytes)
        )
        for name in ("predicted_step_seconds", "baseline_step_seconds"):
            object.__setattr__(self, name, as_seconds(name, getattr(self, name)))
        if self.budget_bytes is not None:
            object.__setattr__(self, "budget_bytes", as_bytes("budget_bytes", self.budget_bytes))
        if self.optimizer_state not in TIERS:
            raise ValueError(
                f"`optimizer_state` must be one of {TIERS}. "
                f"Received: optimizer_state={self.optimizer_state!r}"
            )
        for name in ("workload_fingerprint", "strategy", "workload_name"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"`{name}` must be a string. Received: {getattr(self, name)!r}")

    @classmethod
    def evaluate(
        cls,
        workload: Workload,
        actions: Any,
        link: Link | str,
        *,
        optimizer_state: str = "device",
        strategy: str = "manual",
        budget_bytes: int | None = None,
        engine: Engine | None = None,
    ) -> Plan:
        """Simulates ``actions`` (any form :func:`~kswap.planning.simulate` accepts) into a plan."""
        link = as_link(link)
        actions = resolve_actions(workload, actions)
        if optimizer_state not in TIERS:
            raise ValueError(
                f"`optimizer_state` must be one of {TIERS}. "
                f"Received: optimizer_state={optimizer_state!r}"
            )
        if optimizer_state == "host" and not workload.optimizer_movable:
            raise ValueError(
                "`optimizer_state='host'` needs a workload whose optimizer state can "
                "move (a tf.distribute strategy holds it). Received: "
                "optimizer_state='host' for a workload with optimizer_movable=False"
            )
        engine = engine or Engine(workload, link)
        baseline = engine.run([(0, 1)] * len(actions))
        run = engine.run([code_of(a) for a in actions], optimizer_state == "host")
        swapped = recomputed = 0
        for b, a in zip(workload.blocks, actions, strict=True):
            if a.kind == "swap":
                swapped += b.saved_bytes
            elif a.kind == "recompute":
                recomputed += b.saved_bytes
                swapped += b.input_bytes if a.checkpoint == "host" else 0
        if optimizer_state == "host":
            swapped += workload.optimizer_bytes
        return cls(
            blocks=workload.names,
            actions=actions,
            link=link,
            predicted_peak_bytes=run.peak_bytes,
            predicted_step_seconds=run.step_seconds,
            baseline_peak_bytes=baseline.peak_bytes,
            baseline_step_seconds=baseline.step_seconds,
            workload_fingerprint=workload.fingerprint(),
            optimizer_state=optimizer_state,
            strategy=strategy,
            budget_bytes=budget_bytes,
            swapped_bytes=swapped,
            recomputed_bytes=recomputed,
            workload_name=workload.name,
        )

    @property
    def fits(self) -> bool:
        """Whether the predicted peak is within the budget (True without one)."""
        return self.budget_bytes is None or self.predicted_peak_bytes <= self.budget_bytes

    @property
    def slowdown(self) -> float:
        """Predicted step time over the baseline's (1.0: no slower)."""
        base = self.baseline_step_seconds
        return self.predicted_step_seconds / base if base > 0 else 1.0

    @property
    def saving(self) -> float:
        """Fraction of the baseline's peak the plan saves."""
        base = self.baseline_peak_bytes
        return 1.0 - self.predicted_peak_bytes / base if base > 0 else 0.0

    def counts(self) -> dict[str, int]:
        """How many blocks each kind of action has."""
        out = {"keep": 0, "swap": 0, "recompute": 0}
        for a in self.actions:
            out[a.kind] += 1
        return out

    def action(self, block: str) -> Action:
        """The action of the block named ``block``."""
        if block not in self.blocks:
            raise ValueError(f"The plan has no block named {block!r}.")
        return self.actions[self.blocks.index(block)]

    def check(self, workload: Workload) -> None:
        """Raises ValueError unless the plan was made for ``workload``."""
        if workload.fingerprint() != self.workload_fingerprint:
            raise ValueError(
                "The plan was made for another workload (fingerprint "
                f"{self.workload_fingerprint}). Received: a workload with fingerprint "
                f"{workload.fingerprint()}"
            )

    def table(self, workload: Workload | None = None) -> str:
        """A text table of the blocks and their actions (with bytes, given the workload)."""
        rows = [("block", "kind", "saved bytes", "action")]
        blocks = workload.blocks if workload is not None else [None] * len(self.blocks)
        for name, block, action in zip(self.blocks, blocks, self.actions, strict=True):
            kind = block.kind if block is not None else ""
            size = f"{block.saved_bytes:,}" if block is not None else ""
            rows.append((name, kind, size, str(action)))
        widths = [max(len(r[c]) for r in rows) for c in range(4)]
        lines = [
            f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}" for r in rows
        ]
        return "\n".join(line.rstrip() for line in lines)

    # --- serialization -----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-ready dict (actions in their short form)."""
        out: dict[str, Any] = {"format": _FORMAT}
        for f in dataclasses.fields(self):
            out[f.name] = getattr(self, f.name)
        out["blocks"] = list(self.blocks)
        out["actions"] = [str(a) for a in self.actions]
        out["link"] = self.link.to_dict()
        return out

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The plan as JSON text; also written to ``path`` if given."""
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    @classmethod
    def from_json(cls, source: str | os.PathLike | Mapping) -> Plan:
        """Loads a plan from JSON text, a JSON file's path or a parsed dict.

        Raises:
            ValueError: (one line) if it is not JSON, not a kswap plan, lacks a
                field or holds a value out of range.
        """
        payload = load_json(source, "kswap plan", _FORMAT)
        require(payload, _REQUIRED, "kswap plan")
        known = {f.name for f in dataclasses.fields(cls)}
        args = {k: v for k, v in payload.items() if k in known}
        for name in ("blocks", "actions"):
            if not isinstance(args[name], list):
                raise ValueError(f"Not a valid kswap plan: `{name}` must be a list.")
        args["link"] = Link.from_dict(args["link"])
        try:
            return cls(**args)
        except TypeError as error:  # a value of the wrong type deep inside
            raise ValueError(f"Not a valid kswap plan: {error}") from None
