"""Offline packing of buffers with known lifetimes into one arena (SmartPool).

A training step makes the same allocations every time, so after profiling
one step every buffer's size and lifetime is known, and each can be given a
fixed offset in a single arena: buffers alive at the same time must not
share addresses, buffers that never coexist may. Finding the smallest arena
is NP-hard; :func:`pack` runs the heuristics of SmartPool and TFLite (greedy
by size with best fit) and improvements on them, and reports how far the
result is from the lower bound (the most bytes alive at one time).

Example:
    >>> plan = pack([Buffer(1024, 0, 2), Buffer(512, 1, 3), Buffer(1024, 2, 4)])
    >>> plan.offsets, plan.arena_bytes, plan.lower_bound_bytes
    ((0, 1024, 0), 1536, 1536)
    >>> plan.overhead
    1.0
    >>> plan.validate()
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kswap.allocator._algorithms import ALGORITHMS
from kswap.allocator._intervals import peak_load
from kswap.allocator._validate import find_conflict

__all__ = ["ALGORITHMS", "Buffer", "PackingPlan", "TraceLike", "pack"]


def _as_int(name: str, value: Any) -> int:
    """``value`` as an int; ValueError naming ``name`` if it is not an integer."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"`{name}` must be an integer. Received: {name}={value!r} "
            f"(of type {type(value).__name__})"
        )
    return int(value)


@dataclasses.dataclass(frozen=True, slots=True)
class Buffer:
    """One buffer: its size and its lifetime.

    Attributes:
        size: Bytes (a non-negative integer; numpy integers are accepted).
        start: Time it is allocated (an integer, e.g. an op index or ns).
        end: Time it is freed: the buffer is alive during ``[start, end)``.

    Example:
        >>> Buffer(1024, 0, 2)
        Buffer(size=1024, start=0, end=2)
        >>> Buffer(1024, 5, 3)
        Traceback (most recent call last):
        ValueError: `end` must be greater than `start`. Received: start=5, end=3
    """

    size: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if not (type(self.size) is type(self.start) is type(self.end) is int):
            for name in ("size", "start", "end"):
                object.__setattr__(self, name, _as_int(name, getattr(self, name)))
        if self.size < 0:
            raise ValueError(f"`size` must be non-negative. Received: size={self.size}")
        if self.end <= self.start:
            raise ValueError(
                f"`end` must be greater than `start`. Received: start={self.start}, end={self.end}"
            )


@dataclasses.dataclass(frozen=True)
class PackingPlan:
    """Offsets of buffers in one arena.

    Attributes:
        buffers: The buffers, in input order.
        offsets: Byte offset of each buffer in the arena.
        algorithm: Name of the algorithm that produced the plan.
        alignment: Every buffer occupies its size rounded up to this, and
            every offset is a multiple of it.
        sources: For a plan of a trace, the index in ``trace.buffers`` of
            each buffer; None when the buffers were given directly.
        arena_bytes: Arena size: the largest ``offset + aligned size``.
        lower_bound_bytes: Most aligned bytes alive at one time; no packing
            needs less.

    Example:
        >>> plan = PackingPlan((Buffer(512, 0, 2), Buffer(512, 1, 3)), (0, 256))
        >>> plan.arena_bytes, plan.lower_bound_bytes
        (768, 1024)
        >>> plan.validate()
        Traceback (most recent call last):
        ValueError: Buffers 0 and 1 are both alive during [1, 2) and overlap in memory: ...
    """

    buffers: tuple[Buffer, ...]
    offsets: tuple[int, ...]
    algorithm: str = "manual"
    alignment: int = 256
    sources: tuple[int, ...] | None = None
    arena_bytes: int = dataclasses.field(init=False)
    lower_bound_bytes: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffers", tuple(self.buffers))
        for i, b in enumerate(self.buffers):
            if not isinstance(b, Buffer):
                raise ValueError(
                    f"`buffers` must hold Buffer objects. Received: item {i} of type "
                    f"{type(b).__name__}"
                )
        offsets = tuple(self.offsets)
        if not all(type(o) is int for o in offsets):
            offsets = tuple(_as_int(f"offsets[{i}]", o) for i, o in enumerate(offsets))
        object.__setattr__(self, "offsets", offsets)
        if len(self.offsets) != len(self.buffers):
            raise ValueError(
                "`offsets` must have one entry per buffer. "
                f"Received: {len(self.offsets)} offsets for {len(self.buffers)} buffers"
            )
        _check_alignment(self.alignment)
        sizes, starts, ends = _arrays(self.buffers)
        aligned = _align(sizes, self.alignment)
        offsets = np.array(self.offsets, dtype=np.int64)
        arena = int((offsets + aligned).max(initial=0)) if aligned.size else 0
        object.__setattr__(self, "arena_bytes", arena)
        object.__setattr__(self, "lower_bound_bytes", peak_load(aligned, starts, ends))

    @property
    def overhead(self) -> float:
        """``arena_bytes / lower_bound_bytes``: 1.0 is optimal (and for no bytes)."""
        if self.lower_bound_bytes == 0:
            return 1.0
        return self.arena_bytes / self.lower_bound_bytes

    @property
    def efficiency(self) -> float:
        """``lower_bound_bytes / arena_bytes``, in ``(0, 1]``; 1.0 is optimal."""
        if self.arena_bytes == 0:
            return 1.0
        return self.lower_bound_bytes / self.arena_bytes

    def validate(self) -> None:
        """Checks the plan.

        Raises:
            ValueError: If an offset is negative or not a multiple of the
                alignment, or if two buffers alive at the same time overlap
                in memory (sizes rounded up to the alignment).
        """
        offsets = np.array(self.offsets, dtype=np.int64)
        misplaced = np.flatnonzero((offsets < 0) | (offsets % self.alignment != 0))
        if misplaced.size:
            i = int(misplaced[0])
            raise ValueError(
                f"Offset of buffer {i} must be a non-negative multiple of "
                f"{self.alignment}. Received: offsets[{i}]={self.offsets[i]}"
            )
        sizes, starts, ends = _arrays(self.buffers)
        aligned = _align(sizes, self.alignment)
        conflict = find_conflict(aligned, starts, ends, offsets)
        if conflict is not None:
            i, j = conflict
            a, b = self.buffers[i], self.buffers[j]
            raise ValueError(
                f"Buffers {i} and {j} are both alive during "
                f"[{max(a.start, b.start)}, {min(a.end, b.end)}) and overlap in memory: "
                f"[{offsets[i]}, {offsets[i] + aligned[i]}) and "
                f"[{offsets[j]}, {offsets[j] + aligned[j]})."
            )


@runtime_checkable
class TraceLike(Protocol):
    """What :func:`pack` needs of a trace (e.g. :class:`kswap.trace.Trace`).

    ``buffers`` items have ``size``, ``start_ns``, ``end_ns`` and ``tier``;
    ``steps`` (optional) holds ``(start_ns, end_ns)`` step windows.
    """

    buffers: Sequence[Any]


#: What :func:`pack` accepts as buffers.
BufferSpec = Sequence[Buffer] | Sequence[tuple[int, int, int]] | TraceLike


def pack(buffers: BufferSpec, *, algorithm: str = "best", alignment: int = 256) -> PackingPlan:
    """Gives every buffer an offset in one arena.

    Args:
        buffers: :class:`Buffer` objects, or ``(size, start, end)`` tuples
            (not both), or a trace: an object with a ``buffers`` attribute
            whose items have ``size``, ``start_ns``, ``end_ns`` and ``tier``.
            Of a trace only ``"device"`` buffers are packed, and when it has
            a non-empty ``steps`` attribute (``(start_ns, end_ns)`` windows),
            only the last step: buffers alive in that window, clipped to it
            (those left with no lifetime are dropped).
        algorithm: One of :data:`ALGORITHMS`. ``"best"`` runs the others,
            as much of them as a work budget decided from the instance (its
            numbers of buffers and of overlapping lifetimes) pays for, and
            keeps the smallest arena: about a second or two for a real
            training step or 100,000 buffers. Every algorithm is
            deterministic: the same buffers always give the same plan,
            whatever the machine's speed or load. They are described in
            :mod:`kswap.allocator._algorithms`.
        alignment: Sizes are rounded up to, and offsets are multiples of,
            this power of two.

    Returns:
        The plan. No buffers give an empty plan: ``offsets == ()`` and
        ``arena_bytes == lower_bound_bytes == 0``.

    Raises:
        ValueError: For an unknown algorithm, an alignment that is not a
            positive power of two, or invalid or mixed buffers.

    Example:
        >>> plan = pack([(1024, 0, 2), (512, 1, 3)], algorithm="greedy_size")
        >>> plan.offsets, plan.arena_bytes
        ((0, 1024), 1536)
        >>> pack([]).offsets
        ()
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(
            f"`algorithm` must be one of {sorted(ALGORITHMS)}. Received: algorithm={algorithm!r}"
        )
    _check_alignment(alignment)
    alignment = int(alignment)
    items, sources = _normalize(buffers)
    sizes, starts, ends = _arrays(items)
    units = _align(sizes, alignment) // alignment
    offsets = ALGORITHMS[algorithm](units, starts, ends) * alignment
    return PackingPlan(
        buffers=items,
        offsets=tuple(offsets.tolist()),
        algorithm=algorithm,
        alignment=alignment,
        sources=sources,
    )


def _check_alignment(alignment: Any) -> None:
    ok = isinstance(alignment, numbers.Integral) and not isinstance(alignment, (bool, np.bool_))
    if not ok or alignment <= 0 or int(alignment) & (int(alignment) - 1):
        raise ValueError(
            f"`alignment` must be a positive power of two. Received: alignment={alignment!r}"
        )


def _align(sizes: np.ndarray, alignment: int) -> np.ndarray:
    return -(-sizes // alignment) * alignment


def _arrays(items: Sequence[Buffer]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(items)
    return (
        np.fromiter((b.size for b in items), np.int64, n),
        np.fromiter((b.start for b in items), np.int64, n),
        np.fromiter((b.end for b in items), np.int64, n),
    )


def _normalize(buffers: Any) -> tuple[tuple[Buffer, ...], tuple[int, ...] | None]:
    """The buffers as a tuple of :class:`Buffer`, and their trace indices."""
    if not isinstance(buffers, (Sequence, np.ndarray)) and hasattr(buffers, "buffers"):
        return _from_trace(buffers)
    if isinstance(buffers, (str, bytes)) or not isinstance(buffers, Sequence):
        raise ValueError(
            "`buffers` must be a sequence of Buffer or of (size, start, end) tuples, "
            f"or a trace. Received: {type(buffers).__name__}"
        )
    first = None
    for i, item in enumerate(buffers):
        if isinstance(item, Buffer):
            kind = "Buffer"
        elif isinstance(item, (tuple, list)):
            kind = "tuple"
        else:
            raise ValueError(
                "`buffers` items must be Buffer objects or (size, start, end) tuples. "
                f"Received: item {i} of type {type(item).__name__}"
            )
        if first is None:
            first = kind
        elif kind != first:
            raise ValueError(
                f"`buffers` must not mix Buffer objects and tuples. Received: item {i} "
                f"of type {type(item).__name__} after items of type {first}"
            )
        if kind == "tuple" and len(item) != 3:
            raise ValueError(
                f"`buffers` tuples must be (size, start, end). Received: item {i} = {item!r}"
            )
    if first != "tuple":
        return tuple(buffers), None
    out = []
    for i, item in enumerate(buffers):
        try:
            out.append(Buffer(*item))
        except ValueError as error:
            raise ValueError(f"`buffers` item {i}: {error}") from None
    return tuple(out), None


def _from_trace(trace: Any) -> tuple[tuple[Buffer, ...], tuple[int, ...]]:
    """Device buffers of a trace (of its last step, clipped, if it has steps).

    A buffer's size is what its op requested (``requested_bytes``) where the
    trace records it, not the allocator's rounded block: the plan measures what
    the step needs, and the allocator's rounding shows up as the difference.
    """
    steps = tuple(getattr(trace, "steps", None) or ())
    window = (int(steps[-1][0]), int(steps[-1][1])) if steps else None
    items, sources = [], []
    for i, b in enumerate(trace.buffers):
        if b.tier != "device":
            continue
        start, end = b.start_ns, b.end_ns
        if window is not None:
            if not (start < window[1] and end > window[0]):
                continue
            start, end = max(start, window[0]), min(end, window[1])
        if end == start:
            continue
        size = getattr(b, "requested_bytes", None)
        items.append(Buffer(b.size if size is None else size, start, end))
        sources.append(i)
    return tuple(items), tuple(sources)
