""" "best" on the buffers of real training steps, and its determinism.

``data/*_step.npz`` hold the device buffers of the last (only) step of kswap
traces of four keras.applications models (``kswap profile --model
keras.applications.NAME --batch 16 --steps 1``, TensorFlow 2.21, device
emulated on the CPU): per buffer only its requested bytes (``sizes``) and
its lifetime in nanoseconds from the step's start (``starts``, ``ends``),
in trace order. ``pack(trace)`` packs exactly these buffers.
"""

from __future__ import annotations

import itertools
import pathlib
import time

import numpy as np
import pytest

from kswap.allocator import Buffer, pack
from kswap.allocator._algorithms import best
from kswap.allocator._orders import placement_order
from kswap.allocator._place_sweep import sweep_place
from kswap.allocator._synthetic import random_instance, training_step_instance
from kswap.allocator._validate import find_conflict

DATA = pathlib.Path(__file__).parent / "data"
STEPS = ("resnet50", "mobilenetv2", "vgg16", "densenet121")


def _step(name: str) -> list[Buffer]:
    with np.load(DATA / f"{name}_step.npz") as data:
        sizes, starts, ends = data["sizes"], data["starts"], data["ends"]
    return [Buffer(int(s), int(a), int(b)) for s, a, b in zip(sizes, starts, ends, strict=True)]


def test_step_data_is_small_and_plausible():
    for name in STEPS:
        assert (DATA / f"{name}_step.npz").stat().st_size < 300_000
        buffers = _step(name)
        assert 300 <= len(buffers) <= 6000
        assert all(b.size > 0 for b in buffers)
        assert min(b.start for b in buffers) == 0


@pytest.mark.parametrize("name", STEPS)
def test_best_packs_real_steps_near_the_lower_bound(name):
    plan = pack(_step(name))
    plan.validate()
    print(f"{name}: arena / lower bound = {plan.overhead:.5f}")
    assert plan.overhead <= 1.005


def test_real_steps_are_not_trivial():
    # Greedy by size (SmartPool, TFLite) misses the bound by more than 0.5%
    # on VGG16 and ResNet50, so the check above can fail.
    overheads = {name: pack(_step(name), algorithm="greedy_size").overhead for name in STEPS}
    print("greedy_size:", {k: round(v, 4) for k, v in overheads.items()})
    assert sum(v > 1.005 for v in overheads.values()) >= 2


@pytest.fixture
def erratic_clock(monkeypatch):
    """Every clock jumps by 100 s per reading, as on a hopelessly loaded machine."""
    ticks = itertools.count()
    for name in ("perf_counter", "monotonic", "time", "process_time"):
        monkeypatch.setattr(time, name, lambda: 100.0 * next(ticks))
        monkeypatch.setattr(time, name + "_ns", lambda: 100 * 10**9 * next(ticks))


def _instances():
    yield "vgg16", *_arrays(_step("vgg16"))
    for n, seed in ((200, 2), (600, 3)):
        sizes, starts, ends = random_instance(n, seed=seed)
        yield f"random {n}", (sizes + 255) // 256, starts, ends
        sizes, starts, ends = training_step_instance(n, seed=seed)
        yield f"training {n}", (sizes + 255) // 256, starts, ends
    yield "ten buffers", *(a[:10] for a in random_instance(10, seed=4))


def _arrays(buffers):
    return tuple(np.array([getattr(b, f) for b in buffers]) for f in ("size", "start", "end"))


def test_best_does_not_depend_on_the_clock(request):
    expected = {name: best(*arrays) for name, *arrays in _instances()}
    request.getfixturevalue("erratic_clock")
    for name, *arrays in _instances():
        np.testing.assert_array_equal(best(*arrays), expected[name], err_msg=name)


def test_work_budget_decides_what_runs():
    sizes, starts, ends = random_instance(600, seed=3)
    units = (sizes + 255) // 256
    # No budget: only the first step, the start-time sweep, runs.
    nothing = best(units, starts, ends, work_budget=0)
    assert find_conflict(units, starts, ends, nothing) is None
    sweep = placement_order("start", units, starts, ends)
    np.testing.assert_array_equal(nothing, sweep_place(sweep, units, starts, ends))
    arenas = [int((best(units, starts, ends, work_budget=w) + units).max()) for w in (0, 10**9)]
    print("arenas by budget:", arenas)
    assert arenas[1] < arenas[0]
