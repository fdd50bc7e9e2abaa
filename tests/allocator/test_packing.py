"""Public API of kswap.allocator: Buffer, PackingPlan, pack."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kswap.allocator import ALGORITHMS, Buffer, PackingPlan, pack
from kswap.allocator._synthetic import random_instance, training_step_instance

NAMES = sorted(ALGORITHMS)


def _buffers(sizes, starts, ends) -> list[Buffer]:
    return [Buffer(int(s), int(a), int(b)) for s, a, b in zip(sizes, starts, ends, strict=True)]


# --- Buffer ------------------------------------------------------------------------


def test_buffer_accepts_numpy_integers():
    b = Buffer(np.int64(1024), np.int32(0), np.uint8(3))
    assert (b.size, b.start, b.end) == (1024, 0, 3)
    assert all(type(v) is int for v in (b.size, b.start, b.end))


def test_buffer_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Buffer(1, 0, 1).size = 2


@pytest.mark.parametrize(
    "args, message",
    [
        ((-1, 0, 1), "`size` must be non-negative. Received: size=-1"),
        ((1.0, 0, 1), "`size` must be an integer. Received: size=1.0"),
        ((np.float32(4), 0, 1), "`size` must be an integer. Received: size="),
        ((True, 0, 1), "`size` must be an integer. Received: size=True"),
        (("8", 0, 1), "`size` must be an integer. Received: size='8'"),
        ((1, 0.5, 1), "`start` must be an integer. Received: start=0.5"),
        ((1, 0, None), "`end` must be an integer. Received: end=None"),
        ((1, 5, 3), "`end` must be greater than `start`. Received: start=5, end=3"),
        ((1, 4, 4), "`end` must be greater than `start`. Received: start=4, end=4"),
    ],
)
def test_buffer_validation(args, message):
    with pytest.raises(ValueError) as info:
        Buffer(*args)
    assert str(info.value).startswith(message)


# --- pack arguments --------------------------------------------------------------


def test_empty_plan():
    for algorithm in NAMES:
        plan = pack([], algorithm=algorithm)
        assert plan.buffers == () and plan.offsets == ()
        assert plan.arena_bytes == 0 and plan.lower_bound_bytes == 0
        assert plan.overhead == 1.0 and plan.efficiency == 1.0
        plan.validate()


def test_tuples_are_normalized_to_buffers():
    plan = pack([(1000, 0, 2), (np.int64(10), 1, 3)], algorithm="greedy_size")
    assert plan.buffers == (Buffer(1000, 0, 2), Buffer(10, 1, 3))
    assert plan.sources is None


@pytest.mark.parametrize(
    "items, message",
    [
        ([Buffer(1, 0, 1), (1, 0, 1)], "item 1 of type tuple after items of type Buffer"),
        ([(1, 0, 1), Buffer(1, 0, 1)], "item 1 of type Buffer after items of type tuple"),
        ([Buffer(1, 0, 1), {"size": 1}], "item 1 of type dict"),
        ([(1, 0, 1), (1, 2)], "item 1 = (1, 2)"),
        ([(1, 0, 1), (-5, 0, 1)], "item 1: `size` must be non-negative. Received: size=-5"),
        ([(1, 0, 1), (1, 3, 2)], "item 1: `end` must be greater than `start`"),
        ("abc", "Received: str"),
        (42, "Received: int"),
    ],
)
def test_pack_rejects_bad_buffers(items, message):
    with pytest.raises(ValueError) as info:
        pack(items)
    assert message in str(info.value)


@pytest.mark.parametrize("alignment", [0, -256, 3, 100, 2.0, True, "256"])
def test_pack_rejects_bad_alignment(alignment):
    with pytest.raises(ValueError) as info:
        pack([Buffer(1, 0, 1)], alignment=alignment)
    assert str(info.value) == (
        f"`alignment` must be a positive power of two. Received: alignment={alignment!r}"
    )


def test_pack_rejects_unknown_algorithm():
    with pytest.raises(ValueError) as info:
        pack([Buffer(1, 0, 1)], algorithm="worst")
    message = str(info.value)
    assert "algorithm='worst'" in message
    assert all(name in message for name in NAMES)


def test_algorithm_names():
    assert set(ALGORITHMS) == {"greedy_size", "first_fit", "multi_order", "local_search", "best"}


# --- alignment ----------------------------------------------------------------------


@pytest.mark.parametrize("alignment", [1, 64, 256, 4096])
def test_alignment_rounds_sizes_and_offsets(alignment):
    sizes, starts, ends = random_instance(120, seed=3)
    sizes = sizes % 5000  # some sizes below the alignment, some zero
    for algorithm in NAMES:
        plan = pack(_buffers(sizes, starts, ends), algorithm=algorithm, alignment=alignment)
        plan.validate()
        assert all(o % alignment == 0 for o in plan.offsets)
        aligned = -(-sizes // alignment) * alignment
        assert plan.arena_bytes == max(o + a for o, a in zip(plan.offsets, aligned, strict=True))
        assert plan.arena_bytes >= plan.lower_bound_bytes


def test_zero_size_buffers_take_no_space():
    plan = pack([Buffer(0, 0, 5), Buffer(512, 0, 5), Buffer(0, 1, 2)])
    assert plan.arena_bytes == plan.lower_bound_bytes == 512
    plan.validate()


# --- results ------------------------------------------------------------------------


def test_three_buffers_by_hand():
    # 1 KiB over [0, 2) and 1 KiB over [2, 4) never meet: both at 0. The 512 B
    # buffer over [1, 3) meets both, so it goes on top of them, at 1 KiB.
    plan = pack([Buffer(1024, 0, 2), Buffer(512, 1, 3), Buffer(1024, 2, 4)])
    assert plan.offsets == (0, 1024, 0)
    assert plan.arena_bytes == plan.lower_bound_bytes == 1536
    for algorithm in NAMES:
        assert pack(plan.buffers, algorithm=algorithm).offsets == (0, 1024, 0)


def test_hand_checked_instance():
    # In units of 256 B: A = 2 x [0, 3), B = 2 x [2, 3), C = 2 x [2, 4), D = 3 x [1, 2).
    # Greedy by size: D at 0; A overlaps D -> on top, at 3; C overlaps only A,
    # best gap is [0, 3) -> 0; B overlaps A [3, 5) and C [0, 2): the hole
    # [2, 3) is too small -> on top at 5. Arena 7 units; the optimum is the
    # lower bound, 6 (A, B, C alive at t = 2): A 0, D 2, B 2, C 4.
    buffers = [Buffer(512, 0, 3), Buffer(512, 2, 3), Buffer(512, 2, 4), Buffer(768, 1, 2)]
    greedy = pack(buffers, algorithm="greedy_size")
    assert greedy.offsets == (768, 1280, 0, 0)
    assert greedy.arena_bytes == 1792
    assert greedy.lower_bound_bytes == 1536
    assert greedy.overhead == pytest.approx(7 / 6)
    assert greedy.efficiency == pytest.approx(6 / 7)
    best = pack(buffers)
    assert best.arena_bytes == 1536
    assert best.algorithm == "best"
    best.validate()


def test_first_fit_and_best_fit_choose_different_gaps():
    # Units of 256 B. Size order: b5, b1, b2, b0, b3, b4 (ties: longer, then earlier).
    # b5 -> 0; b1 overlaps b5 -> 4; b2 and b0 overlap both -> 7; b3 overlaps
    # b5, b1, b0 -> 10. b4 = 1 x [7, 10) overlaps only b1 [4, 7) and b3
    # [10, 11): holes [0, 4) and [7, 10). First fit takes the lowest (0),
    # best fit the smallest (7).
    units = [(3, 5, 6), (3, 4, 8), (3, 2, 5), (1, 5, 8), (1, 7, 10), (4, 4, 7)]
    buffers = [Buffer(256 * u, s, e) for u, s, e in units]
    best_fit = pack(buffers, algorithm="greedy_size")
    first_fit = pack(buffers, algorithm="first_fit")
    assert [o // 256 for o in best_fit.offsets] == [7, 4, 7, 10, 7, 0]
    assert [o // 256 for o in first_fit.offsets] == [7, 4, 7, 10, 0, 0]
    assert best_fit.arena_bytes == first_fit.arena_bytes == 11 * 256


def test_whole_horizon_buffers_are_stacked_at_the_bottom():
    sizes, starts, ends = random_instance(200, seed=7)
    horizon = (int(starts.min()), int(ends.max()))
    buffers = _buffers(sizes, starts, ends)
    buffers += [Buffer(1000, *horizon), Buffer(5000, *horizon), Buffer(300, *horizon)]
    for algorithm in NAMES:
        plan = pack(buffers, algorithm=algorithm)
        plan.validate()
        assert plan.offsets[-3:] == (5120, 0, 6144)  # largest first: 5120 B, 1024 B, 512 B
        assert min(plan.offsets[:-3]) >= 6656


def test_validate_catches_overlap():
    a, b = Buffer(512, 0, 4), Buffer(512, 3, 6)
    PackingPlan((a, b), (0, 512)).validate()
    PackingPlan((a, Buffer(512, 4, 6)), (0, 0)).validate()  # touching lifetimes
    with pytest.raises(ValueError, match=r"Buffers 0 and 1 are both alive during \[3, 4\)"):
        PackingPlan((a, b), (0, 256)).validate()
    with pytest.raises(ValueError, match="overlap in memory"):
        PackingPlan((Buffer(1, 0, 9), a, b), (5120, 0, 0)).validate()


def test_validate_checks_offsets():
    a, b = Buffer(100, 0, 4), Buffer(100, 0, 4)
    PackingPlan((a, b), (0, 128), alignment=128).validate()
    with pytest.raises(ValueError, match=r"multiple of 256. Received: offsets\[1\]=128"):
        PackingPlan((a, b), (0, 128)).validate()
    with pytest.raises(ValueError, match=r"Received: offsets\[0\]=-256"):
        PackingPlan((a, b), (-256, 256)).validate()


def test_plan_checks_its_fields():
    with pytest.raises(ValueError, match="one entry per buffer"):
        PackingPlan((Buffer(1, 0, 1),), (0, 0))
    with pytest.raises(ValueError, match="Buffer objects. Received: item 0 of type tuple"):
        PackingPlan(((1, 0, 1),), (0,))
    with pytest.raises(ValueError, match=r"`offsets\[1\]` must be an integer"):
        PackingPlan((Buffer(1, 0, 1), Buffer(1, 0, 1)), (0, 256.0))
    assert PackingPlan((Buffer(1, 0, 1),), (np.int64(512),)).offsets == (512,)
    with pytest.raises(ValueError, match="power of two"):
        PackingPlan((Buffer(1, 0, 1),), (0,), alignment=6)


def test_plan_is_frozen_and_reports_bounds():
    plan = pack([Buffer(1024, 0, 2), Buffer(512, 1, 3)])
    assert (plan.arena_bytes, plan.lower_bound_bytes) == (1536, 1536)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.offsets = ()


@pytest.mark.parametrize("algorithm", NAMES)
def test_random_instances_are_valid(algorithm):
    for seed in range(2):
        for n in (1, 2, 40, 300):
            sizes, starts, ends = random_instance(n, seed=seed)
            plan = pack(_buffers(sizes, starts, ends), algorithm=algorithm)
            plan.validate()
            assert plan.algorithm == algorithm
            assert len(plan.offsets) == n
            assert plan.arena_bytes >= plan.lower_bound_bytes


def test_best_is_no_worse_than_any_algorithm():
    for seed in range(2):
        buffers = _buffers(*random_instance(150, seed=seed))
        arenas = {name: pack(buffers, algorithm=name).arena_bytes for name in NAMES}
        assert arenas["best"] <= min(arenas["greedy_size"], arenas["first_fit"])
        assert arenas["local_search"] <= arenas["multi_order"] <= arenas["greedy_size"]


def test_large_random_instance_is_valid():
    buffers = _buffers(*random_instance(20_000, seed=11))
    for algorithm in ("greedy_size", "best"):
        plan = pack(buffers, algorithm=algorithm)
        plan.validate()
        assert plan.overhead < 1.1


def test_training_step_is_packed_near_the_lower_bound():
    buffers = _buffers(*training_step_instance(600, seed=0))
    overheads = {}
    for algorithm in NAMES:
        plan = pack(buffers, algorithm=algorithm)
        plan.validate()
        overheads[algorithm] = plan.overhead
    print("arena / lower bound:", {k: round(v, 4) for k, v in overheads.items()})
    assert overheads["best"] <= 1.01
    assert overheads["best"] == min(overheads.values())


def test_large_training_step_is_valid_with_the_time_sweep():
    # ~10**8 overlapping pairs would make greedy by size cost more than twice
    # the work budget: "best" starts with the time sweeps.
    plan = pack(_buffers(*training_step_instance(40_000, seed=1)))
    plan.validate()
    assert plan.overhead <= 1.01
