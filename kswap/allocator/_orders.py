"""Placement orders: which buffer to place next.

Each order is a permutation of the (core) buffers. ``"size"`` is the
SmartPool / TFLite greedy-by-size order; ``"lifetime"`` and ``"breadth"``
(size * lifetime) are the alternatives the XLA heap simulator tries. The
others:

* ``"contention"``: by the buffer's contention - the most bytes alive at one
  time during its life - so the buffers alive at the peak come first;
* ``"contention_lifetime"``: the same, longer lifetimes first among equal
  contention (rather than larger sizes), so that small long-lived buffers
  are not left to sit on top of everything;
* ``"size_class"``: by size rounded down to a power of two, and in order of
  start time within a class - greedy by size that sweeps time like an
  allocator among similar sizes;
* ``"start"`` and ``"end"``: the two time sweeps, which place buffers as an
  allocator would (in order of start, or of end with time reversed).

Example:
    >>> import numpy as np
    >>> sizes, starts, ends = np.array([1, 3, 3]), np.array([0, 0, 1]), np.array([5, 2, 4])
    >>> placement_order("size", sizes, starts, ends).tolist()
    [2, 1, 0]
"""

from __future__ import annotations

import numpy as np

from kswap.allocator._intervals import load_profile, range_table

__all__ = ["ORDERS", "SWEEP_ORDERS", "contention", "placement_order"]

#: Orders placed with the generic engines.
ORDERS = ("size", "breadth", "lifetime", "size_class", "contention", "contention_lifetime")
#: Orders placed by sweeping time (``"end"`` with time reversed).
SWEEP_ORDERS = ("start", "end")


def contention(sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Most bytes alive at one time during each buffer's lifetime."""
    times, load = load_profile(sizes, starts, ends)
    first = np.searchsorted(times, starts)
    stop = np.searchsorted(times, ends)  # load[first:stop] covers the lifetime
    table = range_table(load, np.maximum)
    level = np.frexp((stop - first).astype(np.float64))[1] - 1
    out = np.empty(sizes.size, dtype=np.int64)
    for k in np.unique(level):
        sel = level == k
        t = table[k]
        out[sel] = np.maximum(t[first[sel]], t[stop[sel] - (1 << int(k))])
    return out


def placement_order(
    name: str,
    sizes: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    *,
    contended: np.ndarray | None = None,
) -> np.ndarray:
    """The permutation of the buffers for the order called ``name``.

    Ties are broken by the size-order criteria (larger, then longer-lived,
    then earlier), then by index, so every order is deterministic.
    ``contended`` may pass :func:`contention` of the buffers, if known.
    """
    n = sizes.size
    lengths = ends - starts
    tie = (np.arange(n), starts, -lengths, -sizes)  # np.lexsort: last key first
    if name == "size":
        keys: tuple = tie
    elif name == "lifetime":
        keys = (*tie, -lengths)
    elif name == "breadth":
        keys = (*tie, -(sizes.astype(np.float64) * lengths))
    elif name in ("contention", "contention_lifetime"):
        if contended is None:
            contended = contention(sizes, starts, ends)
        if name == "contention":
            keys = (*tie, -contended)
        else:
            keys = (*tie, -lengths, -contended)
    elif name == "size_class":
        size_class = np.frexp(sizes.astype(np.float64))[1]
        keys = (*tie, starts, -size_class)
    elif name == "start":
        keys = (*tie, starts)
    elif name == "end":
        keys = (*tie, -ends)
    else:
        raise ValueError(f"Unknown placement order {name!r}.")
    return np.lexsort(keys)
