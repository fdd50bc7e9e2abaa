"""The simulator on hand-made workloads with known answers."""

import dataclasses
import random

import pytest

from kswap.planning import Block, Link, Plan, Workload, simulate
from kswap.planning._engine import Engine, code_of
from kswap.planning._synthetic import random_workload
from kswap.planning.simulate import resolve_actions

LINK = Link(100.0, 100.0)  # 100 bytes/s each way: a 100-byte copy takes 1 s


def chain(*blocks, **kwargs) -> Workload:
    return Workload(tuple(Block(f"b{i}", *b) for i, b in enumerate(blocks)), **kwargs)


def test_keep_everything():
    w = chain((100, 1.0, 2.0), (50, 1.0, 2.0), weight_bytes=10, optimizer_bytes=20)
    sim = simulate(w, "keep", LINK)
    assert sim.step_seconds == 6.0
    assert sim.peak_bytes == 180 and sim.peak_time == 1.0
    assert sim.bytes_at(-1) == 30 and sim.bytes_at(0.5) == 130 and sim.bytes_at(5) == 130
    assert sim.busy("d2h") == () and sim.busy("h2d") == ()
    assert [i.what for i in sim.busy("compute")] == ["forward", "forward", "backward", "backward"]


def test_weight_gradients_are_held_from_their_blocks_backward_to_the_end():
    blocks = (
        Block("b0", 100, 1.0, 2.0, gradient_bytes=7),
        Block("b1", 50, 1.0, 2.0, backward_bytes=30, gradient_bytes=5),
    )
    sim = simulate(Workload(blocks, weight_bytes=10, gradient_bytes=1), "keep", LINK)
    # backward of b1 (2-4 s): 11 + 150 + 30 + 5; of b0 (4-6 s): 11 + 100 + 5 + 7
    assert sim.bytes_at(3) == 196 and sim.bytes_at(5) == 123
    assert sim.bytes_at(7) == 23 and sim.peak_bytes == 196
    again = Workload.from_json(Workload(blocks).to_json())
    assert again.blocks[0].gradient_bytes == 7


def test_a_swap_that_hides_costs_no_time():
    # b0's copy out (1 s) runs under b1's forward, its copy back under b1's backward
    w = chain((100, 1.0, 2.0), (100, 1.0, 2.0), (100, 1.0, 2.0))
    keep, swap = simulate(w, "keep", LINK), simulate(w, ["swap", "keep", "keep"], LINK)
    assert swap.step_seconds == keep.step_seconds == 9.0
    assert keep.peak_bytes == 300 and swap.peak_bytes == 200
    (out,), (back,) = swap.busy("d2h"), swap.busy("h2d")
    assert (out.start, out.end, out.block) == (1.0, 2.0, "b0")
    # prefetch 1: b0 comes back when b1's backward may start (b2's has ended)
    assert (back.start, back.end) == (5.0, 6.0)


def test_a_swap_that_does_not_hide_costs_exactly_the_exposed_part():
    # a 300-byte copy: out hides under b1's 4 s forward, back (3 s) under b1's 2 s backward
    w = chain((300, 4.0, 5.0), (10, 4.0, 2.0))
    keep, swap = simulate(w, "keep", LINK), simulate(w, ["swap", "keep"], LINK)
    assert swap.step_seconds - keep.step_seconds == pytest.approx(3.0 - 2.0)
    back = swap.busy("h2d")[0]
    assert (back.start, back.end) == (8.0, 11.0)
    assert [i for i in swap.busy("compute") if i.block == "b0" and i.what == "backward"][
        0
    ].start == 11


def test_prefetch_zero_copies_back_after_the_previous_backward():
    w = chain((100, 1.0, 2.0), (100, 1.0, 2.0), (100, 1.0, 2.0))
    sim = simulate(w, ["swap:0", "keep", "keep"], LINK)
    assert sim.step_seconds == 10.0  # the whole 1 s copy is exposed
    assert (sim.busy("h2d")[0].start, sim.busy("h2d")[0].end) == (7.0, 8.0)


def test_latency_is_paid_per_copy():
    w = chain((100, 1.0, 2.0), (100, 1.0, 2.0))
    sim = simulate(w, ["swap:0", "keep"], Link(100.0, 100.0, latency_s=0.25))
    assert sim.step_seconds == 6.0 + 1.25
    assert sim.busy("d2h")[0].end - sim.busy("d2h")[0].start == 1.25


def test_copies_back_share_one_stream_in_the_order_they_are_ready():
    w = chain((200, 1.0, 1.0), (200, 1.0, 1.0), (10, 1.0, 1.0))
    sim = simulate(w, ["swap", "swap", "keep"], LINK)
    # b0's copy out ends at 3, b1's at 5; b0's copy back is ready at 4 (b2's backward
    # has ended), before b1's: it goes first and b1's backward waits for both
    backs = sim.busy("h2d")
    assert [(b.block, b.start, b.end) for b in backs] == [("b0", 4.0, 6.0), ("b1", 6.0, 8.0)]
    start = {i.block: i.start for i in sim.busy("compute") if i.what == "backward"}
    assert start == {"b2": 3.0, "b1": 8.0, "b0": 9.0}
    for stream in ("compute", "d2h", "h2d"):
        spans = sim.busy(stream)
        assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))


def test_peak_counts_persistent_bytes_working_sets_and_the_last_backward():
    w = chain(
        (100, 1.0, 2.0, None, 0, 30, 40),  # saved, fwd, bwd, recompute, input, fwd ws, bwd ws
        (50, 1.0, 2.0, None, 0, 500, 60),
        weight_bytes=10,
        gradient_bytes=10,
        other_bytes=5,
    )
    sim = simulate(w, "keep", LINK)
    # b1's forward: persistent 25 + b0's 100 + b1's 50 + its 500 workspace
    assert sim.peak_bytes == 675 and sim.peak_time == 1.0
    # backward of b1: 25 + 150 + 60; then b1's bytes are freed before b0's backward
    assert sim.bytes_at(2.5) == 235 and sim.bytes_at(4.5) == 25 + 100 + 40


def test_recompute_holds_the_input_and_costs_the_recompute():
    w = chain((1000, 1.0, 2.0, 0.5, 10), (100, 1.0, 2.0))
    sim = simulate(w, ["recompute", "keep"], LINK)
    assert sim.step_seconds == 6.5
    assert sim.bytes_at(1.5) == 10 + 100  # only b0's input is held
    assert sim.bytes_at(4.2) == 10 + 1000  # recomputed before b0's backward
    assert sim.peak_bytes == 1010  # b0's own forward
    assert [i.what for i in sim.busy("compute")][-2:] == ["recompute", "backward"]


def test_recompute_with_inputs_on_the_host():
    w = chain((1000, 1.0, 2.0, 0.5, 100), (100, 2.0, 2.0))
    sim = simulate(w, ["recompute:host", "keep"], LINK)
    assert sim.bytes_at(2.5) == 100  # input copied out under b1's forward
    assert [(c.start, c.end) for c in sim.busy("h2d")] == [(3.0, 4.0)]
    assert sim.step_seconds == 3.0 + 2.0 + 0.5 + 2.0


def test_optimizer_slots_on_the_host():
    w = chain((100, 1.0, 2.0), optimizer_bytes=300, weight_bytes=50, update_seconds=1.0)
    device, host = simulate(w, "keep", LINK), simulate(w, "keep", LINK, optimizer_state="host")
    assert device.peak_bytes - host.peak_bytes == 300
    assert device.step_seconds == 4.0
    assert host.step_seconds == 3.0 + 3.0  # 300 bytes in and out, overlapped with the update
    assert {i.what for i in host.intervals if i.block is None} >= {"optimizer slots in", "update"}


def test_a_buffer_freed_at_an_instant_is_gone_before_the_next_arrives():
    w = chain((100, 1.0, 1.0, None, 0, 0, 100), (100, 1.0, 1.0, None, 0, 0, 100))
    # b1's backward [2, 3) ends at 3 when b0's starts: 200 + 100, never 400
    assert simulate(w, "keep", LINK).peak_bytes == 300


def test_timeline_and_peak_agree_on_random_plans():
    rng = random.Random(3)
    for seed in range(10):
        w = random_workload(8, seed)
        actions = [
            rng.choice(["keep", "swap", "swap:0", "swap:2", "recompute", "recompute:host"])
            for _ in range(8)
        ]
        tier = rng.choice(["device", "host"])
        sim = simulate(w, actions, "pcie3", optimizer_state=tier)
        assert max(sim.device_bytes) == sim.peak_bytes == sim.bytes_at(sim.peak_time)
        assert sim.device_bytes[-1] == w.persistent_bytes(tier)
        assert sim.step_seconds >= max(i.end for i in sim.intervals)
        compute = sum(b.forward_seconds + b.backward_seconds for b in w.blocks)
        compute += (
            sum(
                b.recompute_seconds
                for b, a in zip(w.blocks, actions, strict=True)
                if a.startswith("recompute")
            )
            + w.update_seconds
        )
        assert sim.busy_seconds("compute") == pytest.approx(compute)
        # the engine's fast path says the same
        run = Engine(w, Link.preset("pcie3")).run(
            [code_of(a) for a in resolve_actions(w, actions)], tier == "host"
        )
        assert (run.step_seconds, run.peak_bytes) == (sim.step_seconds, sim.peak_bytes)


def test_plan_and_action_forms():
    w = chain((100, 1.0, 2.0), (100, 1.0, 2.0))
    by_list = simulate(w, ["swap:0", "keep"], LINK)
    assert simulate(w, {"b0": "swap:0"}, LINK) == by_list
    plan = Plan.evaluate(w, {"b0": "swap:0"}, LINK, optimizer_state="device")
    assert simulate(w, plan, LINK) == by_list
    assert simulate(w, "keep", "pcie3").step_seconds == 6.0


@pytest.mark.parametrize(
    "actions, message",
    [
        (["keep"], "`actions` must hold one action per block \\(2\\). Received: 1"),
        ({"b9": "swap"}, "`actions` names blocks the workload lacks: \\['b9'\\]"),
        (["keep", "fly"], "`action` must be 'keep'"),
        (5, "`actions` must be an action, a sequence of actions or a mapping"),
    ],
)
def test_bad_actions(actions, message):
    w = chain((100, 1.0, 2.0), (100, 1.0, 2.0))
    with pytest.raises(ValueError, match=message):
        simulate(w, actions, LINK)


def test_blocks_that_forbid_an_action():
    w = Workload((Block("a", 1, 1, 1, swappable=False), Block("b", 1, 1, 1, recomputable=False)))
    with pytest.raises(ValueError, match="Block 'a' cannot be swapped \\(swappable=False\\)"):
        simulate(w, ["swap", "keep"], LINK)
    with pytest.raises(ValueError, match="Block 'b' cannot be recomputed"):
        simulate(w, ["keep", "recompute"], LINK)
    with pytest.raises(ValueError, match="`optimizer_state` must be one of"):
        simulate(w, "keep", LINK, optimizer_state="disk")
    with pytest.raises(ValueError, match="`stream` must be one of"):
        simulate(w, "keep", LINK).busy("gpu")


def test_an_empty_workload():
    sim = simulate(Workload((), weight_bytes=7), [], LINK)
    assert (sim.step_seconds, sim.peak_bytes) == (0.0, 7)


def test_the_allocated_peak_gives_each_phase_its_own_extra():
    # a swapped: its copy back is the backward's allocation; b kept, from the forward
    work = Workload((Block("a", 100, 1.0, 2.0), Block("b", 100, 1.0, 2.0)))
    link = Link(100.0, 100.0)
    swap_a = ["swap", "keep"]
    assert simulate(work, swap_a, link).allocated_peak_bytes == 200  # no extra recorded
    uniform = dataclasses.replace(work, metadata={"allocator_overhead": 0.5})
    assert simulate(uniform, swap_a, link).allocated_peak_bytes == 300
    by_phase = dataclasses.replace(
        work,
        metadata={
            "allocator_overhead": 0.5,  # the phases win
            "allocator_extra_by_phase": {"persistent": 0.0, "forward": 0.0, "backward": 0.5},
        },
    )
    # live: a 100, b 200, a out 100, a back 100 + 50, b freed 50 + 100 (tensors: 200 at most)
    sim = simulate(by_phase, swap_a, link)
    assert (sim.peak_bytes, sim.allocated_peak_bytes) == (200, 250)
    # kept, the peak ends the forward: the forward's extra (none here) is what counts
    assert simulate(by_phase, "keep", link).allocated_peak_bytes == 200


def test_every_allocation_is_freed_in_its_own_phase():
    # the allocated peak scales the forward's and the backward's bytes apart: a free
    # counted in the other phase than its allocation would leave bytes behind
    rng = random.Random(5)
    for seed in range(20):
        w = random_workload(8, seed)
        blocks = list(w.blocks)
        for i in range(len(blocks) - 1):  # the next block's backward reads some of i's
            shared = ((blocks[i + 1].name, rng.randint(0, blocks[i].saved_bytes)),)
            blocks[i] = dataclasses.replace(
                blocks[i], shared=shared, gradient_bytes=rng.randint(0, 3) * 2**20
            )
        w = dataclasses.replace(w, blocks=tuple(blocks))
        codes = [
            code_of(resolve_actions(w, rng.choice(["keep", "swap", "swap:0", "recompute",
                                                   "recompute:host"]))[0])
            for _ in blocks
        ]  # fmt: skip
        run = Engine(w, LINK).run(codes, detail=True)
        back = sum(d for (_, d), b in zip(run.events, run.backward, strict=True) if b)
        assert back == sum(b.gradient_bytes for b in w.blocks), seed  # kept until the update
        assert sum(d for _, d in run.events) - back == 0, seed
