"""Per-block actions: keep, swap (with a prefetch distance) or recompute.

- ``keep``: the tensors the block's backward reads stay on the device from
  its forward to its backward.
- ``swap``: they are copied to the host after its forward (the device copy is
  freed when the copy ends) and back before its backward; the copy back
  starts when the backward of the block ``prefetch`` places later in forward
  order starts (``prefetch=0``: when the backward just before its own ends).
- ``recompute``: only the block's inputs are kept (``checkpoint="device"``) or
  swapped (``checkpoint="host"``, brought back with ``prefetch``); its forward
  is run again just before its backward.

Actions have a short text form used in plans' JSON and on command lines:
``keep``, ``swap`` (prefetch 1), ``swap:0``, ``recompute``, ``recompute:host``
(prefetch 1), ``recompute:host:2``.

Example:
    >>> from kswap.planning import Action
    >>> Action.parse("swap:0")
    Action(kind='swap', prefetch=0, checkpoint='device')
    >>> str(Action("recompute", checkpoint="host"))
    'recompute:host'
    >>> Action.parse("offload")
    Traceback (most recent call last):
    ValueError: `action` must be 'keep', 'swap[:PREFETCH]' or 'recompute[:host[:PREFETCH]]'. \
Received: action='offload'
"""

from __future__ import annotations

import dataclasses
import numbers

__all__ = ["Action", "KINDS", "KEEP", "SWAP", "RECOMPUTE", "as_action"]

#: The kinds of action.
KINDS = ("keep", "swap", "recompute")
_FORMS = "'keep', 'swap[:PREFETCH]' or 'recompute[:host[:PREFETCH]]'"


@dataclasses.dataclass(frozen=True)
class Action:
    """What happens to one block's saved tensors between forward and backward.

    Attributes:
        kind: ``"keep"``, ``"swap"`` or ``"recompute"``.
        prefetch: For a swap (or a recompute whose inputs are on the host):
            how many blocks ahead the copy back starts; an integer >= 0.
        checkpoint: For a recompute: where its inputs wait, ``"device"`` or
            ``"host"``.

    Fields that do not apply to the kind are set to their defaults, so equal
    actions compare equal.
    """

    kind: str = "keep"
    prefetch: int = 1
    checkpoint: str = "device"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}. Received: kind={self.kind!r}")
        p = self.prefetch
        if isinstance(p, bool) or not isinstance(p, numbers.Integral) or p < 0:
            raise ValueError(f"`prefetch` must be an integer >= 0. Received: prefetch={p!r}")
        object.__setattr__(self, "prefetch", int(p))
        if self.checkpoint not in ("device", "host"):
            raise ValueError(
                f"`checkpoint` must be 'device' or 'host'. Received: checkpoint={self.checkpoint!r}"
            )
        if self.kind == "keep" or (self.kind == "recompute" and self.checkpoint == "device"):
            object.__setattr__(self, "prefetch", 1)
        if self.kind != "recompute":
            object.__setattr__(self, "checkpoint", "device")

    @property
    def copies(self) -> bool:
        """Whether the action moves bytes over the link (a swap, or host checkpoints)."""
        return self.kind == "swap" or (self.kind == "recompute" and self.checkpoint == "host")

    def __str__(self) -> str:
        if self.kind == "keep":
            return "keep"
        if self.kind == "swap":
            return "swap" if self.prefetch == 1 else f"swap:{self.prefetch}"
        if self.checkpoint == "device":
            return "recompute"
        return "recompute:host" if self.prefetch == 1 else f"recompute:host:{self.prefetch}"

    @classmethod
    def parse(cls, text: str) -> Action:
        """The action of a short form such as ``"swap:0"`` (see the module doc)."""
        if not isinstance(text, str):
            raise ValueError(f"`action` must be {_FORMS}. Received: action={text!r}")
        parts = text.strip().split(":")
        last = parts[-1]
        prefetch = int(last) if last.isdigit() else None
        if parts == ["keep"]:
            return cls("keep")
        if parts == ["swap"] or (len(parts) == 2 and parts[0] == "swap" and prefetch is not None):
            return cls("swap", 1 if prefetch is None else prefetch)
        if parts in (["recompute"], ["recompute", "device"]):
            return cls("recompute")
        if parts == ["recompute", "host"]:
            return cls("recompute", 1, "host")
        if len(parts) == 3 and parts[:2] == ["recompute", "host"] and prefetch is not None:
            return cls("recompute", prefetch, "host")
        raise ValueError(f"`action` must be {_FORMS}. Received: action={text!r}")


KEEP = Action("keep")
SWAP = Action("swap")
RECOMPUTE = Action("recompute")


def as_action(action: Action | str) -> Action:
    """An :class:`Action` from an Action or its short form."""
    return action if isinstance(action, Action) else Action.parse(action)
