"""kswap.AutoTune: arguments, refusals, and the closed loop inside fit."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import kswap
from kswap.tuning import AutoTune, current_actions
from tests.scripts import ROOT, script_env

STEPS = 8
WIDTH = 128
BATCH = 2048


def _model(seed=0):
    """Activations dominate: weights and Adam's slots are 0.6 MiB, one layer's output 1 MiB."""
    keras.utils.set_random_seed(seed)
    inp = keras.Input((WIDTH,))
    h = inp
    for i in range(6):
        h = keras.layers.Dense(WIDTH, name=f"d{i}")(h)
        h = keras.layers.Activation("tanh", name=f"a{i}")(h)
    h = keras.layers.Dropout(0.1, seed=3, name="drop")(h)
    out = keras.layers.Dense(4, activation="softmax", name="out")(h)
    model = keras.Model(inp, out, name="mlp")
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


def _data(n=BATCH * STEPS):
    rng = np.random.default_rng(0)
    return rng.random((n, WIDTH), dtype=np.float32), rng.integers(0, 4, n)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"budget": -2}, r"`budget` must be in \(0, 1\] or a byte count. Received: budget=-2"),
        ({"budget": 1.5}, r"`budget` must be in \(0, 1\].*Received: budget=1.5"),
        ({"budget": "lots"}, r"`budget`.*Received: budget='lots'"),
        ({"strategy": "best"}, r"`strategy` must be one of .*Received: strategy='best'"),
        ({"link": "usb2"}, r"link.*'usb2'"),
        (
            {"warmup_steps": -1},
            r"`warmup_steps` must be an integer >= 0. Received: warmup_steps=-1",
        ),
        (
            {"timed_steps": 1.5},
            r"`timed_steps` must be an integer >= 0. Received: timed_steps=1.5",
        ),
        (
            {"profile_steps": 0},
            r"`profile_steps` must be an integer >= 1. Received: profile_steps=0",
        ),
        ({"max_rounds": 1.5}, r"`max_rounds` must be an integer >= 1. Received: max_rounds=1.5"),
        ({"verbose": 3}, r"`verbose` must be 0, 1 or 2. Received: verbose=3"),
        ({"headroom": 1.0}, r"`headroom` must be a fraction in \[0, 1\). Received: headroom=1.0"),
        ({"headroom": -0.1}, r"`headroom` must be a fraction in \[0, 1\). Received: headroom=-0.1"),
        ({"headroom": "5%"}, r"`headroom` must be a fraction in \[0, 1\). Received: headroom='5%'"),
        ({"logdir": 3}, r"`logdir` must be a path or None. Received: logdir=3"),
        ({"batch_size": 0}, r"`batch_size` must be an integer >= 1. Received: batch_size=0"),
        ({"device": "tpu9"}, r"device.*'tpu9'"),
    ],
)
def test_bad_arguments_are_refused_in_init(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AutoTune(**{"budget": 0.5, **kwargs})


def test_keras_keeps_dispatching_steps_asynchronously(monkeypatch):
    # Keras dispatches batch-end hooks in a thread where its backend allows it
    # (not TensorFlow's today); a callback with a batch-end hook turns that off
    from keras.src.callbacks import callback_list

    monkeypatch.setattr(callback_list.backend, "IS_THREAD_SAFE", True)
    assert keras.callbacks.CallbackList([AutoTune(0.5)])._async_train
    assert not keras.callbacks.CallbackList([keras.callbacks.ProgbarLogger()])._async_train


def test_a_plain_model_is_refused_with_the_line_to_add_and_nothing_trains():
    model = _model()
    before = [w.numpy().copy() for w in model.weights]
    with pytest.raises(ValueError, match=r"model = kswap.OffloadingModel\(model\)"):
        model.fit(*_data(), batch_size=BATCH, callbacks=[AutoTune(0.5)], verbose=0)
    for a, w in zip(before, model.weights, strict=True):
        np.testing.assert_array_equal(w.numpy(), a)


def test_a_byte_budget_under_the_weights_and_gradients_is_refused_before_the_first_step():
    off = kswap.OffloadingModel(_model())
    before = [w.numpy().copy() for w in off.weights]
    floor = 2 * sum(int(np.prod(w.shape)) * 4 for w in off.trainable_weights)
    with pytest.raises(ValueError, match=r"No plan meets `budget`=.*weights and their gradients"):
        off.fit(*_data(), batch_size=BATCH, callbacks=[AutoTune(floor - 1024)], verbose=0)
    for a, w in zip(before, off.weights, strict=True):
        np.testing.assert_array_equal(w.numpy(), a)
    assert off.optimizer.iterations.numpy() == 0


def test_with_the_batch_size_a_fraction_no_plan_meets_is_refused_before_the_first_step():
    off = kswap.OffloadingModel(_model())
    before = [w.numpy().copy() for w in off.weights]
    actions = current_actions(off)
    tune = AutoTune(0.01, batch_size=BATCH, verbose=0)
    with pytest.raises(
        ValueError,
        match=r"kswap.AutoTune: by the static estimate at batch_size=2048, no plan meets "
        r"budget=.*The smallest feasible budget is .* of the baseline peak.*Received: budget=",
    ):
        off.fit(*_data(), batch_size=BATCH, callbacks=[tune], verbose=0)
    for a, w in zip(before, off.weights, strict=True):
        np.testing.assert_array_equal(w.numpy(), a)
    assert off.optimizer.iterations.numpy() == 0 and current_actions(off) == actions


def test_policy_auto_starts_from_the_static_plan(capsys):
    off = kswap.OffloadingModel(_model(), policy="auto")
    # every layer wrapped, every block swapped: the safe start
    assert set(current_actions(off)) == {layer.name for layer in _model().layers[1:]}
    assert {str(a) for a in current_actions(off).values()} == {"swap"}
    tune = AutoTune(0.6, batch_size=BATCH, profile_steps=1, link="pcie4")
    # one step: the static plan is applied before it, and fit ends before a round
    off.fit(*_data(BATCH), batch_size=BATCH, callbacks=[tune], verbose=0)
    plan = tune.static_plan
    assert plan is not None and plan.fits
    assert current_actions(off) == dict(zip(plan.blocks, plan.actions, strict=True))
    assert "starts from the static plan for batch 2048 on cpu" in capsys.readouterr().out
    # 'all' is the user's choice: the static plan only checks the budget
    off_all = kswap.OffloadingModel(_model())
    tune = AutoTune(0.6, batch_size=BATCH, profile_steps=1, link="pcie4", verbose=0)
    off_all.fit(*_data(BATCH), batch_size=BATCH, callbacks=[tune], verbose=0)
    assert tune.static_plan is None
    assert {str(a) for a in current_actions(off_all).values()} == {"swap"}


def test_without_a_budget_or_a_known_capacity_it_says_so_and_changes_nothing(monkeypatch):
    monkeypatch.delenv("TF_CPU_BFC_MEM_LIMIT_IN_MB", raising=False)
    off = kswap.OffloadingModel(_model())
    before = current_actions(off)
    tune = AutoTune(verbose=0)
    with pytest.warns(UserWarning, match="no budget and knows no device capacity"):
        off.fit(*_data(BATCH * 2), batch_size=BATCH, callbacks=[tune], verbose=0)
    assert tune.done and tune.rounds == [] and current_actions(off) == before


def run_main(*args: str) -> dict:
    """Runs ``tests/tuning/autotune_main.py`` in a fresh process; its last line's JSON.

    A fresh process: TensorFlow's CPU allocator is chosen before it starts,
    and the device peak of this one counts other tests' tensors.
    """
    env = script_env()
    proc = subprocess.run(
        [sys.executable, "-m", "tests.tuning.autotune_main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_loop_plans_applies_measures_and_trains_as_the_plain_model():
    result = run_main()
    assert result["rounds"] >= 1 and result["start_peak_bytes"] > 0
    assert result["first_measured"]  # the step after the first plan was profiled
    assert result["baseline_measured"], result["baseline"]
    assert result["actions_are_the_plan"] or result["restored"]
    assert result["losses_identical"] and result["weights_identical"], result


def test_a_budget_no_plan_meets_leaves_the_model_as_it_is_and_says_the_smallest():
    off = kswap.OffloadingModel(_model())
    before = current_actions(off)
    tune = AutoTune(0.01, profile_steps=1, verbose=0, link="pcie4")
    with pytest.warns(UserWarning, match=r"leaves the model as it is: .*smallest feasible budget"):
        off.fit(*_data(BATCH * 3), batch_size=BATCH, callbacks=[tune], verbose=0)
    assert tune.done and tune.rounds == [] and current_actions(off) == before


def test_a_byte_budget_needs_no_baseline():
    # (a fractional budget's measured baseline: the closed loop's fresh process;
    # in this shared one the device peak counts other tests' tensors)
    off = kswap.OffloadingModel(_model())
    tune = AutoTune("1GiB", profile_steps=1, verbose=0, link="pcie4")
    off.fit(*_data(BATCH * 4), batch_size=BATCH, callbacks=[tune], verbose=0)
    assert tune.baseline_peak_bytes is None


def test_the_plans_times_are_scaled_to_the_steps_timed_without_the_profiler():
    from kswap.tuning.closed_loop import median_interval

    off = kswap.OffloadingModel(_model())
    tune = AutoTune("1GiB", profile_steps=1, verbose=0, link="pcie4")
    assert tune.timed_steps == 3
    off.fit(*_data(BATCH * 5), batch_size=BATCH, callbacks=[tune], verbose=0)
    work, seconds = tune.workload, tune.unprofiled_step_seconds
    assert seconds > 0
    profiled = work.metadata["profiled_step_seconds"]
    assert work.metadata["time_scale"] == pytest.approx(seconds / profiled)
    # the blocks' times, the update's and the copies' add up to the unprofiled step
    total = sum(b.forward_seconds + b.backward_seconds for b in work.blocks)
    total += work.update_seconds + work.metadata["transfer_seconds"]
    assert total == pytest.approx(seconds) and work.metadata["step_seconds"] == seconds
    # none timed: the profiled times
    tune = AutoTune("1GiB", timed_steps=0, profile_steps=1, verbose=0, link="pcie4")
    off = kswap.OffloadingModel(_model())
    off.fit(*_data(BATCH * 3), batch_size=BATCH, callbacks=[tune], verbose=0)
    assert tune.unprofiled_step_seconds is None and "time_scale" not in tune.workload.metadata
    # an epoch's end (and its validation) is no step
    assert median_interval([0.0, 1.0, None, 9.0, 9.5, 10.5]) == 1.0
    assert median_interval([0.0, None, 9.0]) is None


def test_fit_ending_before_the_baseline_is_measured_puts_the_models_actions_back():
    off = kswap.OffloadingModel(_model())
    before = current_actions(off)
    tune = AutoTune(0.9, profile_steps=1, verbose=0, link="pcie4")
    off.fit(*_data(BATCH * 3), batch_size=BATCH, callbacks=[tune], verbose=0)
    assert tune.start_peak_bytes is not None  # its first window ran, then fit ended
    assert tune.baseline_peak_bytes is None and tune.rounds == []
    assert current_actions(off) == before


def test_a_profiler_it_did_not_start_is_left_running(tmp_path):
    off = kswap.OffloadingModel(_model())
    tune = AutoTune(0.6, profile_steps=1, verbose=0, link="pcie4")
    tf.profiler.experimental.start(str(tmp_path))
    try:
        off.fit(*_data(BATCH * 3), batch_size=BATCH, callbacks=[tune], verbose=0)
        assert tune.rounds == []  # it never got the profiler
    finally:
        tf.profiler.experimental.stop()  # raises if AutoTune had stopped it


def _planning_tune(budget, headroom=0.05):
    """An AutoTune at its planning step, on a workload of four swappable blocks."""
    from kswap.planning import Block, Workload, parse_budget, simulate

    blocks = tuple(
        Block(f"b{i}", saved_bytes=8 << 20, forward_seconds=0.01, backward_seconds=0.02)
        for i in range(4)
    )
    tune = AutoTune(budget, headroom=headroom, link="pcie4", verbose=0)
    tune.workload = Workload(blocks=blocks, weight_bytes=1 << 20)
    tune._budget = parse_budget(budget)
    keep = simulate(tune.workload, "keep", tune.link).peak_bytes
    return tune, keep


def test_the_first_plan_leaves_the_headroom_free_and_the_budget_is_the_whole():
    # one block swapped peaks at 25 MiB, 0.97 of this budget: inside it, not 5% under
    budget = int(25 * 2**20 / 0.97)
    tune, _ = _planning_tune(budget)
    plan = tune._make_plan(None)
    assert tune.budget_bytes == budget
    assert plan.budget_bytes == int(budget * 0.95)
    assert plan.predicted_peak_bytes <= int(budget * 0.95) < 25 * 2**20
    # headroom=0 plans to the budget itself: one block swapped
    tune, _ = _planning_tune(budget, headroom=0)
    plan = tune._make_plan(None)
    assert plan.budget_bytes == tune.budget_bytes == budget
    assert plan.predicted_peak_bytes == 25 * 2**20
    # a fraction is of the measured baseline
    tune, keep = _planning_tune(0.8)
    tune.baseline_peak_bytes = 2 * keep
    tune._make_plan(None)
    assert tune.budget_bytes == int(0.8 * 2 * keep)


def test_where_the_headroom_is_out_of_reach_the_first_plan_is_for_the_whole_budget():
    from kswap.planning import smallest_budget

    tune, keep = _planning_tune(0.5)
    lowest = smallest_budget(tune.workload, tune.link)
    tune._budget = kswap.planning.parse_budget(lowest)  # met only by the most saving plan
    plan = tune._make_plan(None)
    assert plan.budget_bytes == tune.budget_bytes == lowest
    assert plan.predicted_peak_bytes <= lowest


def test_where_the_allocators_extra_is_out_of_reach_the_first_plan_saves_the_most():
    import dataclasses

    from kswap.planning import make_plan, smallest_budget

    # 4 blocks of 8 MiB; the allocator's blocks held 2.5 times the tensors at the
    # profiled peak, so no plan's tensors leave that extra free in 20 MiB
    budget = 20 * 2**20
    tune, _ = _planning_tune(budget, headroom=0)
    tune.workload = dataclasses.replace(tune.workload, metadata={"allocator_overhead": 1.5})
    lowest = smallest_budget(tune.workload, tune.link)
    assert lowest > budget / 2.5
    fastest = make_plan(tune.workload, budget, tune.link)
    assert fastest.predicted_peak_bytes > lowest  # within the budget, but closer to it
    plan = tune._make_plan(None)
    # the plan that comes closest to leaving the extra free, not the fastest within the budget
    assert tune.budget_bytes == budget
    assert plan.budget_bytes == lowest
    assert plan.predicted_peak_bytes == lowest


def test_a_round_a_little_over_the_budget_tightens_to_a_different_plan():
    from kswap.planning import smallest_budget
    from kswap.tuning.autotune import TIGHTEN_STEP, Round

    # 4 blocks of 8 MiB: the plans step by one swapped block (8 MiB)
    tune, keep = _planning_tune(int(40.5 * 2**20), headroom=0)
    first = tune._make_plan(None)
    last = Round(first, first.budget_bytes, measured_peak_bytes=tune.budget_bytes + 1)
    tighter = tune._tighter(last, over=1)
    # one byte over: lowered by the step at least, until the plan changes
    assert tighter.budget_bytes <= first.budget_bytes - int(TIGHTEN_STEP * tune.budget_bytes)
    assert tighter.actions != first.actions
    assert tighter.predicted_peak_bytes < first.predicted_peak_bytes
    # from the least-memory plan there is nowhere to go
    lowest = smallest_budget(tune.workload, tune.link)
    least = tune._make_plan(lowest)
    assert tune._tighter(Round(least, lowest), over=1) is None


def test_the_first_plan_leaves_the_allocators_extra_of_the_profiled_step_free():
    import dataclasses

    budget = int(40.5 * 2**20)
    tune, _ = _planning_tune(budget, headroom=0)
    assert tune.allocator_overhead == 0.0  # none recorded: the workload's own bytes
    tune.workload = dataclasses.replace(tune.workload, metadata={"allocator_overhead": 0.25})
    assert tune.allocator_overhead == 0.25
    plan = tune._make_plan(None)
    # the plan's tensors may take a fifth less, so that the allocator's blocks fit the budget
    assert tune.budget_bytes == budget
    assert plan.budget_bytes == int(budget / 1.25)
    assert plan.predicted_peak_bytes <= budget / 1.25


def _kept_steps(*steps: tuple[int, int]):
    """Profiled steps, each with one buffer that asked for ``(tensor MiB, block MiB)``."""
    from kswap.trace import Allocation, Trace

    buffers = tuple(
        Allocation(block << 20, 30 * i + 10, 30 * i + 20, requested_bytes=tensor << 20, step=i)
        for i, (tensor, block) in enumerate(steps)
    )
    windows = tuple((30 * i, 30 * i + 30) for i in range(len(steps)))
    return Trace(buffers=buffers, steps=windows, duration_ns=30 * len(steps))


def test_the_baseline_step_raises_the_allocators_extra_and_never_lowers_it():
    import dataclasses

    budget = int(40.5 * 2**20)
    tune, _ = _planning_tune(budget, headroom=0)
    tune.workload = dataclasses.replace(tune.workload, metadata={"allocator_overhead": 0.1})
    tune._learn_baseline(_kept_steps((40, 50)))  # every block kept: 25% more in blocks
    assert tune.baseline_peak_bytes == 50 << 20
    assert tune.allocator_overhead == pytest.approx(0.25)
    assert tune._make_plan(None).budget_bytes == int(budget / 1.25)
    tune._learn_baseline(_kept_steps((40, 44)))  # 10% more: the larger extra stays
    assert tune.baseline_peak_bytes == 44 << 20
    assert tune.allocator_overhead == pytest.approx(0.25)
    # two kept steps: the most of their extras, not the last step's
    tune._learn_baseline(_kept_steps((40, 60), (40, 44)))
    assert tune.allocator_overhead == pytest.approx(0.5)


def test_a_round_far_over_the_budget_tightens_by_its_measured_to_predicted_ratio():
    from kswap.tuning.autotune import Round

    tune, keep = _planning_tune(int(40.5 * 2**20))
    first = tune._make_plan(None)
    over = tune.budget_bytes // 4  # measured 1.25x the budget
    tighter = tune._tighter(Round(first, first.budget_bytes), over=over)
    ratio = first.predicted_peak_bytes / (tune.budget_bytes + over)
    assert tighter.budget_bytes <= int(tune.budget_bytes * 0.95 * ratio)
    assert tighter.budget_bytes < first.budget_bytes - over  # further than the excess alone


def test_on_a_cpu_fits_input_arrays_count_as_host_memory_not_device():
    # a GPU keeps fit's arrays in host memory; the CPU allocator that emulates the
    # device holds them too, and they are not the model's to plan
    x, y = _data(BATCH * 64)  # 64 MiB of inputs, one step's activations a few MiB
    off = kswap.OffloadingModel(_model())
    tune = AutoTune("1GiB", profile_steps=1, verbose=0, link="pcie4")
    off.fit(x, y, batch_size=BATCH, steps_per_epoch=3, callbacks=[tune], verbose=0)
    if kswap.transfer.has_gpu():
        assert tune.held_bytes == 0
        return
    assert tune.held_bytes >= x.nbytes
    assert 0 < tune.start_peak_bytes < x.nbytes // 4, (tune.start_peak_bytes, x.nbytes)


def test_widening_working_sets_only_leaves_saved_and_persistent_bytes():
    import dataclasses

    from kswap.tuning.rounds import widen

    tune, _ = _planning_tune(int(40.5 * 2**20), headroom=0)
    work = tune.workload
    b0, b1 = work.blocks[:2]
    # the other step: b0's saved tensor counted in b1 (its last reader there),
    # b1's backward 3 MiB larger (an update's temporaries), 1 MiB more other bytes
    other = dataclasses.replace(
        work,
        blocks=(
            dataclasses.replace(b0, saved_bytes=0),
            dataclasses.replace(
                b1, saved_bytes=b0.saved_bytes + b1.saved_bytes, backward_bytes=3 << 20
            ),
            *work.blocks[2:],
        ),
        other_bytes=1 << 20,
        metadata={"allocator_overhead": 0.2},
    )
    env = widen(work, other, working_sets_only=True)
    assert [b.saved_bytes for b in env.blocks] == [b.saved_bytes for b in work.blocks]
    assert env.blocks[1].backward_bytes == 3 << 20
    assert env.other_bytes == work.other_bytes and env.saved_bytes == work.saved_bytes
    assert env.metadata["allocator_overhead"] == 0.2
    # all bytes: the shifted tensor still counts once, in b0 where the workload had it
    wide = widen(work, other)
    assert wide.saved_bytes == work.saved_bytes and wide.blocks[0].saved_bytes == b0.saved_bytes
    assert wide.other_bytes == 1 << 20 and wide.blocks[1].backward_bytes == 3 << 20
    # a step that saved 1 MiB more in all: the total grows by that, not by the shift too
    more = dataclasses.replace(
        other,
        blocks=(
            other.blocks[0],
            dataclasses.replace(
                other.blocks[1], saved_bytes=other.blocks[1].saved_bytes + (1 << 20)
            ),
            *other.blocks[2:],
        ),
    )
    assert widen(work, more).saved_bytes == work.saved_bytes + (1 << 20)


def test_the_window_workload_holds_the_most_any_profiled_step_held():
    from kswap.profiler.workload import workload_from_trace
    from kswap.tuning.autotune import window_workload

    model = kswap.OffloadingModel(_model())
    x, y = _data(3 * BATCH)
    trace = kswap.profile(model, x, y, steps=3, batch_size=BATCH)
    steps = [workload_from_trace(trace, model, step=s) for s in range(3)]
    window = window_workload(trace, model)
    last = steps[-1]
    for i, b in enumerate(window.blocks):
        for f in ("forward_bytes", "backward_bytes", "keep_backward_bytes"):
            assert getattr(b, f) == max(getattr(s.blocks[i], f) for s in steps), (b.name, f)
        assert b.saved_bytes == last.blocks[i].saved_bytes
        assert b.backward_seconds == last.blocks[i].backward_seconds
    assert window.other_bytes == last.other_bytes
    extras = [s.metadata["allocator_overhead"] for s in steps]
    assert window.metadata["allocator_overhead"] == max(extras)


def test_a_round_over_the_budget_widens_the_workload_by_what_its_step_held():
    import dataclasses

    from kswap.planning import simulate
    from kswap.tuning.rounds import Round, tighter_plan, widen

    tune, _ = _planning_tune(int(40.5 * 2**20), headroom=0)
    first = tune._make_plan(None)
    # the measured step's b3 backward held 12 MiB the profiled one did not show
    b3 = tune.workload.blocks[3]
    wider = dataclasses.replace(b3, backward_bytes=b3.backward_bytes + (12 << 20))
    measured = dataclasses.replace(
        tune.workload, blocks=(*tune.workload.blocks[:3], wider), other_bytes=1 << 20
    )
    widened = widen(tune.workload, measured)
    assert widened.blocks[3].backward_bytes == wider.backward_bytes
    assert widened.blocks[:3] == tune.workload.blocks[:3] and widened.other_bytes == 1 << 20
    assert widen(measured, tune.workload) == widened  # the larger of each, either way
    again = simulate(widened, first, tune.link).peak_bytes
    assert again > first.predicted_peak_bytes
    # the next plan is made for the widened workload, and fits the budget there
    over = again - tune.budget_bytes
    tighter = tighter_plan(
        widened, Round(first, first.budget_bytes), tune.budget_bytes, over, tune.link
    )
    assert tighter is not None and tighter.actions != first.actions
    assert simulate(widened, tighter, tune.link).peak_bytes <= tune.budget_bytes


def test_where_no_lower_target_has_a_plan_the_most_saving_one_is_next():
    import dataclasses

    from kswap.planning import simulate, smallest_budget
    from kswap.tuning.rounds import Round, widen

    tune, _ = _planning_tune(int(25 * 2**20 / 0.97), headroom=0)
    first = tune._make_plan(None)
    assert first.counts()["swap"] == 1
    measured = tune.workload
    # another step held a weight update's temporaries beside its backward: widened,
    # the workload's floor is the first plan's target, so no lower target has a plan
    floor = smallest_budget(measured, tune.link)
    other = dataclasses.replace(measured, other_bytes=first.budget_bytes - floor + (1 << 20))
    tune.workload = widen(measured, other)
    lowest = smallest_budget(tune.workload, tune.link)
    assert lowest >= first.budget_bytes
    last = Round(first, first.budget_bytes)
    over = 2 << 20  # the measured step's allocator blocks over the budget
    # the most memory-saving plan of the widened workload
    saving = tune._tighter(last, over)
    assert saving is not None and saving.actions != first.actions
    assert simulate(tune.workload, saving, tune.link).peak_bytes == lowest
    # where that was the last plan already, there is none
    assert tune._tighter(Round(saving, first.budget_bytes), over) is None
