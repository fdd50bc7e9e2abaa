"""The trace model: buffer lifetimes of profiled training steps.

A :class:`Trace` is what :func:`kswap.profile` returns: one :class:`Allocation`
per buffer the allocators handed out (plus the bytes that were already in use
when profiling began), with its size, lifetime, producing op, Keras layer,
memory tier and training step, and one :class:`OpInterval` per op execution
(when it ran, on which thread or stream, its layer and phase). Those records
and the constants are defined in :mod:`kswap.trace.records` (and importable
from here), the JSON format in :mod:`kswap.trace.serialize`; see
:mod:`kswap.trace.optime` for the time summaries. Everything here is plain
Python, free of any framework, so traces can be saved, loaded, compared and
planned on anywhere.

Example:
    >>> from kswap.trace import Allocation, Trace
    >>> trace = Trace(buffers=(
    ...     Allocation(size=1024, start_ns=0, end_ns=10, tier="device", layer="conv"),
    ...     Allocation(size=512, start_ns=5, end_ns=20, tier="device", layer="dense"),
    ... ), steps=((0, 20),), duration_ns=20)
    >>> trace.peak_bytes()
    1536
    >>> trace.by_layer()
    {'conv': 1024, 'dense': 512}
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from kswap.trace import serialize
from kswap.trace.records import (
    GRANULE,
    PHASES,
    RESIDENT,
    TIERS,
    UNATTRIBUTED,
    UNKNOWN_PHASE,
    Allocation,
    OpInterval,
    Timeline,
    granule_bytes,
)

__all__ = [
    "Allocation",
    "OpInterval",
    "Timeline",
    "Trace",
    "GRANULE",
    "TIERS",
    "PHASES",
    "RESIDENT",
    "UNATTRIBUTED",
    "UNKNOWN_PHASE",
]


@dataclasses.dataclass(frozen=True)
class Trace:
    """Buffer lifetimes of one profiling session.

    Attributes:
        buffers: One :class:`Allocation` per buffer, sorted by start time.
        steps: ``(start_ns, end_ns)`` of each profiled training step.
        duration_ns: Length of the trace.
        emulated: True when the device tier was emulated on a machine without
            a GPU (device = ``CPU:0``, host = kswap's transfer buffers).
        metadata: Free-form facts about the run (model, batch size, versions).
        ops: One :class:`OpInterval` per op execution, sorted by start time
            (on a GPU its kernels and copies; without one, the host's ops).
    """

    buffers: tuple[Allocation, ...]
    steps: tuple[tuple[int, int], ...] = ()
    duration_ns: int = 0
    emulated: bool = False
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    ops: tuple[OpInterval, ...] = ()

    def op_time_by_layer(
        self, phase: str | None = None, *, step: int | None = None, overlap: str = "share"
    ) -> dict[str, int]:
        """Op time (ns) per layer, largest first; see :func:`kswap.trace.optime.time_by_layer`.

        Example:
            >>> trace = Trace(buffers=(), ops=(
            ...     OpInterval("m/d/MatMul", "MatMul", 0, 10, layer="d", phase="forward"),
            ...     OpInterval("gradient_tape/m/d/MatMul", "MatMul", 10, 30, layer="d",
            ...                phase="backward"),
            ... ))
            >>> trace.op_time_by_layer(), trace.op_time_by_layer("backward")
            ({'d': 30}, {'d': 20})
        """
        from kswap.trace.optime import time_by_layer

        return time_by_layer(self, phase, step=step, overlap=overlap)

    def op_time_by_layer_phase(
        self, *, step: int | None = None, overlap: str = "share"
    ) -> dict[str, dict[str, int]]:
        """Op time (ns) per layer and phase; see :func:`kswap.trace.optime.time_by_layer_phase`."""
        from kswap.trace.optime import time_by_layer_phase

        return time_by_layer_phase(self, step=step, overlap=overlap)

    def tier(self, tier: str) -> tuple[Allocation, ...]:
        """The buffers of one tier."""
        _check_tier(tier)
        return tuple(b for b in self.buffers if b.tier == tier)

    def timeline(
        self, tier: str = "device", step: int | None = None, *, requested: bool = False
    ) -> Timeline:
        """Live bytes of ``tier`` after every allocation and deallocation.

        Args:
            tier: ``"device"`` or ``"host"``.
            step: Only the window of this profiled step (bytes alive when it
                began included), or the whole trace if None.
            requested: Count the bytes each buffer asked for (where recorded),
                rounded up to :data:`GRANULE` as :meth:`tensor_sizes` counts
                them (the planner's workload), instead of the block the
                allocator gave it.
        """
        lo, hi = self._window(step)
        changes: dict[int, int] = {}
        for b in self.tier(tier):
            end = self.duration_ns + 1 if b.alive_at_end else b.end_ns
            size = _bytes(b, requested)
            if end <= lo or b.start_ns > hi or size == 0:
                continue
            s = max(b.start_ns, lo)
            changes[s] = changes.get(s, 0) + size
            if end <= hi:
                changes[end] = changes.get(end, 0) - size
        times, live, total = [], [], 0
        for t in sorted(changes):
            total += changes[t]
            times.append(t)
            live.append(total)
        return Timeline(tuple(times), tuple(live))

    def peak_bytes(
        self, tier: str = "device", step: int | None = None, *, requested: bool = False
    ) -> int:
        """The most bytes in use in ``tier`` at any moment (of ``step``).

        With ``requested=True``, the bytes the tensors asked for (each rounded
        up to :data:`GRANULE`), not the allocator's blocks.
        """
        return self.timeline(tier, step, requested=requested).peak_bytes

    def allocator_extra(self, tier: str = "device", step: int | None = None) -> float:
        """How much higher the allocator's peak was than its tensors' (a fraction of the latter).

        The allocator's blocks (:attr:`Allocation.size`) against the bytes the
        tensors asked for (``requested=True``), each at its own peak; 0.0 for
        a tier with nothing in it. TensorFlow's BFC allocator hands out a free
        block whole, up to twice the request, so this changes from step to
        step with which blocks happened to be free.
        """
        tensors = self.peak_bytes(tier, step, requested=True)
        return self.peak_bytes(tier, step) / tensors - 1 if tensors else 0.0

    def step_peak_bytes(
        self, tier: str = "device", step: int | None = None, *, requested: bool = False
    ) -> int:
        """Largest rise over the bytes in use at a step's start, over all steps.

        This is the part of the peak a step itself adds (activations, gradients,
        temporaries): what offloading can change. Without step markers the
        whole trace counts as one step.

        Args:
            tier: ``"device"`` or ``"host"``.
            step: Only this step's rise (an index into :attr:`steps`); the
                largest of all steps' if None.
            requested: Count the bytes each buffer asked for, as
                :meth:`timeline` does, not the allocator's blocks.
        """
        if step is not None and not 0 <= step < len(self.steps):
            raise ValueError(
                f"`step` must be the index of one of the trace's {len(self.steps)} steps. "
                f"Received: step={step!r}"
            )
        steps = [step] if step is not None else range(len(self.steps)) if self.steps else [None]
        best = 0
        for s in steps:
            lo, _ = self._window(s)
            base = sum(
                _bytes(b, requested)
                for b in self.tier(tier)
                if (b.alive_at_start or b.start_ns < lo) and b.alive_at(lo)
            )
            best = max(best, self.timeline(tier, s, requested=requested).peak_bytes - base)
        return best

    def by_layer(
        self, tier: str = "device", time_ns: int | None = None, *, phase: str | None = None
    ) -> dict[str, int]:
        """Bytes alive at the peak (or at ``time_ns``) per Keras layer, largest first.

        A layer's bytes are those of its forward, of its backward (gradient
        ops, and its recomputation when it is recomputed), and of the copies
        kswap makes of its tensors (host copies and swap-ins). Bytes of no
        layer (the loss, the input pipeline) are under :data:`UNATTRIBUTED`;
        bytes in use before profiling began that could not be attributed
        (among them buffers freed during profiling, whose op the profiler
        did not record) are under :data:`RESIDENT`.

        Args:
            tier: ``"device"`` or ``"host"``.
            time_ns: When to count; the tier's peak if None.
            phase: Count only buffers of this phase (one of :data:`PHASES`);
                the peak stays that of all buffers.
        """
        if phase is not None and phase not in PHASES:
            raise ValueError(f"`phase` must be one of {PHASES}. Received: phase={phase!r}")
        out: dict[str, int] = {}
        for key, phases in self.by_layer_phase(tier, time_ns).items():
            if phase is None:
                out[key] = sum(phases.values())
            elif phase in phases:
                out[key] = phases[phase]
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def by_layer_phase(
        self, tier: str = "device", time_ns: int | None = None
    ) -> dict[str, dict[str, int]]:
        """Bytes alive at the peak (or at ``time_ns``) per layer and phase.

        Keys as in :meth:`by_layer`, largest layer first; each maps the
        phases (:data:`PHASES` order, :data:`UNKNOWN_PHASE` last) present to
        their bytes.

        Example:
            >>> trace = Trace(buffers=(
            ...     Allocation(size=4, start_ns=0, end_ns=9, layer="d", phase="forward"),
            ...     Allocation(size=2, start_ns=1, end_ns=9, layer="d", phase="transfer"),
            ... ), duration_ns=9)
            >>> trace.by_layer_phase()
            {'d': {'forward': 4, 'transfer': 2}}
        """
        if time_ns is None:
            time_ns = self.timeline(tier).peak_time_ns
            if time_ns is None:
                return {}
        out: dict[str, dict[str, int]] = {}
        for b in self.tier(tier):
            if b.alive_at(time_ns):
                phases = out.setdefault(_layer_key(b), {})
                phase = b.phase or UNKNOWN_PHASE
                phases[phase] = phases.get(phase, 0) + b.size
        order = {p: i for i, p in enumerate((*PHASES, UNKNOWN_PHASE))}
        rows = sorted(out.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
        return {k: dict(sorted(v.items(), key=lambda pv: order[pv[0]])) for k, v in rows}

    def tensor_sizes(self) -> Trace:
        """This trace with each buffer at the bytes its tensor asked for.

        The allocator gives a tensor a block of at least its request, rounded
        up to :data:`GRANULE`; TensorFlow's BFC allocator hands out a free
        block whole, up to twice the request. That extra depends on which
        blocks happened to be free, so it changes from step to step and from
        run to run. A buffer whose request was not recorded (the bytes
        resident before profiling) keeps its size.
        """
        return dataclasses.replace(
            self,
            buffers=tuple(dataclasses.replace(b, size=_bytes(b, True)) for b in self.buffers),
        )

    def _window(self, step: int | None) -> tuple[int, int]:
        if step is None:
            return 0, self.duration_ns
        if not 0 <= step < len(self.steps):
            raise ValueError(
                f"`step` must be in [0, {len(self.steps)}) for this trace. Received: step={step}"
            )
        return self.steps[step]

    # --- serialization (kswap.trace.serialize) -----------------------------------

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """Serializes the trace to JSON text; also writes it to ``path`` if given."""
        return serialize.to_json(self, path)

    @classmethod
    def from_json(cls, source: str | os.PathLike) -> Trace:
        """Loads a trace from JSON text or from the path of a JSON file.

        Text is taken as a path when it does not start like JSON (``{``,
        ``[`` or ``"``), or when a file of that name exists.

        Raises:
            ValueError: (one line) if there is no such file, or it is not JSON,
                not a kswap trace, lacks a field or holds a value of the wrong
                type or out of range.
            OSError: ``source`` names a file that exists but cannot be read.
        """
        return serialize.from_json(cls, source)


def _bytes(b: Allocation, requested: bool) -> int:
    """The block's size, or with ``requested`` what it asked for (where recorded)."""
    if requested and b.requested_bytes is not None:
        return granule_bytes(b.requested_bytes)
    return b.size


def _layer_key(b: Allocation) -> str:
    """``by_layer`` key of a buffer: its layer, or what it is when it has none."""
    if b.layer:
        return b.layer
    # allocated before profiling (and freed during it): its op is not recorded
    return RESIDENT if b.op == RESIDENT or b.alive_at_start else UNATTRIBUTED


def _check_tier(tier: str) -> None:
    if tier not in TIERS:
        raise ValueError(f"`tier` must be one of {TIERS}. Received: tier={tier!r}")
