"""Replicas in a trace (MirroredStrategy): each buffer's and op's, one replica's trace."""

from kswap.trace import Allocation, OpInterval, Trace
from kswap.trace.replicas import (
    busiest_replica,
    replica_of,
    replica_peaks,
    replica_trace,
    replicas,
)


def _buf(size, start, end, op=None, allocator=None, tier="device"):
    return Allocation(size, start, end, tier=tier, op=op, allocator=allocator)


# two replicas sharing one CPU allocator: replica 1's ops carry its scope
CPU = Trace(
    buffers=(
        _buf(1000, 0, 100, None),  # before profiling: every replica's weights
        _buf(300, 10, 50, "model/conv/Conv2D"),
        _buf(200, 20, 60, "replica_1/model/conv/Conv2D"),
        _buf(200, 40, 90, "gradient_tape/replica_1/model/conv/Conv2DBackpropInput"),
        _buf(500, 10, 80, "replica_1/model/conv/kswap_host_tier/DeepCopy", tier="host"),
    ),
    steps=((0, 100),),
    duration_ns=100,
    ops=(
        OpInterval("model/conv/Conv2D", "Conv2D", 10, 20),
        OpInterval("replica_1/model/conv/Conv2D", "Conv2D", 20, 30),
    ),
)


def test_the_replica_of_a_buffer_and_an_op():
    assert [replica_of(b) for b in CPU.buffers] == [0, 0, 1, 1, 1]
    assert [replica_of(o) for o in CPU.ops] == [0, 1]
    # a GPU's allocator names its device, ahead of any scope
    assert replica_of(_buf(8, 0, 1, None, "GPU_2_bfc")) == 2
    assert replica_of(_buf(8, 0, 1, "replica_1/x", "GPU_1_bfc")) == 1
    assert replica_of(_buf(8, 0, 1, "replica_1/x", "gpu_host_bfc")) == 1
    assert replica_of(_buf(8, 0, 1, "model/replica_1x/y")) == 0  # not the strategy's scope


def test_one_replica_s_trace_and_peaks():
    assert replicas(CPU) == (0, 1)
    one = replica_trace(CPU, 1)
    assert [b.op for b in one.buffers] == [b.op for b in CPU.buffers[2:]]
    assert [o.op for o in one.ops] == ["replica_1/model/conv/Conv2D"]
    assert one.metadata["replica"] == 1 and one.steps == CPU.steps
    # together 1,700 at t=40..50; replica 0 (with what no scope names) 1,300
    assert CPU.peak_bytes() == 1700
    assert replica_peaks(CPU) == {0: 1300, 1: 400}
    assert replica_peaks(CPU, "host") == {0: 0, 1: 500}
    busiest = busiest_replica(CPU)
    assert busiest.metadata["replica"] == 0 and busiest.metadata["replicas"] == 2
    assert busiest.peak_bytes() == 1300


def test_a_trace_of_one_replica_is_itself():
    single = Trace(buffers=(_buf(10, 0, 5, "model/d/MatMul"),), duration_ns=5)
    assert replicas(single) == (0,)
    assert replica_trace(single, 0) is single and busiest_replica(single) is single
    assert replicas(Trace(buffers=())) == (0,)


def test_gpus_split_by_allocator():
    allocators = ("GPU_0_bfc", "GPU_1_bfc")
    gpu = Trace(
        buffers=(
            _buf(100, 0, 10, None, allocators[0]),  # replica 0's weights
            _buf(100, 0, 10, None, allocators[1]),  # replica 1's weights
            _buf(500, 2, 8, "replica_1/m/d/MatMul", allocators[1]),
            _buf(50, 2, 8, "m/d/MatMul", allocators[0]),
        ),
        duration_ns=10,
    )
    assert replica_peaks(gpu) == {0: 150, 1: 600}
    assert busiest_replica(gpu).metadata["replica"] == 1
