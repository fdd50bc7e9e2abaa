"""The workload: what one training step of a model costs, block by block.

A :class:`Workload` is what the planner plans for: the model's blocks (the
layers kswap wraps) in forward order, each with the bytes its backward reads,
its times and its working sets, and the bytes that stay on the device for the
whole step (weights, gradients, optimizer slots). It is built from a profiled
trace or statically from a model and a batch size (by TensorFlow-aware code
elsewhere); here it is plain data, validated, with a JSON form.

Bytes a block's backward reads are counted once: a tensor two blocks read (a
layer's output that the next layer also reads, a residual branch) belongs to
one of them, as kswap's wrappers keep one host copy of it.

Example:
    >>> from kswap.planning import Block, Workload
    >>> w = Workload(
    ...     blocks=(
    ...         Block("conv1", saved_bytes=4_000_000, forward_seconds=0.002,
    ...               backward_seconds=0.004, kind="conv"),
    ...         Block("dense", saved_bytes=1_000_000, forward_seconds=0.001,
    ...               backward_seconds=0.002),
    ...     ),
    ...     weight_bytes=100_000, gradient_bytes=100_000, optimizer_bytes=200_000,
    ... )
    >>> w.saved_bytes, w.persistent_bytes(), w.persistent_bytes("host")
    (5000000, 400000, 200000)
    >>> w.blocks[0].recompute_seconds        # defaults to the forward time
    0.002
    >>> Workload.from_json(w.to_json()) == w
    True
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from kswap.planning._checks import as_bytes, as_seconds, is_positive, load_json, require

__all__ = ["Block", "Workload", "TIERS"]

#: Where the optimizer's slots can live.
TIERS = ("device", "host")

_FORMAT = "kswap.workload/1"
_BLOCK_FIELDS = ("name", "saved_bytes", "forward_seconds", "backward_seconds")


@dataclasses.dataclass(frozen=True)
class Block:
    """One block (a wrapped layer) of the step, in forward order.

    Attributes:
        name: Unique name (the Keras layer's name).
        saved_bytes: Bytes its backward reads: what a swap moves to the host
            and back, and what keeping it holds on the device from its
            forward to its backward.
        forward_seconds: Its forward's compute time.
        backward_seconds: Its backward's compute time.
        recompute_seconds: Time to re-run its forward in backward; defaults
            to ``forward_seconds``.
        input_bytes: Bytes of its inputs that a recompute needs: what a
            recomputed block keeps (or swaps) instead of ``saved_bytes``.
        forward_bytes: Working set of its forward (and of a recompute) beyond
            ``saved_bytes``: temporaries freed when it ends.
        backward_bytes: Working set of its backward as kswap's wrappers run
            it (a swapped or recomputed block): gradients of its inputs and
            outputs, temporaries.
        keep_backward_bytes: The same when the block is kept, and its
            backward runs as without kswap; defaults to ``backward_bytes``.
            On CPU the two differ: kswap runs a block's gradient ops one
            after another, the plain step runs them side by side, each with
            its temporaries (a convolution's im2col buffers).
        shared: ``(block name, bytes)`` pairs: bytes of its saved tensors
            that a later block's backward reads too (a ReLU's output, which
            the next convolution reads for its kernel's gradient). While that
            block is kept, TensorFlow holds them on the device until its
            backward has run, whatever this block's action.
        kind: What the layer is (``"conv"``, ``"dense"``, ``"norm"``...);
            vDNN's ``conv`` policy swaps the blocks of kind ``"conv"``.
        swappable: Whether its saved tensors may go to the host.
        recomputable: Whether its forward may be re-run in backward.
        gradient_bytes: Bytes its backward makes that stay on the device
            until the optimizer's update: its weights' gradients. They are
            counted from its backward on; ``Workload.gradient_bytes`` holds
            the gradients of no block, counted through the whole step.
    """

    name: str
    saved_bytes: int
    forward_seconds: float
    backward_seconds: float
    recompute_seconds: float | None = None
    input_bytes: int = 0
    forward_bytes: int = 0
    backward_bytes: int = 0
    kind: str = "other"
    swappable: bool = True
    recomputable: bool = True
    gradient_bytes: int = 0
    keep_backward_bytes: int | None = None
    shared: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"`name` must be a non-empty string. Received: name={self.name!r}")
        for name in (
            "saved_bytes",
            "input_bytes",
            "forward_bytes",
            "backward_bytes",
            "gradient_bytes",
        ):
            object.__setattr__(self, name, as_bytes(name, getattr(self, name)))
        if self.keep_backward_bytes is None:
            object.__setattr__(self, "keep_backward_bytes", self.backward_bytes)
        else:
            value = as_bytes("keep_backward_bytes", self.keep_backward_bytes)
            object.__setattr__(self, "keep_backward_bytes", value)
        try:
            shared = tuple((str(n), as_bytes("shared", b)) for n, b in self.shared)
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"`shared` must hold (block name, bytes) pairs. Received: shared={self.shared!r}"
            ) from e
        object.__setattr__(self, "shared", shared)
        if self.recompute_seconds is None:
            object.__setattr__(self, "recompute_seconds", self.forward_seconds)
        for name in ("forward_seconds", "backward_seconds", "recompute_seconds"):
            object.__setattr__(self, name, as_seconds(name, getattr(self, name)))
        if not isinstance(self.kind, str):
            raise ValueError(f"`kind` must be a string. Received: kind={self.kind!r}")
        for name in ("swappable", "recomputable"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"`{name}` must be True or False. Received: {name}={getattr(self, name)!r}"
                )


@dataclasses.dataclass(frozen=True)
class Workload:
    """The blocks of one training step and the bytes that stay on the device.

    Attributes:
        blocks: The blocks in forward order (backward runs in reverse).
        weight_bytes: The model's weights.
        gradient_bytes: The weights' gradients (alive at the step's end) that
            no block's ``gradient_bytes`` holds; counted through the whole
            step (conservative: they are made during the backward).
        optimizer_bytes: The optimizer's slots (Adam: twice the weights);
            on the device unless a plan puts them in host memory.
        optimizer_movable: Whether a plan may put the slots in host memory
            (not where a ``tf.distribute`` strategy holds them).
        other_bytes: Any other bytes alive through the step that do not grow
            with the batch: inputs and labels, the loss, library workspace.
        update_seconds: The optimizer update's compute time, after backward.
        name: What the workload is of (a model's name), for reports.
        metadata: Free-form facts: batch size, source (trace or static).
    """

    blocks: tuple[Block, ...]
    weight_bytes: int = 0
    gradient_bytes: int = 0
    optimizer_bytes: int = 0
    other_bytes: int = 0
    update_seconds: float = 0.0
    optimizer_movable: bool = True
    name: str = ""
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        blocks = tuple(self.blocks)
        for i, b in enumerate(blocks):
            if not isinstance(b, Block):
                raise ValueError(
                    f"`blocks` must hold Block objects. Received: item {i} of type "
                    f"{type(b).__name__}"
                )
        seen: set[str] = set()
        for b in blocks:
            if b.name in seen:
                raise ValueError(f"Block names must be unique. Received: {b.name!r} twice")
            seen.add(b.name)
        for b in blocks:
            unknown = [n for n, _ in b.shared if n not in seen or n == b.name]
            if unknown:
                raise ValueError(
                    f"Block {b.name!r} shares its saved bytes with blocks the workload "
                    f"lacks: {unknown[:5]}"
                )
        object.__setattr__(self, "blocks", blocks)
        for name in ("weight_bytes", "gradient_bytes", "optimizer_bytes", "other_bytes"):
            object.__setattr__(self, name, as_bytes(name, getattr(self, name)))
        object.__setattr__(
            self, "update_seconds", as_seconds("update_seconds", self.update_seconds)
        )
        if not isinstance(self.optimizer_movable, bool):
            raise ValueError(
                "`optimizer_movable` must be True or False. "
                f"Received: optimizer_movable={self.optimizer_movable!r}"
            )
        if not isinstance(self.metadata, Mapping):
            raise ValueError(f"`metadata` must be a mapping. Received: metadata={self.metadata!r}")

    def __len__(self) -> int:
        return len(self.blocks)

    @property
    def names(self) -> tuple[str, ...]:
        """The blocks' names in forward order."""
        return tuple(b.name for b in self.blocks)

    @property
    def saved_bytes(self) -> int:
        """Bytes all backwards read together (what keeping everything holds)."""
        return sum(b.saved_bytes for b in self.blocks)

    def persistent_bytes(self, optimizer_state: str = "device") -> int:
        """Bytes on the device for the whole step, with the slots on ``optimizer_state``."""
        if optimizer_state not in TIERS:
            raise ValueError(
                f"`optimizer_state` must be one of {TIERS}. "
                f"Received: optimizer_state={optimizer_state!r}"
            )
        slots = self.optimizer_bytes if optimizer_state == "device" else 0
        return self.weight_bytes + self.gradient_bytes + self.other_bytes + slots

    def scaled_times(self, factor: float) -> Workload:
        """The same workload with every compute time multiplied by ``factor``.

        A profiled step does not take the time the same step takes
        unprofiled (the profiler records every op and allocation; on a CPU
        the unprofiled steps of docs/benchmarks.md took 0.72x to 1.19x the
        profiled one), and a plan's times are only as right as the
        workload's. Scaling by the unprofiled step's time over the profiled
        one's calibrates them (:func:`kswap.profiler.workload.workload_from_trace`
        does, given ``step_seconds``). ``metadata["time_scale"]`` records the
        factor (multiplied by any earlier one), and ``metadata["step_seconds"]``
        and ``metadata["transfer_seconds"]``, if present, are scaled too.

        Raises:
            ValueError: ``factor`` is not a positive finite number.

        Example:
            >>> from kswap.planning import Block, Workload
            >>> w = Workload((Block("a", 100, 0.002, 0.004),), update_seconds=0.001)
            >>> half = w.scaled_times(0.5)
            >>> half.blocks[0].backward_seconds, half.update_seconds, half.metadata["time_scale"]
            (0.002, 0.0005, 0.5)
        """
        if not is_positive(factor):
            raise ValueError(
                f"`factor` must be a positive finite number. Received: factor={factor!r}"
            )
        factor = float(factor)
        blocks = tuple(
            dataclasses.replace(
                b,
                forward_seconds=b.forward_seconds * factor,
                backward_seconds=b.backward_seconds * factor,
                recompute_seconds=b.recompute_seconds * factor,
            )
            for b in self.blocks
        )
        metadata = dict(self.metadata)
        metadata["time_scale"] = float(metadata.get("time_scale", 1.0)) * factor
        for key in ("step_seconds", "transfer_seconds"):
            if isinstance(metadata.get(key), (int, float)):
                metadata[key] = metadata[key] * factor
        return dataclasses.replace(
            self,
            blocks=blocks,
            update_seconds=self.update_seconds * factor,
            metadata=metadata,
        )

    def fingerprint(self) -> str:
        """A short hash of the numbers (not the name or metadata): plans refer to it."""
        content = self._payload()
        content.pop("name")
        content.pop("metadata")
        text = json.dumps(content, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    # --- serialization -----------------------------------------------------------

    def _payload(self) -> dict[str, Any]:
        fields = [f.name for f in dataclasses.fields(Block)]
        # written only where it is not the default: older workloads keep their fingerprint
        fixed = {} if self.optimizer_movable else {"optimizer_movable": False}
        return {
            **fixed,
            "format": _FORMAT,
            "name": self.name,
            "weight_bytes": self.weight_bytes,
            "gradient_bytes": self.gradient_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "other_bytes": self.other_bytes,
            "update_seconds": self.update_seconds,
            "metadata": dict(self.metadata),
            "fields": fields,
            "blocks": [[getattr(b, f) for f in fields] for b in self.blocks],
        }

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The workload as JSON text; also written to ``path`` if given."""
        text = json.dumps(self._payload(), separators=(",", ":"))
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    @classmethod
    def from_json(cls, source: str | os.PathLike | Mapping) -> Workload:
        """Loads a workload from JSON text, a JSON file's path or a parsed dict.

        Raises:
            ValueError: (one line) if it is not JSON, not a kswap workload, lacks
                a field or holds a value out of range.
        """
        payload = load_json(source, "kswap workload", _FORMAT)
        require(payload, ("fields", "blocks"), "kswap workload")
        fields, rows = payload["fields"], payload["blocks"]
        if not isinstance(fields, list) or not isinstance(rows, list):
            raise ValueError("Not a valid kswap workload: `fields` and `blocks` must be lists.")
        missing = [f for f in _BLOCK_FIELDS if f not in fields]
        if missing:
            raise ValueError(f"Not a valid kswap workload: blocks lack {', '.join(missing)}.")
        known = {f.name for f in dataclasses.fields(Block)}
        unknown = [f for f in fields if f not in known]
        if unknown:
            raise ValueError(f"Not a valid kswap workload: unknown block field(s) {unknown}.")
        blocks = []
        for i, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != len(fields):
                raise ValueError(
                    f"Not a valid kswap workload: block {i} must be a list of {len(fields)} values."
                )
            blocks.append(Block(**dict(zip(fields, row, strict=True))))
        top = ("weight_bytes", "gradient_bytes", "optimizer_bytes", "other_bytes")
        return cls(
            blocks=tuple(blocks),
            **{
                k: payload[k]
                for k in (*top, "update_seconds", "optimizer_movable", "name")
                if k in payload
            },
            metadata=payload.get("metadata") or {},
        )
