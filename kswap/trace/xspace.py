"""Reads allocator events and step markers from a profiler ``.xplane.pb`` file.

The TensorFlow profiler writes an ``XSpace`` protocol buffer. kswap needs only a
small part of it: the ``MemoryAllocation`` / ``MemoryDeallocation`` events that
BFC allocators record on the host plane, the step markers kswap places
around each profiled step, and when each op ran (:class:`OpEvent`): on the
host plane, TensorFlow's executor records every op it runs as an event named
``"<op name>:<op type>"`` on the line of the thread that ran it; on a GPU's
plane (``/device:GPU:N``), each kernel or copy is an event on its stream's
line whose ``tf_op`` stat names the op that launched it, in the same form.
This module decodes the protobuf wire format directly, so reading a trace
needs neither TensorFlow nor ``protobuf``, and skips every event it does not
need without decoding it.

Example:
    >>> from kswap.trace.xspace import read_xspace
    >>> space = read_xspace("logs/plugins/profile/run/host.xplane.pb")  # doctest: +SKIP
    >>> space.memory_events[0].allocator                                # doctest: +SKIP
    'GPU_0_bfc'
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct
from collections.abc import Iterator

__all__ = [
    "MemoryEvent",
    "OpEvent",
    "StepMarker",
    "XSpaceEvents",
    "parse_op_label",
    "read_xspace",
    "STEP_MARKER",
]

#: Name of the trace event kswap wraps around every profiled training step.
STEP_MARKER = "kswap_step"

_ALLOC = "MemoryAllocation"
_FREE = "MemoryDeallocation"
_HOST_PLANE = "/host:CPU"
_KERNEL = object()  # marks the events of a GPU plane
_GPU_PLANE = re.compile(r"^/device:GPU:\d+$")
# "<op name>:<op type>": a name without spaces or colons, a type that is an identifier
_OP_LABEL = re.compile(r"^([^\s:]+):([A-Za-z_][A-Za-z0-9_]*)$")


def parse_op_label(label: str) -> tuple[str, str] | None:
    """``(op name, op type)`` of an executor label ``"name:type"``, or None.

    Example:
        >>> parse_op_label("model_1/conv_1/Conv2D:Conv2D")
        ('model_1/conv_1/Conv2D', 'Conv2D')
        >>> parse_op_label("ExecutorState::Process") is None
        True
    """
    m = _OP_LABEL.match(label)
    return (m.group(1), m.group(2)) if m else None


@dataclasses.dataclass(frozen=True)
class MemoryEvent:
    """One allocator event, as the profiler recorded it.

    Attributes:
        time_ps: Absolute time in picoseconds (line timestamp + event offset).
        is_allocation: True for ``MemoryAllocation``, False for a deallocation.
        allocator: Allocator name, e.g. ``"GPU_0_bfc"`` or ``"gpu_host_bfc"``.
        addr: Address of the block; pairs an allocation with its deallocation.
        allocation_bytes: Bytes the allocator set aside (rounded block size).
        requested_bytes: Bytes the op asked for.
        bytes_allocated: The allocator's total bytes in use after the event.
        tf_op: Full name of the op that made the allocation, if recorded.
        region_type: ``"output"``, ``"temp"``, ``"persist"``..., if recorded.
        shape: Tensor shape as text, e.g. ``"[32,64]"``, if recorded.
    """

    time_ps: int
    is_allocation: bool
    allocator: str
    addr: int
    allocation_bytes: int
    requested_bytes: int
    bytes_allocated: int
    tf_op: str | None = None
    region_type: str | None = None
    shape: str | None = None


@dataclasses.dataclass(frozen=True)
class StepMarker:
    """A kswap step marker: ``[start_ps, end_ps)`` of profiled step ``step``."""

    step: int
    start_ps: int
    end_ps: int


@dataclasses.dataclass(frozen=True)
class OpEvent:
    """One execution of an op, as the profiler recorded it.

    Attributes:
        op: Full name of the op (as the executor saw it, with the names of
            the function calls it runs in, if any, in front).
        type: The op's type (``"Conv2D"``, ``"_FusedConv2D"``, ``"DeepCopy"``).
        start_ps: Absolute start time in picoseconds.
        end_ps: Absolute end time in picoseconds.
        line: The line it was on: a host thread (``"tf_Compute/..."``) or a
            GPU stream (``"Stream #14(Kernel)"``).
        plane: ``"/host:CPU"`` or the GPU's plane (``"/device:GPU:0"``).
        kernel: On a GPU, the kernel's (or copy's) own name; None on the host.
    """

    op: str
    type: str
    start_ps: int
    end_ps: int
    line: str = ""
    plane: str = _HOST_PLANE
    kernel: str | None = None

    @property
    def on_device(self) -> bool:
        """Whether it ran on a GPU (a kernel or a copy), not on a host thread."""
        return self.plane != _HOST_PLANE


@dataclasses.dataclass(frozen=True)
class XSpaceEvents:
    """What kswap reads from one ``XSpace``: memory events, step markers and ops."""

    memory_events: tuple[MemoryEvent, ...]
    steps: tuple[StepMarker, ...]
    hostname: str | None
    op_events: tuple[OpEvent, ...] = ()


# --- protobuf wire format --------------------------------------------------------


def _varint(buf: bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf) if end is None else end
    while True:
        if pos >= end:
            raise ValueError(f"Not a valid XSpace: a number is cut off at byte {pos}.")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def _fields(buf: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple]:
    """Yields ``(field_number, wire_type, value)``; LEN values are (start, end)."""
    pos = start
    end = len(buf) if end is None else end
    while pos < end:
        key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos, end)
        elif wire in (1, 2, 5):
            if wire == 2:
                length, pos = _varint(buf, pos, end)
            else:
                length = 8 if wire == 1 else 4
            if pos + length > end:
                raise ValueError(
                    f"Not a valid XSpace: field {field} at byte {pos} runs past its end."
                )
            value = (pos, pos + length) if wire == 2 else buf[pos : pos + length]
            pos += length
        else:
            raise ValueError(f"Not a valid XSpace: unsupported protobuf wire type {wire}.")
        yield field, wire, value


def _text(buf: bytes, span: tuple[int, int]) -> str:
    return bytes(buf[span[0] : span[1]]).decode("utf-8", "replace")


def _metadata_names(buf: bytes, span: tuple[int, int]) -> tuple[int, str]:
    """Decodes one map entry ``{key: int64, value: X*Metadata}`` to (id, name)."""
    key, name = 0, ""
    for field, _, value in _fields(buf, *span):
        if field == 1:
            key = _signed(value)
        elif field == 2:
            for f2, _, v2 in _fields(buf, *value):
                if f2 == 2:
                    name = _text(buf, v2)
    return key, name


def _stats(buf: bytes, spans: list, stat_names: dict[int, str]) -> dict:
    out = {}
    for span in spans:
        meta, val = 0, None
        for field, _, value in _fields(buf, *span):
            if field == 1:
                meta = value
            elif field == 2:
                val = struct.unpack("<d", value)[0]
            elif field == 3:
                val = value
            elif field == 4:
                val = _signed(value)
            elif field in (5, 6):
                val = _text(buf, value)
            elif field == 7:
                val = stat_names.get(value, "")
        out[stat_names.get(meta, str(meta))] = val
    return out


def _plane(buf: bytes, span: tuple[int, int], events: list, steps: list, ops: list) -> None:
    name = ""
    lines, event_names, stat_names = [], {}, {}
    for field, _, value in _fields(buf, *span):
        if field == 2:
            name = _text(buf, value)
        elif field == 3:
            lines.append(value)
        elif field == 4:
            k, n = _metadata_names(buf, value)
            event_names[k] = n
        elif field == 5:
            k, n = _metadata_names(buf, value)
            stat_names[k] = n
    if name == _HOST_PLANE:
        wanted: dict[int, object] = {
            k: n for k, n in event_names.items() if n in (_ALLOC, _FREE, STEP_MARKER)
        }
        for k, n in event_names.items():
            label = parse_op_label(n)
            if label is not None:
                wanted[k] = label
    elif _GPU_PLANE.match(name):
        wanted = {k: _KERNEL for k in event_names}  # an op's kernel if it names its op
    else:
        return
    if not wanted:
        return
    for line in lines:
        timestamp_ns, line_name, event_spans = 0, "", []
        for field, _, value in _fields(buf, *line):
            if field == 2:
                line_name = _text(buf, value)
            elif field == 3:
                timestamp_ns = _signed(value)
            elif field == 4:
                event_spans.append(value)
        base_ps = timestamp_ns * 1000
        for ev in event_spans:
            meta, offset, duration, stat_spans = None, 0, 0, []
            for field, _, value in _fields(buf, *ev):
                if field == 1:
                    meta = value
                    if meta not in wanted:
                        break
                elif field == 2:
                    offset = _signed(value)
                elif field == 3:
                    duration = _signed(value)
                elif field == 4:
                    stat_spans.append(value)
            if meta not in wanted:
                continue
            kind = wanted[meta]
            start = base_ps + offset
            if isinstance(kind, tuple):  # an op the host's executor ran
                ops.append(OpEvent(kind[0], kind[1], start, start + duration, line_name, name))
                continue
            stats = _stats(buf, stat_spans, stat_names)
            if kind is _KERNEL:
                label = parse_op_label(str(stats.get("tf_op") or ""))
                if label is not None:
                    ops.append(
                        OpEvent(
                            label[0],
                            label[1],
                            start,
                            start + duration,
                            line_name,
                            name,
                            event_names.get(meta, ""),
                        )
                    )
                continue
            if kind == STEP_MARKER:
                step = stats.get("step_num")
                if step is not None:
                    steps.append(StepMarker(int(step), start, start + duration))
                continue
            events.append(
                MemoryEvent(
                    time_ps=start,
                    is_allocation=kind == _ALLOC,
                    allocator=str(stats.get("allocator_name", "")),
                    addr=int(stats.get("addr", 0) or 0),
                    allocation_bytes=int(stats.get("allocation_bytes", 0) or 0),
                    requested_bytes=int(stats.get("requested_bytes", 0) or 0),
                    bytes_allocated=int(stats.get("bytes_allocated", 0) or 0),
                    tf_op=stats.get("tf_op") or None,
                    region_type=stats.get("region_type") or None,
                    shape=stats.get("shape") or None,
                )
            )


def read_xspace(source: str | os.PathLike | bytes) -> XSpaceEvents:
    """Reads the memory events, kswap step markers and op executions of an XSpace.

    Args:
        source: Path of an ``.xplane.pb`` file, or its bytes.

    Returns:
        The allocator events sorted by time, the step markers sorted by step,
        and the ops sorted by start time (the host's and, where there is a
        GPU, its kernels and copies).

    Raises:
        ValueError: (one line) the bytes are not a well-formed XSpace.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = bytes(source)
    else:
        with open(source, "rb") as f:
            buf = f.read()
    events: list[MemoryEvent] = []
    steps: list[StepMarker] = []
    ops: list[OpEvent] = []
    hostname = None
    try:
        for field, _, value in _fields(buf):
            if field == 1:
                _plane(buf, value, events, steps, ops)
            elif field == 4 and hostname is None:
                hostname = _text(buf, value)
    except (TypeError, IndexError, KeyError, struct.error) as error:
        # a field of the wrong wire type: these bytes are not an XSpace kswap can read
        raise ValueError(
            f"Not a valid XSpace: {type(error).__name__}: {' '.join(str(error).split())}"
        ) from None
    events.sort(key=lambda e: e.time_ps)
    steps.sort(key=lambda s: s.step)
    ops.sort(key=lambda o: (o.start_ps, o.end_ps))
    return XSpaceEvents(tuple(events), tuple(steps), hostname, tuple(ops))
