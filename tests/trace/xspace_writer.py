"""A minimal XSpace encoder for tests: writes the fields kswap reads."""

from __future__ import annotations

import struct


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, n: int) -> bytes:
    return _key(field, 0) + _varint(n)


def _len(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def _str(field: int, s: str) -> bytes:
    return _len(field, s.encode())


def _double(field: int, x: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", x)


def encode_xspace(lines, plane_name="/host:CPU", hostname="testhost") -> bytes:
    """``lines``: list of (timestamp_ns, [(event_name, offset_ps, duration_ps, stats)]),
    each optionally with the line's name as a third item.

    ``stats`` maps a stat name to an int, a float, or a str (sent as ref_value).
    """
    event_ids: dict[str, int] = {}
    stat_ids: dict[str, int] = {}

    def sid(name):
        return stat_ids.setdefault(name, len(stat_ids) + 1)

    plane = _int(1, 0) + _str(2, plane_name)
    for timestamp_ns, events, *name in lines:
        body = _int(1, 7) + _str(2, name[0] if name else "line") + _int(3, timestamp_ns)
        for name, offset, duration, stats in events:
            eid = event_ids.setdefault(name, len(event_ids) + 1)
            ev = _int(1, eid) + _int(2, offset) + _int(3, duration)
            for sname, value in stats.items():
                st = _int(1, sid(sname))
                if isinstance(value, str):
                    st += _int(7, sid(value))
                elif isinstance(value, float):
                    st += _double(2, value)
                else:
                    st += _int(4, value)
                ev += _len(4, st)
            body += _len(4, ev)
        plane += _len(3, body)
    for name, i in event_ids.items():
        plane += _len(4, _int(1, i) + _len(2, _int(1, i) + _str(2, name)))
    for name, i in stat_ids.items():
        plane += _len(5, _int(1, i) + _len(2, _int(1, i) + _str(2, name)))
    return _len(1, plane) + _len(1, _str(2, "Task Environment")) + _str(4, hostname)
