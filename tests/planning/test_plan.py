"""Plan: what it records, its figures, and its validated JSON."""

import json

import pytest

from kswap.planning import Action, Block, Link, Plan, Workload

LINK = Link(100.0, 100.0, name="test")


def workload() -> Workload:
    blocks = tuple(Block(f"b{i}", 100, 1.0, 2.0, input_bytes=10, kind="conv") for i in range(3))
    return Workload(blocks, weight_bytes=50, optimizer_bytes=40, name="three")


def test_evaluate_records_the_prediction_and_its_inputs():
    w = workload()
    plan = Plan.evaluate(
        w,
        ["swap", "recompute:host", "keep"],
        LINK,
        optimizer_state="host",
        strategy="manual",
        budget_bytes=300,
    )
    assert plan.blocks == ("b0", "b1", "b2")
    assert plan.actions == (Action("swap"), Action("recompute", 1, "host"), Action("keep"))
    assert (plan.baseline_peak_bytes, plan.baseline_step_seconds) == (390, 9.0)
    assert plan.predicted_peak_bytes < plan.baseline_peak_bytes
    assert plan.swapped_bytes == 100 + 10 + 40 and plan.recomputed_bytes == 100
    assert plan.workload_fingerprint == w.fingerprint() and plan.workload_name == "three"
    assert plan.link == LINK and plan.optimizer_state == "host" and plan.budget_bytes == 300
    assert plan.fits == (plan.predicted_peak_bytes <= 300)
    assert plan.counts() == {"keep": 1, "swap": 1, "recompute": 1}
    assert plan.action("b1").checkpoint == "host"
    assert plan.slowdown == plan.predicted_step_seconds / 9.0
    assert plan.saving == 1 - plan.predicted_peak_bytes / 390
    plan.check(w)


def test_check_and_lookups_fail_clearly():
    plan = Plan.evaluate(workload(), "keep", LINK)
    other = Workload((Block("b0", 1, 1, 1),))
    with pytest.raises(ValueError, match="The plan was made for another workload"):
        plan.check(other)
    with pytest.raises(ValueError, match="The plan has no block named 'x'"):
        plan.action("x")
    assert plan.fits  # no budget


def test_table():
    text = Plan.evaluate(workload(), ["swap:0", "keep", "recompute"], LINK).table(workload())
    assert text.splitlines() == [
        "block  kind  saved bytes  action",
        "b0     conv          100  swap:0",
        "b1     conv          100  keep",
        "b2     conv          100  recompute",
    ]
    assert Plan.evaluate(workload(), "keep", LINK).table().splitlines()[1].split() == ["b0", "keep"]


def test_json_round_trip(tmp_path):
    plan = Plan.evaluate(workload(), ["swap:2", "keep", "recompute"], "pcie4", budget_bytes=10**3)
    assert Plan.from_json(plan.to_json()) == plan
    path = tmp_path / "plan.json"
    plan.to_json(path)
    assert Plan.from_json(path) == plan
    data = json.loads(plan.to_json())
    for key in (
        "baseline_peak_bytes",
        "predicted_peak_bytes",
        "baseline_step_seconds",
        "predicted_step_seconds",
        "actions",
    ):
        assert key in data
    assert data["actions"] == ["swap:2", "keep", "recompute"] and data["format"] == "kswap.plan/1"


def _payload(**changes):
    data = json.loads(Plan.evaluate(workload(), "keep", LINK).to_json())
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.parametrize(
    "source, message",
    [
        ("not json at all", "Not a kswap plan: the text is not valid JSON"),
        ("missing/plan.json", "Not a kswap plan: there is no file 'missing/plan.json'"),
        ('"a string"', "Not a kswap plan: expected a JSON object. Received: str"),
        ("[]", "expected a JSON object. Received: list"),
        ('{"format": "kswap.workload/1"}', "Not a kswap plan \\(expected format 'kswap.plan/1'\\)"),
        ({"format": "kswap.plan/1", "blocks": []}, "missing field\\(s\\) actions, link, "),
        (_payload(actions=["keep", "fly", "keep"]), "`action` must be 'keep'"),
        (_payload(actions=["keep"]), "`actions` must hold one action per block \\(3\\)"),
        (_payload(actions="keep"), "`actions` must be a list"),
        (_payload(blocks=[1, 2, 3]), "`blocks` must be block names"),
        (_payload(link="pcie3"), "Not a link: expected a JSON object"),
        (_payload(link={"h2d_bytes_per_s": 1}), "Not a link: missing field"),
        (_payload(predicted_peak_bytes=-1), "`predicted_peak_bytes` must be an integer >= 0"),
        (_payload(predicted_step_seconds="fast"), "`predicted_step_seconds` must be a number"),
        (_payload(optimizer_state="disk"), "`optimizer_state` must be one of"),
        (_payload(budget_bytes=1.5), "`budget_bytes` must be an integer >= 0"),
        (_payload(strategy=3), "`strategy` must be a string"),
    ],
)
def test_from_json_errors_are_one_line_value_errors(source, message):
    with pytest.raises(ValueError, match=message) as info:
        Plan.from_json(source)
    assert "\n" not in str(info.value)
