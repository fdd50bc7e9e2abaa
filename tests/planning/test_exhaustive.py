"""The exhaustive search against plain enumeration."""

import itertools
import math

import pytest

from kswap.planning import Link
from kswap.planning._engine import Engine
from kswap.planning._synthetic import random_workload
from kswap.planning.exhaustive import exhaustive

MENU = [(0, 1), (1, 1), (2, 1)]  # keep, swap (prefetch 1), recompute


def brute_force(w, budget, link):
    engine = Engine(w, link)
    best = math.inf
    for codes in itertools.product(MENU, repeat=len(w.blocks)):
        for host in (False, True):
            run = engine.run(codes, host)
            if run.peak_bytes <= budget:
                best = min(best, run.step_seconds)
    return best


@pytest.mark.parametrize("seed", range(8))
def test_branch_and_bound_finds_what_enumeration_finds(seed):
    link = Link(2e9, 3e9, 1e-5) if seed % 2 else Link.preset("pcie3")
    w = random_workload(3 + seed % 3, seed)
    peak = Engine(w, link).run([(0, 1)] * len(w.blocks)).peak_bytes
    for fraction in (0.9, 0.6, 0.4):
        budget = int(fraction * peak)
        plan = exhaustive(w, budget, link)
        best = brute_force(w, budget, link)
        if math.isinf(best):
            assert not plan.fits
        else:
            assert plan.fits and plan.predicted_step_seconds == pytest.approx(best, rel=1e-9)


def test_other_action_sets():
    w = random_workload(4, 3)
    link = Link.preset("pcie3")
    peak = Engine(w, link).run([(0, 1)] * 4).peak_bytes
    wide = exhaustive(
        w, int(0.6 * peak), link, actions=("keep", "swap:0", "swap", "recompute:host")
    )
    narrow = exhaustive(w, int(0.6 * peak), link, actions=("keep", "swap"))
    assert {str(a) for a in narrow.actions} <= {"keep", "swap"}
    assert wide.predicted_step_seconds <= narrow.predicted_step_seconds or not narrow.fits
    with pytest.raises(ValueError, match="max_blocks=3"):
        exhaustive(w, peak, link, max_blocks=3)
