"""Per-block actions and plans applied to an offloaded model: exact, and what each keeps."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from kswap import transfer
from kswap.layers import Offload
from kswap.planning import Link, Plan
from kswap.planning.actions import Action
from kswap.tuning import apply_plan, current_actions, wrappers
from tests.layers.helpers import (
    assert_same_state,
    build,
    compile_,
    data,
    onednn_enabled,
    trained_references,
)

#: Every wrapper gets the action, or (``mixed``) the actions in turn.
ACTIONS = {
    "keep": ["keep"],
    "recompute": ["recompute"],
    "recompute_host": ["recompute:host"],
    "mixed": ["keep", "swap", "recompute", "recompute:host:0", "swap:0"],
}
#: The actions each test model trains with (``swap`` and ``swap:0`` alone are
#: tests/layers/test_exactness.py's; ``keep`` alone is the plain layer).
CASES = {
    "sequential": ["keep", "recompute", "recompute_host", "mixed"],
    "residual": ["recompute", "recompute_host", "mixed"],
    "nested": ["mixed"],
}


def _fit(model, x, y, epochs=1):
    keras.utils.set_random_seed(5)
    return model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0).history["loss"]


@pytest.fixture(scope="module")
def reference():
    return trained_references(_fit)


def _planned(model, forms):
    names = sorted(wrappers(model))
    return {name: forms[i % len(forms)] for i, name in enumerate(names)}


#: Every block recomputed from host copies of its inputs: a host copy is one
#: more reader of the tensor it copies, and Grappler merges a product with a
#: constant into the product before it (``(h * h) * 1.25`` from Multiply then
#: Dropout into ``h * (h * 1.25)``) or sums a tree of additions in one only
#: where an intermediate has one reader. The copies of Dropout's and Add's
#: inputs in ``residual`` block that, and the plain model's rounding differs:
#: 1.5e-8 in a weight after 4 steps of SGD, 1.9e-4 with Adam (which scales
#: near-zero gradients up), where switching the remapper off changes nothing;
#: with constant folding and the arithmetic optimizer off it is exact.
_HOST_COPIES_READ = {("residual", "recompute_host")}

#: Dense with exact GELU (``d1`` of ``sequential``) recomputed: the forward's
#: pre-activation is then read by nothing but the GELU, so where TensorFlow
#: runs oneDNN the remapper fuses ``MatMul``, ``BiasAdd`` and the GELU into one
#: ``_FusedMatMul`` (``GeluExact``), which rounds differently from the ops the
#: plain model runs (its backward reads the pre-activation, so nothing fuses
#: there): gradients 2e-8 apart at the first step (absolute), while switching
#: the remapper off changes nothing in the plain model and makes the
#: recomputed one bit-identical. Without oneDNN every case is bit-identical.
_GELU_FUSED_WHEN_RECOMPUTED = {
    ("sequential", "recompute"),
    ("sequential", "recompute_host"),
    ("sequential", "mixed"),
}


def _marks(kind, actions):
    if (kind, actions) in _HOST_COPIES_READ:
        return [pytest.mark.xfail(strict=True, reason="host copies block Grappler's folding")]
    if (kind, actions) in _GELU_FUSED_WHEN_RECOMPUTED and onednn_enabled():
        return [pytest.mark.xfail(strict=True, reason="oneDNN fuses a recomputed Dense+GELU")]
    return []


@pytest.mark.parametrize(
    "kind, actions",
    [
        pytest.param(kind, actions, marks=_marks(kind, actions))
        for kind, cases in CASES.items()
        for actions in cases
    ],
)
def test_every_action_trains_bit_identically(kind, actions, reference):
    ref, h_ref = reference(kind)

    def trained():
        off = kswap.OffloadingModel(compile_(build(kind)))  # its optimizer built
        apply_plan(off, _planned(off, ACTIONS[actions]))
        return off, _fit(off, *data(ref))

    off, h_off = trained()
    if h_off != h_ref and any(a.startswith("recompute") for a in ACTIONS[actions]):
        # a recomputed BatchNormalization is not bit-identical in every run (limits.md):
        # a deviation that does not come back in a second run is that, one that does fails
        off, h_again = trained()
        if h_again == h_ref:
            pytest.xfail(f"run-to-run rounding of a recomputed block: {h_off} vs {h_ref}")
        h_off = h_again
    np.testing.assert_array_equal(h_off, h_ref)
    assert_same_state(ref, off)  # BatchNormalization's statistics updated once
    assert all(not w.fallbacks for w in wrappers(off).values())


def _step_graph(model, x, y):
    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))
        return tape.gradient(loss, [v.value for v in model.trainable_variables])

    return step.get_concrete_function(tf.constant(x[:8]), tf.constant(y[:8])).graph


def _host_copies(graph):
    return [
        op
        for op in graph.get_operations()
        if op.name.split("/")[0].startswith(transfer.HOST_SCOPE)
        or f"/{transfer.HOST_SCOPE}/" in op.name
    ]


def _rerun_convs(graph):
    """Forward convolutions built in backward: recomputed blocks."""
    return [
        op for op in graph.get_operations() if op.type == "Conv2D" and "gradient_tape/" in op.name
    ]


@pytest.mark.parametrize(
    "action, copies, reruns",
    [
        ("swap", True, False),
        ("keep", False, False),
        ("recompute", False, True),
        ("recompute:host", True, True),
    ],
)
def test_each_action_keeps_what_it_says(action, copies, reruns):
    model = kswap.OffloadingModel(compile_(build("residual")), policy={"c1": action, "c2": action})
    graph = _step_graph(model, *data(model))
    assert bool(_host_copies(graph)) == copies
    assert bool(_rerun_convs(graph)) == reruns


def test_recompute_on_the_host_copies_only_the_block_inputs():
    model = kswap.OffloadingModel(compile_(build("residual")), policy={"c2": "recompute:host"})
    graph = _step_graph(model, *data(model))
    swapped = model.get_layer("c2")
    (copy,) = [op for op in _host_copies(graph) if op.type != "Const"][:1]
    # the conv's input (the concatenation's other half) is the one tensor copied to the host
    assert copy.inputs[0].shape.as_list()[1:] == [10, 10, 8], copy.inputs[0]
    assert swapped.action == Action("recompute", checkpoint="host")


def test_a_plan_applied_between_fits_retraces_and_stays_exact(reference):
    ref = compile_(build("sequential"))
    x, y = data(ref)
    h_ref = _fit(ref, x, y, epochs=3)
    off = kswap.OffloadingModel(compile_(build("sequential")))
    h_off = _fit(off, x, y)
    before = apply_plan(off, {"c1": "recompute:host", "d1": "keep", "sep": "swap:0"})
    assert off.train_function is None  # traced again with the new actions
    h_off += _fit(off, x, y)
    apply_plan(off, before)
    assert {str(a) for a in current_actions(off).values()} == {"swap"}
    h_off += _fit(off, x, y)
    np.testing.assert_allclose(h_off, h_ref, rtol=0, atol=0)
    assert_same_state(ref, off)


def test_a_plan_object_sets_actions_and_the_optimizer_tier():
    model = kswap.OffloadingModel(compile_(build("nested")))
    model.optimizer.build(model.trainable_variables)
    names = tuple(sorted(wrappers(model)))
    plan = Plan(
        blocks=names,
        actions=tuple("recompute" if i % 2 else "swap:0" for i in range(len(names))),
        link=Link(1e9, 1e9),
        predicted_peak_bytes=1,
        predicted_step_seconds=1.0,
        baseline_peak_bytes=2,
        baseline_step_seconds=1.0,
        workload_fingerprint="x",
        optimizer_state="host",
    )
    apply_plan(model, plan)
    from kswap.optimizer_state import host_variables

    assert host_variables(model.optimizer)
    assert {n: str(a) for n, a in current_actions(model).items()} == {
        n: str(a) for n, a in zip(plan.blocks, plan.actions, strict=True)
    }
    again = kswap.OffloadingModel(compile_(build("nested")), policy=plan)
    assert {n: str(a) for n, a in current_actions(again).items()} == {
        n: str(a) for n, a in zip(plan.blocks, plan.actions, strict=True)
    }


def test_actions_survive_saving(tmp_path):
    model = kswap.OffloadingModel(
        compile_(build("sequential")), policy={"c1": "recompute:host:2", "d1": "keep"}
    )
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert {n: str(a) for n, a in current_actions(loaded).items()} == {
        "c1": "recompute:host:2",
        "d1": "keep",
    }


@pytest.mark.parametrize(
    "plan, match",
    [
        ({"nope": "swap"}, r"`plan` names layers that are not offloaded in `model`: \['nope'\]"),
        ({"c1": "offload"}, r"`action` must be .*Received: action='offload'"),
        (3, r"`plan` must be a kswap.planning.Plan.*Received: plan=3"),
        ({1: "swap"}, r"`policy` as a mapping must map layer names"),
    ],
)
def test_bad_plans_are_refused_and_nothing_changes(plan, match):
    model = kswap.OffloadingModel(compile_(build("sequential")))
    before = current_actions(model)
    with pytest.raises(ValueError, match=match):
        apply_plan(model, plan)
    assert current_actions(model) == before


def test_a_plain_model_says_what_to_add():
    with pytest.raises(ValueError, match=r"kswap.OffloadingModel\(model\)"):
        apply_plan(compile_(build("sequential")), "swap")


def test_wrapper_validates_its_action():
    with pytest.raises(ValueError, match="Received: action='later'"):
        Offload(keras.layers.Dense(2), action="later")
    w = Offload(keras.layers.Dense(2), prefetch=3, action="recompute:host")
    assert (w.action, w.prefetch) == (Action("recompute", 3, "host"), 3)


def test_a_nested_models_layers_are_named_by_path_as_a_trace_names_them():
    inner_in = keras.Input((8,))
    inner = keras.Model(inner_in, keras.layers.Dense(8, name="d_in")(inner_in), name="inner")
    x = keras.Input((8,))
    model = keras.Model(x, keras.layers.Dense(2, name="head")(inner(x)), name="outer")
    off = kswap.OffloadingModel(model)
    apply_plan(off, {"inner/d_in": "recompute", "head": "swap:0"})
    assert str(current_actions(off)["d_in"]) == "recompute"
    assert off.get_layer("head").prefetch == 0
    with pytest.raises(ValueError, match=r"not offloaded in `model`: \['nope'\]"):
        apply_plan(off, {"inner/nope": "keep"})
    # and so does a policy given when offloading (AutoTune's plan, saved and reused)
    planned = kswap.OffloadingModel(model, policy={"inner/d_in": "recompute"})
    assert str(current_actions(planned)["d_in"]) == "recompute"
    assert "head" not in current_actions(planned)
