""" "best" against an exhaustive oracle on small instances.

For interval lifetimes, take an optimal packing and place its buffers in
order of their offsets, each at the *lowest* offset where it fits: by
induction each lands no higher than in the optimum. Repeating this reaches an
optimal packing that lowest-fit placement reproduces with non-decreasing
offsets. So the minimum over all orders with lowest-fit placement, keeping
only orders whose offsets never decrease, is the optimum - the oracle below.
It is checked against plain enumeration of all orders, and against brute
force over every offset assignment on tiny instances.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kswap.allocator import ALGORITHMS, Buffer, pack


def _overlapping(starts, ends):
    n = len(starts)
    return [
        [k for k in range(n) if k != j and starts[k] < ends[j] and starts[j] < ends[k]]
        for j in range(n)
    ]


def _lowest_fit(j, sizes, offsets, neighbors):
    at = 0
    placed = [(offsets[k], offsets[k] + sizes[k]) for k in neighbors[j] if offsets[k] >= 0]
    for lo, hi in sorted(placed):
        if lo - at >= sizes[j]:
            break
        at = max(at, hi)
    return at


def _peak(sizes, starts, ends):
    return max(
        sum(s for s, a, b in zip(sizes, starts, ends, strict=True) if a <= t < b)
        for t in set(starts)
    )


def optimal_arena(sizes, starts, ends, *, canonical=True):
    """The smallest arena, by enumerating orders with lowest-fit placement."""
    n = len(sizes)
    neighbors = _overlapping(starts, ends)
    lower = _peak(sizes, starts, ends)
    best = sum(sizes)
    offsets = [-1] * n

    def search(depth, last, top):
        nonlocal best
        if top >= best or best == lower:
            return
        if depth == n:
            best = top
            return
        for j in range(n):
            if offsets[j] < 0:
                at = _lowest_fit(j, sizes, offsets, neighbors)
                if canonical and at < last:
                    continue
                offsets[j] = at
                search(depth + 1, at, max(top, at + sizes[j]))
                offsets[j] = -1

    search(0, 0, 0)
    return best


def brute_force_arena(sizes, starts, ends):
    """The smallest arena over every assignment of offsets in [0, sum(sizes))."""
    n, total = len(sizes), sum(sizes)
    grid = np.array(list(itertools.product(range(total), repeat=n)))  # (m, n)
    sizes_a = np.array(sizes)
    ok = np.ones(len(grid), dtype=bool)
    for i, j in itertools.combinations(range(n), 2):
        if starts[i] < ends[j] and starts[j] < ends[i]:
            lo_i, lo_j = grid[:, i], grid[:, j]
            ok &= (lo_i + sizes_a[i] <= lo_j) | (lo_j + sizes_a[j] <= lo_i)
    return int((grid[ok] + sizes_a).max(axis=1).min())


def _instance(rng, n, *, max_size=8, horizon=10, max_life=6):
    sizes = rng.integers(1, max_size + 1, n).tolist()
    starts = rng.integers(0, horizon, n).tolist()
    ends = [s + int(rng.integers(1, max_life + 1)) for s in starts]
    return sizes, starts, ends


def test_oracle_matches_brute_force_on_tiny_instances():
    rng = np.random.default_rng(1)
    for _ in range(25):
        sizes, starts, ends = _instance(rng, int(rng.integers(2, 5)), max_size=3, horizon=5)
        assert optimal_arena(sizes, starts, ends) == brute_force_arena(sizes, starts, ends)


def test_canonical_pruning_loses_nothing():
    rng = np.random.default_rng(2)
    for _ in range(60):
        sizes, starts, ends = _instance(rng, int(rng.integers(3, 7)))
        full = optimal_arena(sizes, starts, ends, canonical=False)
        assert optimal_arena(sizes, starts, ends) == full


def test_best_is_optimal_on_small_instances():
    rng = np.random.default_rng(0)
    trials, hits = 1000, {name: 0 for name in ALGORITHMS}
    for _ in range(trials):
        sizes, starts, ends = _instance(rng, int(rng.integers(3, 9)))
        optimum = 256 * optimal_arena(sizes, starts, ends)
        buffers = [Buffer(256 * s, a, b) for s, a, b in zip(sizes, starts, ends, strict=True)]
        for name in ("best", "greedy_size"):
            plan = pack(buffers, algorithm=name)
            plan.validate()
            assert plan.arena_bytes >= optimum
            hits[name] += plan.arena_bytes == optimum
    print(f"optimal in {trials} instances:", {k: v for k, v in hits.items() if v})
    assert hits["best"] >= 0.95 * trials


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_is_valid_and_bounded_on_small_instances(algorithm):
    rng = np.random.default_rng(3)
    for _ in range(100):
        sizes, starts, ends = _instance(rng, int(rng.integers(1, 9)))
        buffers = [Buffer(256 * s, a, b) for s, a, b in zip(sizes, starts, ends, strict=True)]
        plan = pack(buffers, algorithm=algorithm)
        plan.validate()
        assert plan.lower_bound_bytes <= plan.arena_bytes <= 256 * sum(sizes)
