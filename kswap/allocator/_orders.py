"""Placement orders: which buffer to place next.

Each order is a permutation of the (core) buffers. ``"size"`` is the
SmartPool / TFLite greedy-by-size order; the others are the alternatives the
XLA heap simulator tries (lifetime, breadth = size * lifetime), plus the
buffer's *contention* (the most bytes alive at one time during its life:
buffers alive at the peak first) and the two time sweeps, which place
buffers as an allocator would (in order of start, or of end with time
reversed).

Example:
    >>> import numpy as np
    >>> sizes, starts, ends = np.array([1, 3, 3]), np.array([0, 0, 1]), np.array([5, 2, 4])
    >>> placement_order("size", sizes, starts, ends).tolist()
    [2, 1, 0]
"""

from __future__ import annotations

import numpy as np

from kswap.allocator._intervals import load_profile

__all__ = ["ORDERS", "SWEEP_ORDERS", "placement_order"]

#: Orders placed with the generic engines, cheapest to compute first.
ORDERS = ("size", "breadth", "contention", "lifetime")
#: Orders placed by sweeping time (``"end"`` with time reversed).
SWEEP_ORDERS = ("start", "end")


def _contention(sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Most bytes alive at one time during each buffer's lifetime."""
    times, load = load_profile(sizes, starts, ends)
    first = np.searchsorted(times, starts)
    stop = np.searchsorted(times, ends)  # load[first:stop] covers the lifetime
    # Sparse table of range maxima.
    table = [load]
    width = 1
    while 2 * width <= load.size:
        prev = table[-1]
        table.append(np.maximum(prev[:-width], prev[width:]))
        width *= 2
    level = np.frexp((stop - first).astype(np.float64))[1] - 1
    out = np.empty(sizes.size, dtype=np.int64)
    for k in np.unique(level):
        sel = level == k
        t = table[k]
        out[sel] = np.maximum(t[first[sel]], t[stop[sel] - (1 << int(k))])
    return out


def placement_order(
    name: str, sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """The permutation of the buffers for the order called ``name``.

    Ties are broken by the size-order criteria (larger, then longer-lived,
    then earlier), then by index, so every order is deterministic.
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
    elif name == "contention":
        keys = (*tie, -_contention(sizes, starts, ends))
    elif name == "start":
        keys = (*tie, starts)
    elif name == "end":
        keys = (*tie, -ends)
    else:
        raise ValueError(f"Unknown placement order {name!r}.")
    return np.lexsort(keys)
