from kswap.trace import STEP_MARKER, read_xspace
from tests.trace.xspace_writer import encode_xspace


def _alloc(offset, addr, size, total, op=None):
    stats = {
        "allocator_name": "GPU_0_bfc",
        "addr": addr,
        "allocation_bytes": size,
        "requested_bytes": size - 4,
        "bytes_allocated": total,
        "fragmentation": 0.5,
    }
    if op:
        stats.update(tf_op=op, region_type="output", shape="[2,3]")
    return ("MemoryAllocation", offset, 0, stats)


def test_reads_memory_events_and_steps_across_lines():
    buf = encode_xspace(
        [
            (10, [(STEP_MARKER, 0, 5_000_000, {"step_num": 0, "_r": 1}), ("Other", 1, 2, {})]),
            (
                11,
                [
                    _alloc(3000, 99, 512, 1512, op="model/dense/MatMul"),
                    (
                        "MemoryDeallocation",
                        9000,
                        0,
                        {
                            "allocator_name": "GPU_0_bfc",
                            "addr": 99,
                            "allocation_bytes": 512,
                            "requested_bytes": 508,
                            "bytes_allocated": 1000,
                        },
                    ),
                ],
            ),
        ]
    )
    space = read_xspace(buf)
    assert space.hostname == "testhost"
    assert [(s.step, s.start_ps, s.end_ps) for s in space.steps] == [(0, 10_000, 5_010_000)]
    a, d = space.memory_events
    assert a.is_allocation and not d.is_allocation
    assert a.time_ps == 11_000 + 3000 and d.time_ps == 11_000 + 9000
    assert (a.allocator, a.addr, a.allocation_bytes, a.requested_bytes) == (
        "GPU_0_bfc",
        99,
        512,
        508,
    )
    assert (a.bytes_allocated, d.bytes_allocated) == (1512, 1000)
    assert (a.tf_op, a.region_type, a.shape) == ("model/dense/MatMul", "output", "[2,3]")
    assert d.tf_op is None


def test_events_are_sorted_by_time_and_other_planes_ignored():
    events = [_alloc(5000, 1, 256, 256), _alloc(1000, 2, 256, 512)]
    buf = encode_xspace([(0, events)]) + encode_xspace(
        [(0, [_alloc(1, 3, 256, 256)])], plane_name="/device:GPU:0"
    )
    space = read_xspace(buf)
    assert [e.addr for e in space.memory_events] == [2, 1]


def test_negative_ints_and_files(tmp_path):
    buf = encode_xspace([(0, [_alloc(10, -140000000, 256, 256)])])
    path = tmp_path / "h.xplane.pb"
    path.write_bytes(buf)
    assert read_xspace(path).memory_events[0].addr == -140000000
