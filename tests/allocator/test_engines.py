"""The placement engines agree with each other and with a direct implementation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kswap.allocator import _validate
from kswap.allocator._exact import exact_pack
from kswap.allocator._gaps import choose_offset
from kswap.allocator._instance import Instance
from kswap.allocator._intervals import count_overlapping_pairs, iter_overlapping_pairs, peak_load
from kswap.allocator._orders import ORDERS, SWEEP_ORDERS, placement_order
from kswap.allocator._place_batched import BatchedPlacer, _overlaps_earlier
from kswap.allocator._place_dense import DensePlacer, scan_length
from kswap.allocator._place_simple import SimplePlacer
from kswap.allocator._place_sweep import sweep_place
from kswap.allocator._search import improve_order, squeaky_wheel
from kswap.allocator._synthetic import random_instance, training_step_instance
from kswap.allocator._validate import find_conflict


def reference_place(order, sizes, starts, ends, *, best_fit):
    """Direct O(n^2) placement: the definition the engines must match."""
    offsets = {}
    for j in order:
        ranges = [
            (offsets[k], offsets[k] + sizes[k])
            for k in offsets
            if starts[k] < ends[j] and starts[j] < ends[k]
        ]
        reach, best, best_gap = 0, None, None
        for lo, hi in sorted(ranges):
            gap = lo - reach
            if gap >= sizes[j] and (best is None or (best_fit and gap < best_gap)):
                best, best_gap = reach, gap
                if not best_fit:
                    break
            reach = max(reach, hi)
        offsets[j] = reach if best is None else best
    return np.array([offsets[j] for j in range(len(sizes))])


def _instances(count, seed):
    rng = np.random.default_rng(seed)
    for t in range(count):
        n = int(rng.integers(1, 80))
        make = random_instance if t % 2 else training_step_instance
        options = {"max_lifetime": int(rng.integers(1, 60))} if t % 2 else {}
        sizes, starts, ends = make(n, seed=t, **options)
        yield rng, (sizes + 255) // 256, starts, ends


def test_engines_match_the_reference():
    for rng, sizes, starts, ends in _instances(120, seed=0):
        order = rng.permutation(sizes.size)
        simple = SimplePlacer(sizes, starts, ends)
        batched = BatchedPlacer(sizes, starts, ends)
        dense = DensePlacer(sizes, starts, ends)
        for best_fit in (True, False):
            expected = reference_place(order, sizes, starts, ends, best_fit=best_fit)
            np.testing.assert_array_equal(simple.place(order, best_fit=best_fit), expected)
            np.testing.assert_array_equal(batched.place(order, best_fit=best_fit), expected)
            np.testing.assert_array_equal(dense.place(order, best_fit=best_fit), expected)
            assert find_conflict(sizes, starts, ends, expected) is None


def test_sweep_matches_best_fit_in_start_and_end_order():
    for _, sizes, starts, ends in _instances(120, seed=1):
        for name in SWEEP_ORDERS:
            order = placement_order(name, sizes, starts, ends)
            expected = reference_place(order, sizes, starts, ends, best_fit=True)
            if name == "start":
                got = sweep_place(order, sizes, starts, ends)
            else:
                got = sweep_place(order, sizes, -ends, -starts)
            np.testing.assert_array_equal(got, expected)


def test_batched_engine_on_a_large_instance():
    sizes, starts, ends = random_instance(5_000, seed=4)
    sizes = (sizes + 255) // 256
    for name in ORDERS:
        order = placement_order(name, sizes, starts, ends)
        offsets = BatchedPlacer(sizes, starts, ends).place(order, best_fit=True)
        expected = SimplePlacer(sizes, starts, ends).place(order, best_fit=True)
        np.testing.assert_array_equal(offsets, expected)


@pytest.mark.parametrize("engine", [SimplePlacer, DensePlacer])
def test_incremental_placement_resumes_an_order(engine):
    sizes, starts, ends = random_instance(200, seed=5)
    sizes = (sizes + 255) // 256
    placer = engine(sizes, starts, ends)
    order = np.random.default_rng(0).permutation(200)
    for best_fit in (True, False):
        full = placer.place(order, best_fit=best_fit)
        changed = order.copy()
        changed[120:] = changed[120:][::-1]
        resumed = placer.place(changed, best_fit=best_fit, offsets=full, start=120)
        np.testing.assert_array_equal(resumed, placer.place(changed, best_fit=best_fit))
        resumed = placer.place(changed, best_fit=best_fit, offsets=full.tolist(), start=120)
        np.testing.assert_array_equal(resumed, placer.place(changed, best_fit=best_fit))


def test_dense_engine_on_real_like_instances():
    # Long activations overlapping hundreds of buffers, plus one buffer alive
    # almost throughout (the run each buffer scans is then most of the order).
    for n, seed in ((1000, 0), (600, 1)):
        sizes, starts, ends = training_step_instance(n, seed=seed)
        sizes = (sizes + 255) // 256
        keep = (starts > starts.min()) | (ends < ends.max())  # no whole-horizon buffers
        sizes, starts, ends = sizes[keep], starts[keep], ends[keep]
        if seed:
            sizes = np.append(sizes, 3)
            starts = np.append(starts, starts.min() + 1)
            ends = np.append(ends, ends.max() - 1)
        for name in ORDERS:
            order = placement_order(name, sizes, starts, ends)
            for best_fit in (True, False):
                expected = SimplePlacer(sizes, starts, ends).place(order, best_fit=best_fit)
                got = DensePlacer(sizes, starts, ends).place(order, best_fit=best_fit)
                np.testing.assert_array_equal(got, expected)
        pairs = count_overlapping_pairs(starts, ends)
        assert pairs <= scan_length(starts, ends) <= sizes.size**2


def test_orders_are_permutations():
    sizes, starts, ends = random_instance(500, seed=6)
    for name in (*ORDERS, *SWEEP_ORDERS):
        order = placement_order(name, sizes, starts, ends)
        assert sorted(order.tolist()) == list(range(500))
    with pytest.raises(ValueError):
        placement_order("nope", sizes, starts, ends)


def test_overlaps_earlier_matches_pairs():
    rng = np.random.default_rng(7)
    for t in range(300):
        n = int(rng.integers(1, 60))
        starts = rng.integers(0, 40, n)
        ends = starts + rng.integers(1, 4 if t % 2 else 40, n)
        expected = [
            any(starts[i] < ends[j] and starts[j] < ends[i] for i in range(j)) for j in range(n)
        ]
        assert _overlaps_earlier(starts, ends).tolist() == expected


def test_interval_helpers():
    rng = np.random.default_rng(8)
    for _ in range(50):
        n = int(rng.integers(0, 50))
        lo = rng.integers(0, 30, n)
        hi = lo + rng.integers(0, 10, n)  # some empty
        pairs = {
            (i, j)
            for i, j in itertools.combinations(range(n), 2)
            if lo[i] < hi[j] and lo[j] < hi[i] and lo[i] < hi[i] and lo[j] < hi[j]
        }
        found = set()
        for a, b in iter_overlapping_pairs(lo, hi, chunk=7):
            found |= {(min(x, y), max(x, y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)}
        assert found == pairs
        assert count_overlapping_pairs(lo, hi) == len(pairs)
        weights = rng.integers(1, 9, n)
        keep = hi > lo
        expected = max(
            (int(weights[keep & (lo <= t) & (t < hi)].sum()) for t in range(40)), default=0
        )
        assert peak_load(weights[keep], lo[keep], hi[keep]) == expected


@pytest.mark.parametrize("strategy", ["pairs", "sweep"])
def test_find_conflict_matches_brute_force(strategy, monkeypatch):
    if strategy == "sweep":
        monkeypatch.setattr(_validate, "_PAIRS_PER_BUFFER", -1)
    rng = np.random.default_rng(9)
    for _ in range(200):
        n = int(rng.integers(2, 30))
        sizes = rng.integers(0, 4, n)
        starts = rng.integers(0, 20, n)
        ends = starts + rng.integers(1, 8, n)
        offsets = rng.integers(0, 12, n)
        bad = [
            (i, j)
            for i, j in itertools.combinations(range(n), 2)
            if starts[i] < ends[j]
            and starts[j] < ends[i]
            and offsets[i] < offsets[j] + sizes[j]
            and offsets[j] < offsets[i] + sizes[i]
            and sizes[i]
            and sizes[j]
        ]
        conflict = find_conflict(sizes, starts, ends, offsets)
        assert (conflict is None) == (not bad)
        if conflict is not None:
            assert conflict in bad


def test_find_conflict_when_dense_in_time_and_in_space():
    # 10,000 activations stacked for the whole step, and 10,000 temporaries
    # taking turns in one slot above them: ~10**8 pairs overlap in time and
    # ~5 * 10**7 in address space, so the sweep line is used.
    n = 10_000
    sizes = np.ones(2 * n, dtype=np.int64)
    starts = np.concatenate([np.zeros(n, np.int64), np.arange(n)])
    ends = np.concatenate([np.full(n, n), np.arange(n) + 1])
    offsets = np.concatenate([np.arange(n), np.full(n, n)])
    assert find_conflict(sizes, starts, ends, offsets) is None
    offsets[n + 500] = 42  # a temporary over activation 42
    assert find_conflict(sizes, starts, ends, offsets) == (42, n + 500)


def test_choose_offset():
    ranges = [(2, 6), (7, 12), (3, 5)]
    assert choose_offset(1, ranges, best_fit=True) == 6  # smallest hole
    assert choose_offset(1, ranges, best_fit=False) == 0  # lowest hole
    assert choose_offset(2, ranges, best_fit=True) == 0
    assert choose_offset(3, ranges, best_fit=True) == 12  # on top
    assert choose_offset(3, [], best_fit=True) == 0


def test_instance_sets_aside_whole_horizon_and_empty_buffers():
    inst = Instance([3, 5, 0, 2, 5], [0, 0, 1, 2, 0], [9, 9, 3, 4, 9])
    assert inst.fixed.tolist() == [1, 4, 0]  # largest first, stable
    assert inst.fixed_offsets.tolist() == [0, 5, 10]
    assert inst.base == 13 and inst.core.tolist() == [3]
    assert inst.lower_bound == 15 and inst.core_lower_bound == 2
    assert inst.full_offsets([0]).tolist() == [10, 0, 0, 13, 5]
    with pytest.raises(ValueError, match="same length"):
        Instance([1], [0, 1], [1])
    with pytest.raises(ValueError, match="every end after its start"):
        Instance([1], [3], [3])


def test_batched_engine_with_huge_sizes():
    # Sizes near 2**55 units overflow the int64 sort keys: Python integers are used.
    sizes, starts, ends = random_instance(300, seed=12)
    sizes = sizes.astype(np.int64) << 30
    order = placement_order("size", sizes, starts, ends)
    for best_fit in (True, False):
        expected = reference_place(order, sizes, starts, ends, best_fit=best_fit)
        got = BatchedPlacer(sizes, starts, ends).place(order, best_fit=best_fit)
        np.testing.assert_array_equal(got, expected)


def test_exact_pack_finds_the_optimum():
    # Greedy by size needs 7 here; 6 is optimal (see test_packing).
    sizes, starts, ends = np.array([2, 2, 2, 3]), np.array([0, 2, 2, 1]), np.array([3, 3, 4, 2])
    offsets, proven = exact_pack(sizes, starts, ends)
    assert proven and int((offsets + sizes).max()) == 6
    assert find_conflict(sizes, starts, ends, offsets) is None
    none, proven = exact_pack(sizes, starts, ends, upper=6)
    assert none is None and proven  # nothing beats 6
    _, proven = exact_pack(sizes, starts, ends, node_limit=1)
    assert not proven


def _placed_by_size(seed, placer_class):
    """A random instance (in 256-byte units), its placer, size order and offsets."""
    sizes, starts, ends = random_instance(300, seed=seed)
    sizes = (sizes + 255) // 256
    placer = placer_class(sizes, starts, ends)
    order = placement_order("size", sizes, starts, ends)
    return sizes, starts, ends, placer, order, placer.place(order, best_fit=True)


def test_local_search_counts_its_work():
    sizes, starts, ends, placer, order, offsets = _placed_by_size(2, SimplePlacer)
    arena = int((offsets + sizes).max())
    same = improve_order(placer, order, offsets, lower=0, work=0)
    np.testing.assert_array_equal(same[1], offsets)
    runs = [improve_order(placer, order, offsets, lower=0, work=20_000) for _ in range(2)]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], placer.place(runs[0][0], best_fit=True))
    assert int((runs[0][1] + sizes).max()) <= arena
    dense = improve_order(DensePlacer(sizes, starts, ends), order, offsets, lower=0, work=20_000)
    np.testing.assert_array_equal(dense[1], runs[0][1])  # same moves, same placements


def test_squeaky_wheel_puts_the_top_buffers_first():
    sizes, _, _, placer, order, offsets = _placed_by_size(3, DensePlacer)

    def place(o):
        return placer.place(o, best_fit=True)

    rounds = list(squeaky_wheel(place, sizes, order, offsets, lower=0, rounds=3))
    assert len(rounds) == 3
    new_order, new_offsets = rounds[0]
    tops = offsets + sizes
    on_top = [int(i) for i in order if tops[i] == tops.max()]
    assert new_order[: len(on_top)].tolist() == on_top
    assert sorted(new_order.tolist()) == list(range(sizes.size))
    np.testing.assert_array_equal(new_offsets, place(new_order))
    # At the lower bound there is nothing to do.
    assert not list(squeaky_wheel(place, sizes, order, offsets, lower=10**12, rounds=3))
