"""Op intervals: read from an XSpace, attributed in the trace, summed per layer and phase."""

import json

import pytest

from kswap.trace import (
    UNATTRIBUTED,
    MemoryEvent,
    OpEvent,
    OpInterval,
    StepMarker,
    Trace,
    build_trace,
    busy_ns,
    read_xspace,
)
from kswap.trace.optime import op_shares
from kswap.trace.xspace import parse_op_label
from tests.trace.xspace_writer import encode_xspace


def test_host_op_events_are_read_with_their_thread_and_other_events_are_not():
    buf = encode_xspace(
        [
            (
                10,
                [
                    ("StatefulPartitionedCall/m_1/d_1/MatMul:MatMul", 2000, 5000, {}),
                    ("ExecutorState::Process", 1000, 9000, {}),
                    ("EagerLocalExecute: _EagerConst", 0, 100, {}),
                ],
                "tf_Compute/1",
            ),
            (20, [("m_1/d_1/Relu:Relu", 0, 3000, {})], "tf_Compute/2"),
        ]
    )
    ops = read_xspace(buf).op_events
    assert [(o.op, o.type, o.start_ps, o.end_ps, o.line) for o in ops] == [
        ("StatefulPartitionedCall/m_1/d_1/MatMul", "MatMul", 12_000, 17_000, "tf_Compute/1"),
        ("m_1/d_1/Relu", "Relu", 20_000, 23_000, "tf_Compute/2"),
    ]
    assert not any(o.on_device for o in ops) and ops[0].kernel is None


def test_gpu_kernels_name_their_op_in_the_tf_op_stat():
    host = encode_xspace([(0, [("m_1/c_1/Conv2D:Conv2D", 0, 10_000, {})], "tf_Compute/1")])
    gpu = encode_xspace(
        [
            (
                5,
                [
                    ("volta_scudnn_128x64_relu", 100, 4000, {"tf_op": "m_1/c_1/Conv2D:Conv2D"}),
                    ("cudaStreamSynchronize", 0, 50, {}),  # no op
                ],
                "Stream #14(Kernel)",
            )
        ],
        plane_name="/device:GPU:0",
    )
    ops = read_xspace(host + gpu).op_events
    device = [o for o in ops if o.on_device]
    assert [(o.op, o.type, o.kernel, o.plane, o.line) for o in device] == [
        (
            "m_1/c_1/Conv2D",
            "Conv2D",
            "volta_scudnn_128x64_relu",
            "/device:GPU:0",
            "Stream #14(Kernel)",
        )
    ]
    assert (device[0].start_ps, device[0].end_ps) == (5100, 9100)
    assert len(ops) == 2


@pytest.mark.parametrize(
    "label, parsed",
    [
        ("a/b:Conv2D", ("a/b", "Conv2D")),
        ("_send_Const/_3_0:_Send", ("_send_Const/_3_0", "_Send")),
        ("Iterator::Root", None),
        ("EagerLocalExecute: Foo", None),
        ("noType", None),
        ("a:1x", None),
    ],
)
def test_op_labels(label, parsed):
    assert parse_op_label(label) == parsed


def _ops_trace(**kwargs):
    layer_of = {"m/a/Conv2D": "a", "gradient_tape/m/a/Conv2D": "a", "m/b/Relu": "b"}.get

    def phase_of(op):
        return "backward" if op.startswith("gradient_tape/") else "forward"

    ops = [
        OpEvent("m/a/Conv2D", "Conv2D", 2_000_000, 6_000_000, "t1"),
        OpEvent("m/b/Relu", "Relu", 4_000_000, 8_000_000, "t2"),
        OpEvent("gradient_tape/m/a/Conv2D", "Conv2D", 12_000_000, 20_000_000, "t1"),
        OpEvent("compile_loss/Sum", "Sum", 10_000_000, 11_000_000, "t2"),
    ]
    return build_trace(
        [MemoryEvent(1_000_000, True, "cpu", 1, 256, 256, 256, "m/a/Conv2D")],
        emulated=True,
        host_scope="hs",
        steps=[StepMarker(0, 0, 9_000_000), StepMarker(1, 9_000_000, 30_000_000)],
        layer_of=layer_of,
        phase_of=phase_of,
        ops=sorted(ops, key=lambda o: o.start_ps),
        **kwargs,
    )


def test_build_gives_ops_times_layers_phases_and_steps():
    trace = _ops_trace()
    got = [(o.op, o.start_ns, o.end_ns, o.layer, o.phase, o.step) for o in trace.ops]
    assert got == [
        ("m/a/Conv2D", 2000, 6000, "a", "forward", 0),
        ("m/b/Relu", 4000, 8000, "b", "forward", 0),
        ("compile_loss/Sum", 10000, 11000, None, "forward", 1),
        ("gradient_tape/m/a/Conv2D", 12000, 20000, "a", "backward", 1),
    ]
    assert trace.duration_ns == 30000


def test_shared_time_adds_up_to_the_busy_time_and_sum_counts_overlaps_twice():
    trace = _ops_trace()
    share = trace.op_time_by_layer()
    # a: 2000 alone, 2000 shared with b (1000 each), 8000 backward; b: 1000 + 2000 alone
    assert share == {"a": 11000, "b": 3000, UNATTRIBUTED: 1000}
    assert sum(share.values()) == busy_ns(trace) == 15000
    assert trace.op_time_by_layer(overlap="sum") == {"a": 12000, "b": 4000, UNATTRIBUTED: 1000}
    assert trace.op_time_by_layer("backward") == {"a": 8000}
    assert trace.op_time_by_layer(step=0) == {"a": 3000, "b": 3000}
    assert trace.op_time_by_layer_phase(step=1) == {
        "a": {"backward": 8000},
        UNATTRIBUTED: {"forward": 1000},
    }
    assert busy_ns(trace, 1, "forward") == 1000


def test_op_shares_with_three_at_once_and_empty_ops():
    ops = [
        OpInterval("a", "A", 0, 6),
        OpInterval("b", "B", 0, 6),
        OpInterval("c", "C", 3, 6),
        OpInterval("d", "D", 4, 4),
    ]
    # 0-3: a and b, 1.5 each; 3-6: all three, 1 each; d lasts no time
    assert op_shares(ops) == [2.5, 2.5, 1.0, 0.0]


def test_bad_arguments_name_themselves():
    trace = _ops_trace()
    with pytest.raises(ValueError, match="overlap='wall'"):
        trace.op_time_by_layer(overlap="wall")
    with pytest.raises(ValueError, match="phase='compute'"):
        trace.op_time_by_layer("compute")
    with pytest.raises(ValueError, match="step=2"):
        trace.op_time_by_layer(step=2)
    with pytest.raises(ValueError, match="end_ns"):
        OpInterval("a", "A", 5, 4)


def test_gpu_kernels_are_the_ops_timed_when_present():
    host = OpEvent("m/a/Conv2D", "Conv2D", 0, 1000)
    kernel = OpEvent("m/a/Conv2D", "Conv2D", 500, 9000, "Stream #1", "/device:GPU:0", "k")
    trace = build_trace([], emulated=False, host_scope="hs", ops=[host, kernel])
    assert [(o.start_ns, o.end_ns, o.on_device) for o in trace.ops] == [(0, 8, True)]


def test_ops_round_trip_through_json_and_older_traces_have_none():
    trace = _ops_trace()
    again = Trace.from_json(trace.to_json())
    assert again == trace and len(again.ops) == 4
    payload = json.loads(trace.to_json())
    del payload["ops"], payload["op_fields"]
    assert Trace.from_json(json.dumps(payload)).ops == ()
