"""The strategies, auto and make_plan."""

import pytest

from kswap.planning import STRATEGIES, Block, Link, Workload, make_plan, smallest_budget
from kswap.planning._search import Context
from kswap.planning._synthetic import random_workload, resnet_like
from kswap.planning.autoswap import autoswap, prefetch_distance, scores, swap_order
from kswap.planning.hybrid import hybrid
from kswap.planning.vdnn import vdnn_all, vdnn_conv, vdnn_dyn

FAST = Link(1000.0, 1000.0)  # copies of 100 bytes take 0.1 s: they hide
SLOW = Link(10.0, 10.0)  # 10 s: they do not


def chain(sizes, kinds=None, **kwargs) -> Workload:
    kinds = kinds or ["conv"] * len(sizes)
    return Workload(
        tuple(
            Block(f"b{i}", s, 1.0, 2.0, kind=k, input_bytes=s // 10)
            for i, (s, k) in enumerate(zip(sizes, kinds, strict=True))
        ),
        **kwargs,
    )


def test_vdnn_policies():
    w = chain([100] * 4, ["conv", "dense", "conv", "other"])
    assert [str(a) for a in vdnn_all(w, 250, FAST).actions] == ["swap"] * 4
    assert [str(a) for a in vdnn_conv(w, 250, FAST).actions] == ["swap", "keep", "swap", "keep"]
    keep = vdnn_dyn(w, 400, FAST)
    assert keep.counts()["keep"] == 4 and keep.fits and keep.strategy == "dyn"
    # the fastest configuration that fits: conv (prefetch 1) is enough for 300 bytes
    assert [str(a) for a in vdnn_dyn(w, 300, FAST).actions] == ["swap", "keep", "swap", "keep"]


def test_autoswap_scores_as_the_paper_defines_them():
    w = chain([400, 300, 200, 100])
    ctx = Context(w, 800, FAST)
    s = scores(ctx)
    # idle from the end of the forward to the start of the backward, less both copies
    assert s["doa"] == pytest.approx([9 - 0.8, 6 - 0.6, 3 - 0.4, 0 - 0.2])
    assert s["aoa"] == pytest.approx([8.2 * 400, 5.4 * 300, 2.6 * 200, -0.2 / 100])
    # overload above 800 bytes: 100 on [2, 3), 200 on [3, 6), 100 on [6, 8)
    assert s["wdoa"] == pytest.approx([900, 70 + 600 + 170, 2.6 * 200, -0.2])
    for score in ("doa", "aoa", "wdoa", "vote"):
        assert swap_order(ctx, score) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="`score` must be one of"):
        swap_order(ctx, "lru")


def test_autoswap_swaps_greedily_until_the_peak_fits():
    w = chain([400, 300, 200, 100])
    plan = autoswap(w, 800, FAST, "doa")
    assert plan.fits and [str(a) for a in plan.actions] == ["swap", "keep", "keep", "keep"]
    # under 700 bytes b0, coming back during b1's backward (400 + 300), is always over:
    # every block is swapped and the plan says it does not fit
    tight = autoswap(w, 650, FAST, "wdoa")
    assert not tight.fits and tight.counts()["swap"] == 4


def test_swap_ins_are_scheduled_back_from_the_next_use():
    w = chain([4000, 100, 100, 100])  # a 4 s copy; each backward is 2 s
    assert prefetch_distance(Context(w, 10**6, FAST), 0) == 2
    assert prefetch_distance(Context(w, 10**6, FAST), 3) == 1


def test_hybrid_swaps_what_hides_and_recomputes_what_does_not():
    w = chain([1000, 1000, 1000])
    assert hybrid(w, 2200, FAST).counts()["swap"] == 1
    slow = hybrid(w, 2200, SLOW)
    assert slow.counts()["recompute"] == 1 and slow.fits


def test_every_strategy_returns_a_plan_named_after_it():
    w = random_workload(8, 1)
    budget = int(0.8 * Context(w, 0, Link.preset("pcie3")).baseline.peak_bytes)
    for name, strategy in STRATEGIES.items():
        plan = strategy(w, budget, Link.preset("pcie3"))
        assert plan.strategy == name and plan.budget_bytes == budget
        assert plan.workload_fingerprint == w.fingerprint()


@pytest.mark.parametrize("seed", range(3))
def test_auto_is_no_slower_than_any_strategy_that_fits(seed):
    w = random_workload(8, seed)
    link = Link.preset("pcie3")
    budget = int(0.6 * Context(w, 0, link).baseline.peak_bytes)
    auto = STRATEGIES["auto"](w, budget, link)
    assert auto.fits
    for name in ("all", "conv", "dyn", "doa", "aoa", "wdoa", "vote", "hybrid"):
        plan = STRATEGIES[name](w, budget, link)
        if plan.fits:
            assert auto.predicted_step_seconds <= plan.predicted_step_seconds * (1 + 1e-12)


def test_auto_is_deterministic():
    w = random_workload(8, 5)
    assert make_plan(w, 0.5, "pcie3").to_json() == make_plan(w, 0.5, "pcie3").to_json()


def test_blocks_that_forbid_actions_are_kept():
    blocks = [Block(f"b{i}", 100, 1.0, 2.0, input_bytes=10) for i in range(3)]
    blocks.append(Block("fixed", 500, 1.0, 2.0, swappable=False, recomputable=False))
    w = Workload(tuple(blocks))
    for name in STRATEGIES:
        plan = STRATEGIES[name](w, 700, FAST)
        assert plan.action("fixed").kind == "keep", name


def test_make_plan_budgets():
    w = chain([100] * 4, weight_bytes=100)
    assert make_plan(w, 0.75, FAST).budget_bytes == 375
    assert make_plan(w, 375, FAST).budget_bytes == 375
    assert make_plan(w, "375B", FAST, strategy="all").budget_bytes == 375
    assert make_plan(w, "100%", FAST).counts()["keep"] == 4


def test_make_plan_refuses_what_no_plan_meets():
    w = Workload(tuple(Block(f"b{i}", 100, 1.0, 2.0) for i in range(4)), weight_bytes=100)
    lowest = smallest_budget(w, FAST)
    assert lowest == 200 and make_plan(w, lowest, FAST).fits
    with pytest.raises(ValueError) as info:
        make_plan(w, lowest - 1, FAST)
    assert str(info.value) == (
        "No plan meets budget=199 (199 B). The smallest feasible budget is 200 B "
        "(0.4 of the baseline peak, 500 B), from the most memory-saving plan found."
    )


def test_a_strategy_that_cannot_meet_a_budget_auto_can():
    w = resnet_like()
    with pytest.raises(ValueError, match="Strategy 'all' cannot meet budget=0.5 .*'auto' can"):
        make_plan(w, 0.5, "pcie3", strategy="all")
    assert make_plan(w, 0.5, "pcie3").fits


def test_make_plan_names_bad_arguments():
    w = chain([100] * 2)
    with pytest.raises(
        ValueError, match="Unknown `strategy`. Expected one of 'all'.*strategy='lru'"
    ):
        make_plan(w, 0.5, FAST, strategy="lru")
    with pytest.raises(ValueError, match="Unknown `link`.*link='pcie9'"):
        make_plan(w, 0.5, "pcie9")
    with pytest.raises(ValueError, match="`budget` must be in \\(0, 1\\] or a byte count"):
        make_plan(w, 1.5, FAST)


def test_exhaustive_through_make_plan():
    w = random_workload(6, 2)
    assert make_plan(w, 0.7, "pcie3", strategy="exhaustive").strategy == "exhaustive"
    with pytest.raises(
        ValueError, match="at most max_blocks=16 blocks. Received: a workload of 17"
    ):
        make_plan(random_workload(17, 0), 0.7, "pcie3", strategy="exhaustive")


def test_a_thousand_blocks():
    w = random_workload(1000, 7)
    plan = make_plan(w, 0.5, "pcie3")
    assert plan.fits and len(plan.actions) == 1000


def test_slots_a_strategy_holds_stay_on_the_device():
    import dataclasses

    from kswap.planning import Plan

    work = resnet_like(batch=8, size=64)
    link = Link(12e9, 12e9)
    lowest = smallest_budget(work, link)
    fixed = dataclasses.replace(work, optimizer_movable=False)
    # moving the slots is what the tightest plan takes; held on the device, it
    # cannot go as low, and no strategy puts them on the host
    assert lowest < smallest_budget(fixed, link)
    budget = smallest_budget(fixed, link)
    for name in STRATEGIES:
        try:
            plan = make_plan(fixed, budget, link, strategy=name)
        except ValueError:
            continue  # this strategy does not reach the budget
        assert plan.optimizer_state == "device", name
    assert make_plan(work, lowest, link).optimizer_state == "host"
    # it survives JSON and takes part in the fingerprint
    again = Workload.from_json(fixed.to_json())
    assert again.optimizer_movable is False and again == fixed
    assert fixed.fingerprint() != work.fingerprint()
    assert Workload.from_json(work.to_json()).fingerprint() == work.fingerprint()
    with pytest.raises(ValueError, match="optimizer_movable=False"):
        Plan.evaluate(fixed, "keep", link, optimizer_state="host")
    with pytest.raises(ValueError, match="optimizer_movable"):
        Workload(blocks=(), optimizer_movable="no")
