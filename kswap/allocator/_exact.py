"""Exact packing of small instances by branch and bound.

Placing each buffer at the *lowest* offset where it fits, in the order of
the offsets of an optimal packing, reproduces a packing at least as good
(each buffer ends up no higher than in the optimum, by induction). Repeating
that reaches a packing that the rule reproduces exactly, with offsets
non-decreasing along the order. So it suffices to search the orders whose
lowest-fit offsets are non-decreasing (ties by index), which prunes most of
the ``n!`` orders. Branches are also cut by two bounds: a buffer's
lowest-fit offset only rises as others are placed, and the buffers still to
place are stacked above the last offset wherever they are alive together.

Example:
    >>> import numpy as np
    >>> sizes, starts, ends = np.array([2, 1, 2]), np.array([0, 1, 2]), np.array([2, 3, 4])
    >>> offsets, proven = exact_pack(sizes, starts, ends)
    >>> int((offsets + sizes).max()), proven
    (3, True)
"""

from __future__ import annotations

import numpy as np

__all__ = ["exact_pack", "EXACT_MAX_BUFFERS"]

#: Largest instance :func:`exact_pack` is meant for.
EXACT_MAX_BUFFERS = 12


def _lowest_fit(size: int, ranges: list[tuple[int, int]]) -> int:
    reach = 0
    for lo, hi in sorted(ranges):
        if lo - reach >= size:
            return reach
        if hi > reach:
            reach = hi
    return reach


def exact_pack(
    sizes: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    *,
    upper: int | None = None,
    lower: int = 0,
    node_limit: int = 200_000,
) -> tuple[np.ndarray | None, bool]:
    """An arena-minimal packing of a few buffers.

    Args:
        sizes: Positive sizes.
        starts: Start times.
        ends: End times (exclusive).
        upper: Arena of a known packing: only strictly better ones are sought.
        lower: A lower bound: the search stops when it is reached.
        node_limit: Search nodes to visit at most (so the search is
            deterministic).

    Returns:
        ``(offsets, proven)``: the best packing found (None if none beats
        ``upper``), and whether the search finished (so that it is optimal).
    """
    n = len(sizes)
    size = [int(s) for s in sizes]
    s_l, e_l = [int(s) for s in starts], [int(e) for e in ends]
    overlap = [
        [k for k in range(n) if k != j and s_l[k] < e_l[j] and s_l[j] < e_l[k]] for j in range(n)
    ]
    # Time slots between event times, and which buffers are alive in each.
    times = sorted(set(s_l) | set(e_l))
    alive = [[j for j in range(n) if s_l[j] <= t < e_l[j]] for t in times[:-1]]
    best = [upper if upper is not None else sum(size) + 1, None]
    offset = [-1] * n
    nodes = [0]

    def search(last: int, last_j: int, top: int, left: int) -> bool:
        """Extends the order; returns True to stop the whole search."""
        nodes[0] += 1
        if left == 0:
            best[0], best[1] = top, list(offset)
            return top <= lower
        if nodes[0] > node_limit:
            return True
        fits = []
        bound = top
        for j in range(n):
            if offset[j] >= 0:
                continue
            placed = [(offset[k], offset[k] + size[k]) for k in overlap[j] if offset[k] >= 0]
            at = _lowest_fit(size[j], placed)
            bound = max(bound, at + size[j])
            if at > last or (at == last and j > last_j):
                fits.append((at + size[j], at, j))
        floor = max(last, 0)  # every buffer left goes at or above the last offset
        for slot in alive:
            bound = max(bound, floor + sum(size[j] for j in slot if offset[j] < 0))
        if bound >= best[0]:
            return False
        for new_top, at, j in sorted(fits):
            if max(top, new_top) >= best[0]:
                continue
            offset[j] = at
            stop = search(at, j, max(top, new_top), left - 1)
            offset[j] = -1
            if stop:
                return True
        return False

    stopped = search(-1, -1, 0, n)
    finished = not stopped or (best[1] is not None and best[0] <= lower)
    result = None if best[1] is None else np.array(best[1], dtype=np.int64)
    return result, finished
