"""The planner's Workload from a trace, and the link measured with kswap's copies."""

import keras
import pytest

import kswap
from kswap import transfer
from kswap.planning import Link, simulate
from kswap.profiler.workload import block_layers, step_seconds_by_op, workload_from_trace
from kswap.trace import Allocation, OpInterval, Trace, extra_by_phase
from tests.profiler.models import chain, cnn_data, data, small_cnn

MS = 1_000_000  # ns


def _model():
    inp = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(4, 3, padding="same", name="conv")(inp)
    h = keras.layers.ReLU(name="relu")(h)
    h = keras.layers.Flatten(name="flat")(h)
    out = keras.layers.Dense(2, name="head")(h)
    model = keras.Model(inp, out, name="m")
    model.compile("adam", "mse")
    model.optimizer.build(model.trainable_variables)
    return model


def _op(name, layer, phase, start, end, line="t1"):
    return OpInterval(name, "Op", start * MS, end * MS, line, layer=layer, phase=phase, step=0)


def _buf(size, start, end, layer, phase, region="output", op=None):
    return Allocation(
        size=size,
        start_ns=start * MS,
        end_ns=end * MS,
        layer=layer,
        phase=phase,
        step=0,
        region_type=region,
        op=op or f"{layer}/op",
    )


def _trace():
    """A hand-made step of 40 ms: forward conv, relu, head; loss; backward; update."""
    ops = (
        _op("data", None, "forward", 1, 2),  # the input pipeline: conv's forward
        _op("m/conv/Conv2D", "conv", "forward", 2, 6),
        _op("m/relu/Relu", "relu", "forward", 6, 8),
        _op("gradient_tape/m/conv/ShapeN", "conv", "backward", 7, 8, "t2"),  # early shape op
        _op("m/head/MatMul", "head", "forward", 8, 10),
        _op("compile_loss/Sum", None, "forward", 10, 11),  # the loss: head's forward
        _op("gradient_tape/compile_loss/Tile", None, "backward", 11, 12),  # head's backward
        _op("gradient_tape/m/head/MatMul", "head", "backward", 12, 16),
        _op("gradient_tape/m/relu/ReluGrad", "relu", "backward", 16, 18),
        _op("gradient_tape/m/conv/BackpropInput", "conv", "backward", 18, 24),
        _op("gradient_tape/m/conv/BackpropFilter", "conv", "backward", 18, 26, "t2"),
        _op("adam/Mul", "(optimizer update)", "update", 27, 35),
    )
    buffers = (
        Allocation(size=1000, start_ns=0, end_ns=40 * MS, phase="resident", alive_at_start=True),
        _buf(300, 3, 18, "conv", "forward"),  # conv's output: relu's backward frees it
        _buf(50, 3, 5, "conv", "forward", "temp"),  # a forward temporary
        _buf(200, 7, 18, "relu", "forward"),  # relu's output (saved; freed by ReluGrad)
        _buf(70, 9, 16, "head", "forward"),  # head's saved tensor
        _buf(10, 9, 13, None, "forward"),  # the loss's: saved, no block
        _buf(120, 16, 24, "relu", "backward"),  # relu's input gradient, read by conv
        _buf(400, 18, 24, "conv", "backward", "temp", "conv/in"),  # im2col of BackpropInput
        _buf(300, 18, 26, "conv", "backward", "temp", "conv/filter"),  # and BackpropFilter
    )
    return Trace(
        buffers=buffers,
        steps=((0, 40 * MS),),
        duration_ns=40 * MS,
        emulated=True,
        metadata={"batch_size": 2},
        ops=ops,
    )


def test_blocks_in_model_order_with_kinds_and_input_bytes():
    model = _model()
    assert [n for n, _ in block_layers(model)] == ["conv", "relu", "flat", "head"]
    work = workload_from_trace(_trace(), model)
    assert work.names == ("conv", "relu", "flat", "head")
    # ReLU produces a convolution's input in no model here: conv only
    assert [b.kind for b in work.blocks] == ["conv", "other", "other", "dense"]
    # 2 samples of 8x8x3 float32 into conv, 8x8x4 into relu and flat, 256 into head
    assert [b.input_bytes for b in work.blocks] == [1536, 2048, 2048, 2048]


def test_saved_bytes_go_to_the_block_whose_backward_frees_them():
    work = workload_from_trace(_trace(), _model())
    saved = {b.name: b.saved_bytes for b in work.blocks}
    # conv's output is freed after relu's backward (its last reader): relu's
    assert saved == {"conv": 0, "relu": 500, "flat": 0, "head": 70}
    # the loss's saved tensor is in no block; 1000 resident less weights and slots
    weights = sum(v.numpy().nbytes for v in _model().weights)
    assert work.weight_bytes == weights
    # no weight gradient is alive when the backward ends: none is held for the update
    assert [b.gradient_bytes for b in work.blocks] == [0, 0, 0, 0]
    assert work.gradient_bytes == 0
    assert work.other_bytes == max(1000 - weights - work.optimizer_bytes, 0) + 10


def test_slots_in_the_host_tier_are_not_taken_off_the_device_bytes_at_the_start():
    from kswap.optimizer_state import host_variables, place_optimizer_state

    model = _model()
    assert place_optimizer_state(model.optimizer, "host", model.trainable_variables)
    slots = sum(v.numpy().nbytes for v in model.optimizer.variables)
    on_host = sum(v.numpy().nbytes for v in host_variables(model.optimizer))
    assert on_host > slots / 2  # Adam's moments; its step count stays on the device
    weights = sum(v.numpy().nbytes for v in model.weights)
    # on the device: the weights, the optimizer's step count and 5000 bytes of data
    resident = weights + (slots - on_host) + 5000
    trace = _trace()
    trace = Trace(
        buffers=(
            Allocation(
                size=resident, start_ns=0, end_ns=40 * MS, phase="resident", alive_at_start=True
            ),
            *trace.buffers[1:],
        ),
        steps=trace.steps,
        duration_ns=trace.duration_ns,
        emulated=True,
        metadata=trace.metadata,
        ops=trace.ops,
    )
    work = workload_from_trace(trace, model)
    # the slots a plan may move; the step count stays on the device, with the
    # data and the loss's saved tensor
    assert work.optimizer_bytes == on_host
    assert work.other_bytes == (slots - on_host) + 5000 + 10


def test_buffers_count_at_their_tensors_bytes_and_the_allocators_extra_is_recorded():
    import dataclasses

    trace = _trace()
    # the allocator gave relu's 200-byte output a free block of 1000 (unsplit, as BFC does)
    buffers = tuple(
        dataclasses.replace(b, size=1000, requested_bytes=200)
        if (b.layer, b.phase, b.size) == ("relu", "forward", 200)
        else b
        for b in trace.buffers
    )
    trace = dataclasses.replace(trace, buffers=buffers)
    work = workload_from_trace(trace, _model())
    # relu's backward frees conv's output (300) and its own (200, in 256-byte granules)
    assert {b.name: b.saved_bytes for b in work.blocks}["relu"] == 300 + 256
    tensors = trace.tensor_sizes()
    assert work.metadata["device_peak_bytes"] == trace.peak_bytes("device", 0)
    overhead = trace.peak_bytes("device", 0) / tensors.peak_bytes("device", 0) - 1
    assert work.metadata["allocator_overhead"] == pytest.approx(overhead) and overhead > 0.2
    # the same by phase, of the blocks: only the forward's allocations held more
    by_phase = work.metadata["allocator_extra_by_phase"]
    assert by_phase == extra_by_phase(trace, "device", 0).to_dict()
    assert by_phase["forward"] > 0 and by_phase["backward"] == by_phase["persistent"] == 0
    # counted as the allocator's blocks, relu holds the whole block
    blocks = workload_from_trace(trace, _model(), tensor_bytes=False)
    assert {b.name: b.saved_bytes for b in blocks.blocks}["relu"] == 300 + 1000


def test_only_gradients_that_outlive_the_backward_are_held_until_the_update():
    import dataclasses

    trace = _trace()
    grads = (
        # conv's weight gradients (3x3x3x4 + 4 floats): the update reads them after the backward
        _buf(448, 18, 30, "conv", "backward", op="conv/filter_grad"),
        # head's (256x2 + 2): applied and freed by an update op running beside relu's
        # backward, with one of Adam's temporaries
        _buf(2056, 12, 17, "head", "backward", op="head/grad"),
        _buf(4000, 16, 17, "(optimizer update)", "update", "temp", "adam/Mul_1"),
    )
    trace = dataclasses.replace(trace, buffers=trace.buffers + grads)
    work = workload_from_trace(trace, _model())
    # conv 3x3x3x4 + 4 floats held from its backward on; head's applied before t_e
    assert [b.gradient_bytes for b in work.blocks] == [448, 0, 0, 0]
    assert work.gradient_bytes == 0
    # head's gradient and the update's temporary are in the working set of the block
    # whose backward op ended last before they were freed (head's MatMul, at 16)
    head = work.blocks[3]
    assert head.keep_backward_bytes == head.backward_bytes == 2056 + 4000
    assert work.blocks[0].keep_backward_bytes == 120 + 400 + 300  # conv's: unchanged


def test_a_forward_op_after_the_last_backward_start_does_not_hide_the_backward():
    """Under tf.distribute another replica's forward op can end after this one's backward began."""
    import dataclasses

    trace = _trace()
    late = _op("replica_1/m/head/MatMul", "head", "forward", 8, 30, "t3")
    trace = dataclasses.replace(trace, ops=trace.ops + (late,))
    work = workload_from_trace(trace, _model())
    assert work.names == ("conv", "relu", "flat", "head")
    assert sum(b.backward_seconds for b in work.blocks) > 0


def test_a_trace_from_fit_without_its_batch_size_gets_it_from_the_buffers_shapes():
    import dataclasses

    trace = _trace()
    conv_out = dataclasses.replace(trace.buffers[1], shape="[2,8,8,4]")
    fit_trace = dataclasses.replace(
        trace, buffers=(trace.buffers[0], conv_out, *trace.buffers[2:]), metadata={}
    )
    model = _model()
    inputs = [b.input_bytes for b in workload_from_trace(fit_trace, model).blocks]
    assert inputs == [1536, 2048, 2048, 2048]
    assert workload_from_trace(fit_trace, model).metadata["batch_size"] == 2


def test_times_add_up_to_the_step_and_ops_of_no_block_join_their_neighbours():
    work = workload_from_trace(_trace(), _model())
    fwd = {b.name: round(b.forward_seconds * 1e3, 6) for b in work.blocks}
    bwd = {b.name: round(b.backward_seconds * 1e3, 6) for b in work.blocks}
    # conv: the 1 ms before the first op, the input pipeline 1, its op 4; the early
    # shape op (7-8, shared with relu's forward) is backward time
    assert fwd == {"conv": 6.0, "relu": 1.5, "flat": 0.0, "head": 3.0}
    # the loss's backward joins head's; 18-24 shared by conv's two ops; 26-27 idle
    # goes to the update, 35-40 after the last op too
    assert bwd == {"conv": 8.5, "relu": 2.0, "flat": 0.0, "head": 5.0}
    assert round(work.update_seconds * 1e3, 6) == 14.0
    total = sum(b.forward_seconds + b.backward_seconds for b in work.blocks) + work.update_seconds
    assert total == pytest.approx(0.040)
    assert work.metadata["step_seconds"] == pytest.approx(0.040)


def test_times_scaled_to_the_unprofiled_step_keep_their_proportions():
    work = workload_from_trace(_trace(), _model())
    fast = workload_from_trace(_trace(), _model(), step_seconds=0.030)
    assert fast.metadata["profiled_step_seconds"] == pytest.approx(0.040)
    assert fast.metadata["step_seconds"] == pytest.approx(0.030)
    assert fast.metadata["time_scale"] == pytest.approx(0.75)
    for a, b in zip(work.blocks, fast.blocks, strict=True):
        assert b.forward_seconds == pytest.approx(0.75 * a.forward_seconds)
        assert b.backward_seconds == pytest.approx(0.75 * a.backward_seconds)
        assert (b.saved_bytes, b.backward_bytes) == (a.saved_bytes, a.backward_bytes)
    total = sum(b.forward_seconds + b.backward_seconds for b in fast.blocks) + fast.update_seconds
    assert total == pytest.approx(0.030)
    for bad in (0, -0.01, float("nan"), "0.03", True):
        with pytest.raises(ValueError, match="`step_seconds` must be a positive number"):
            workload_from_trace(_trace(), _model(), step_seconds=bad)


def test_working_sets_one_op_at_a_time_and_side_by_side():
    # the trace ran its ops side by side (a plain model): kept blocks' working
    # sets are measured, the one-at-a-time ones derived
    plain = {b.name: b for b in workload_from_trace(_trace(), _model()).blocks}
    # conv's backward: the gradient it reads (120) with BackpropInput's 400, or all three
    assert plain["conv"].backward_bytes == 120 + 400
    assert plain["conv"].keep_backward_bytes == 120 + 400 + 300
    assert plain["relu"].backward_bytes == plain["relu"].keep_backward_bytes == 120
    assert plain["conv"].forward_bytes == 50
    # as if the trace had run conv one op at a time: side by side is every
    # op's temporaries at once (here the same as measured, as they overlapped)
    ordered = {
        b.name: b for b in workload_from_trace(_trace(), _model(), ordered_backward=True).blocks
    }
    # ...and a block that ran ordered counts at least what it held at once
    assert ordered["conv"].backward_bytes == 120 + 400 + 300
    assert ordered["conv"].keep_backward_bytes == 120 + 400 + 300
    some = workload_from_trace(_trace(), _model(), ordered_backward=["relu"])
    assert some.blocks[0].keep_backward_bytes == 820
    with pytest.raises(ValueError, match="nope"):
        workload_from_trace(_trace(), _model(), ordered_backward=["nope"])


def test_a_kept_block_simulates_its_side_by_side_working_set():
    import dataclasses

    from kswap.planning import Link, simulate

    work = workload_from_trace(_trace(), _model())
    alike = dataclasses.replace(
        work,
        blocks=tuple(
            dataclasses.replace(b, keep_backward_bytes=b.backward_bytes) for b in work.blocks
        ),
    )
    link = Link(1e12, 1e12)
    peaks = {
        actions: (
            simulate(work, actions, link).peak_bytes,
            simulate(alike, actions, link).peak_bytes,
        )
        for actions in ("keep", "swap")
    }
    assert peaks["keep"][0] > peaks["keep"][1]  # conv's BackpropFilter temporaries too
    assert peaks["swap"][0] == peaks["swap"][1]


def test_bad_traces_are_refused():
    model = _model()
    with pytest.raises(ValueError, match="no profiled steps"):
        workload_from_trace(Trace(buffers=()), model)
    no_ops = Trace(buffers=(), steps=((0, 10),), duration_ns=10)
    with pytest.raises(ValueError, match="no op intervals"):
        workload_from_trace(no_ops, model)
    with pytest.raises(ValueError, match="step=3"):
        workload_from_trace(_trace(), model, step=3)


def test_step_seconds_by_op_gives_idle_time_to_the_next_op():
    ops = [OpInterval("a", "A", 0, 10), OpInterval("b", "B", 5, 10), OpInterval("c", "C", 20, 25)]
    got = [round(t * 1e9, 3) for t in step_seconds_by_op(ops, -5, 30)]
    assert got == [12.5, 2.5, 20.0]


def test_real_profile_gives_ops_per_layer_and_a_workload_whose_keep_peak_is_close():
    model = small_cnn("cnn_work")
    # batch 64, so activations (512 KiB each) outweigh the step's small buffers: at
    # batch 16 (611 KiB in all) the prediction fell 7-42% under the measured peak
    x, y = cnn_data(192)
    trace = kswap.profile(model, x, y, steps=2, batch_size=64)
    layers = {o.layer for o in trace.ops}
    assert {"conv", "bn", "head"} <= layers
    by_phase = trace.op_time_by_layer_phase(step=1)
    assert by_phase["conv"]["forward"] > 0 and by_phase["conv"]["backward"] > 0
    assert "update" in by_phase["(optimizer update)"]
    work = workload_from_trace(trace, model, ordered_backward=False)
    assert work.names == ("conv", "bn", "relu", "drop", "gap", "head")
    assert sum(b.saved_bytes for b in work.blocks) > 0
    keep = simulate(work, "keep", Link(5e9, 5e9))
    assert keep.step_seconds == pytest.approx(work.metadata["step_seconds"])
    # the workload counts the bytes tensors asked for: against the allocator's
    # blocks the prediction fell 30% short whenever the conv's 22.6 MiB scratch
    # (no oneDNN) got a free 32 MiB block whole, which depends on what ran before
    measured = trace.tensor_sizes().peak_bytes("device", 1)
    assert abs(keep.peak_bytes - measured) <= 0.25 * measured
    overhead = trace.peak_bytes("device", 1) / measured - 1
    assert work.metadata["allocator_overhead"] == pytest.approx(overhead)


def test_offloaded_trace_builds_the_same_blocks():
    model = chain()
    x, y = data(model)
    offloaded = kswap.OffloadingModel(model)
    trace = kswap.profile(offloaded, x, y, steps=1, batch_size=32)
    assert any(o.phase == "transfer" for o in trace.ops)
    work = workload_from_trace(trace, offloaded)
    assert work.names == ("d1", "d2", "d3")
    assert work.metadata["transfer_seconds"] > 0


def test_measure_link_is_a_link_and_refuses_bad_sizes():
    # 32 MiB, 5 repeats: with 4 MiB and 2 the two sizes' times differed by as little
    # as the timer's noise on a busy 2-core machine (a rate of 1.2e12 bytes/s once)
    link = transfer.measure_link(32 * 2**20, repeats=5)
    assert link.name == "measured" and link.latency_s >= 0
    assert 1e8 < link.h2d_bytes_per_s < 1e12 and 1e8 < link.d2h_bytes_per_s < 1e12
    with pytest.raises(ValueError, match="nbytes=100"):
        transfer.measure_link(100, small_bytes=200)
    with pytest.raises(ValueError, match="repeats=0"):
        transfer.measure_link(repeats=0)


def test_replayed_peak_orders_a_side_by_side_backward():
    """A block profiled side by side: kswap's one-op-at-a-time order keeps fewer bytes alive."""
    from kswap.profiler.working_sets import ordered_peak, replayed_peak

    M = 1000
    ops = [
        OpInterval("a", "Mul", 10, 20, layer="bn", phase="backward"),  # a = g * s
        OpInterval("b", "Mul", 10, 30, layer="bn", phase="backward"),  # b = g * x
        OpInterval("sum", "Sum", 35, 40, layer="bn", phase="backward"),
        OpInterval("addn", "AddN", 50, 60, phase="backward"),  # no layer: dx = a + sum
    ]
    every = [*ops, OpInterval("next", "Conv2DBackpropInput", 70, 79, layer="conv")]
    buffers = [
        Allocation(M, 5, 35, op="up", layer="relu", phase="backward"),  # g, read last by b
        Allocation(M, 10, 61, op="a", layer="bn", phase="backward"),
        Allocation(M, 10, 41, op="b", layer="bn", phase="backward"),
        Allocation(4, 35, 61, op="sum", layer="bn", phase="backward"),
        Allocation(M, 50, 80, op="addn", phase="backward"),  # dx: read by the next block
    ]
    assert ordered_peak(buffers) == 3 * M  # g, a and b together, as they ran
    # b, its sum (b freed), a (g freed), then dx
    assert replayed_peak(buffers, ops, every) == 2 * M + 4
    assert replayed_peak(buffers, ops[:2], every) is None  # too few ops to order


def test_a_replayed_backward_keeps_the_upstream_gradient_for_every_op_that_may_read_it():
    """The trace names only a buffer's last reader: the upstream gradient waits for every op."""
    from kswap.profiler.working_sets import ordered_peak, replayed_peak

    M = 1000
    ops = [
        OpInterval("y", "Mul", 10, 20, layer="bn", phase="backward"),  # A = g * x
        OpInterval("x", "Sum", 15, 30, layer="bn", phase="backward"),  # s = sum(g): last reader
        OpInterval("z", "Sum", 40, 45, layer="bn", phase="backward"),  # sum(A * s)
    ]
    every = [*ops, OpInterval("next", "MatMul", 70, 79, layer="dense")]
    buffers = [
        Allocation(M, 5, 35, op="up", layer="relu", phase="backward"),  # g
        Allocation(M, 10, 46, op="y", layer="bn", phase="backward"),
        Allocation(4, 15, 46, op="x", layer="bn", phase="backward"),
        Allocation(4, 40, 80, op="z", layer="bn", phase="backward"),
    ]
    assert ordered_peak(buffers) == 2 * M + 4
    # had g been read by x alone, x could run first and free it: M + 8
    assert replayed_peak(buffers, ops, every) == 2 * M + 4


def test_an_ordered_backward_counts_the_temporaries_of_ops_beside_its_chain():
    """A convolution's filter gradient is outside kswap's chain: its scratch beside the other's."""
    from kswap.profiler.working_sets import backward_bytes, beside_bytes

    M = 1 << 20
    ops = [
        OpInterval("in", "Conv2DBackpropInput", 10, 20, layer="c", phase="backward"),
        OpInterval("filter", "Conv2DBackpropFilter", 21, 30, layer="c", phase="backward"),
        OpInterval("bias", "BiasAddGrad", 31, 32, layer="c", phase="backward"),
    ]
    buffers = [  # profiled one after the other: the scratch buffers did not overlap
        Allocation(M, 5, 40, op="up", layer="c", phase="backward"),
        Allocation(22 * M, 10, 20, op="in", layer="c", phase="backward", region_type="temp"),
        Allocation(20 * M, 21, 30, op="filter", layer="c", phase="backward", region_type="temp"),
        Allocation(M // 4, 31, 32, op="bias", layer="c", phase="backward", region_type="temp"),
    ]
    beside = {"Conv2DBackpropFilter", "BiasAddGrad"}
    temps = {"in": 22 * M, "filter": 20 * M, "bias": M // 4}
    types = {o.op: o.type for o in ops}
    assert beside_bytes(temps, types, beside) == 20 * M  # the filter's, beside the input's
    assert beside_bytes(temps, types, {"BiasAddGrad"}) == M // 4  # filter chained
    assert beside_bytes(temps, types, ()) == 0
    # the filter's is the largest: any other op may run beside it
    assert beside_bytes({**temps, "filter": 30 * M}, types, beside) == 22 * M
    for ordered in (True, False):
        assert backward_bytes(buffers, ops, ops, ordered) == 23 * M
        assert backward_bytes(buffers, ops, ops, ordered, beside) == 43 * M
    # profiled ordered and overlapping all the same: what it held at once
    overlapped = [*buffers[:2], Allocation(25 * M, 12, 18, op="filter", region_type="temp")]
    assert backward_bytes(overlapped, ops, ops, True) == 48 * M
