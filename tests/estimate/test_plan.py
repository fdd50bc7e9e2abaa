"""kswap.plan: the plan of a static estimate, and its errors."""

import pytest

import kswap
from kswap.planning import Plan, simulate
from tests.estimate.models import deep_mlp


@pytest.fixture(scope="module")
def model():
    m = deep_mlp()
    m.compile("adam", "mse")
    return m


def test_plan_meets_the_budget_and_records_the_baseline(model):
    work = kswap.estimate_workload(model, 2048, device="k40")
    baseline = simulate(work, "keep", "pcie3")
    plan = kswap.plan(model, batch_size=2048, budget=0.8, device="k40")
    assert isinstance(plan, Plan) and plan.fits and plan.link.name == "pcie3"  # the K40's link
    assert plan.baseline_peak_bytes == baseline.peak_bytes
    assert plan.baseline_step_seconds == pytest.approx(baseline.step_seconds)
    assert plan.budget_bytes == int(0.8 * baseline.peak_bytes) >= plan.predicted_peak_bytes
    assert plan.blocks[:2] == ("d0", "r0") and len(plan.blocks) == 9
    assert plan.counts()["keep"] < 9  # 0.8 needs evictions
    plan.check(work)  # made for that workload
    # no budget: the device's memory, which everything fits
    roomy = kswap.plan(model, batch_size=2048, device="h100", link="pcie5")
    assert roomy.budget_bytes == 80 * 2**30 and roomy.counts()["keep"] == 9


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"budget": -2}, r"^`budget` must be in \(0, 1\] or a byte count. Received: budget=-2$"),
        ({"budget": 0}, r"Received: budget=0$"),
        ({"budget": 1.5}, r"Received: budget=1.5$"),
        ({"budget": "lots"}, r"`budget` must be a fraction .* Received: budget='lots'$"),
        ({"budget": 0.5, "strategy": "best"}, r"Unknown `strategy`.*Received: strategy='best'$"),
        ({"budget": 0.5, "link": "pcie9"}, r"Unknown `link`.*Received: link='pcie9'$"),
        ({"budget": 0.5, "device": "tpu"}, r"Unknown `device`.*Received: device='tpu'$"),
        ({"device": "cpu"}, r"`budget` is needed: device 'cpu' .*Received: budget=None"),
        ({"budget": 0.5, "batch_size": -1}, r"Received: batch_size=-1$"),
    ],
)
def test_bad_arguments(model, kwargs, message):
    kwargs = {"batch_size": 64, "device": "k40", **kwargs}
    with pytest.raises(ValueError, match=message):
        kswap.plan(model, **kwargs)


def test_a_budget_below_the_smallest_feasible_one_names_it(model):
    with pytest.raises(ValueError) as error:
        kswap.plan(model, batch_size=64, budget="1KiB", device="k40")
    text = str(error.value)
    assert text.startswith("No plan meets budget='1KiB' (1 KiB). The smallest feasible budget is")
    smallest = kswap.planning.smallest_budget(
        kswap.estimate_workload(model, 64, device="k40"), "pcie3"
    )
    assert kswap.planning.budget.format_bytes(smallest) in text
    # that budget is met
    assert kswap.plan(model, batch_size=64, budget=smallest, device="k40").fits
