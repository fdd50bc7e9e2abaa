import subprocess
import sys
import textwrap
import types

import pytest

from kswap.allocator.config import configure


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )


def test_memory_limit_emulates_a_smaller_device():
    proc = run(
        """
        import kswap, warnings
        from kswap.allocator import configure
        report = configure(memory_limit=64 * 2**20)
        print(report.applied["memory_limit"], report.memory_limit_bytes)
        import tensorflow as tf
        small = tf.ones((4, 1024, 1024))          # 16 MiB fits
        try:
            tf.ones((32, 1024, 1024)) + 1         # 128 MiB does not
            print("NO OOM")
        except tf.errors.ResourceExhaustedError:
            print("OOM")
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    assert lines[0] == "TF_CPU_BFC_MEM_LIMIT_IN_MB=64 (device memory emulated on CPU:0) 67108864"
    assert lines[1] == "OOM"


def test_refused_after_tensorflow_created_its_devices():
    proc = run(
        """
        import kswap, tensorflow as tf
        tf.ones(3)
        from kswap.allocator import configure
        try:
            configure(memory_limit=2**30)
        except RuntimeError as e:
            print("RuntimeError:", e)
        """
    )
    assert "RuntimeError: TensorFlow has already created its devices" in proc.stdout


def test_gpu_options_without_a_gpu_are_reported_not_dropped():
    proc = run(
        """
        import kswap, warnings
        from kswap.allocator import configure
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            report = configure(
                growth=True, allocator="cuda_malloc_async", host_limit=2**30, gc=False
            )
        print(sorted(report.not_applicable), len(w), report.applied)
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "['allocator', 'gc', 'growth', 'host_limit'] 4 {}"


def test_limit_from_a_packing_plan_adds_the_margin():
    proc = run(
        """
        import kswap, types
        from kswap.allocator import configure
        plan = types.SimpleNamespace(arena_bytes=100 * 2**20)
        print(configure(memory_limit=plan, margin=0.25).memory_limit_bytes)
        """
    )
    assert proc.stdout.strip() == str(125 * 2**20)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            dict(memory_limit=-2),
            r"`memory_limit` must be at least 1 MiB .* Received: memory_limit=-2",
        ),
        (dict(memory_limit=1.5), "`memory_limit` must be a byte count"),
        (dict(growth="yes"), "`growth` must be True, False or None"),
        (dict(allocator="cuda"), "`allocator` must be one of"),
        (dict(host_limit=10), "`host_limit` must be a byte count of at least 1 MiB"),
        (dict(margin=-1), "`margin` must be a number"),
        (dict(growth=True, memory_limit=2**30), "cannot both be set"),
        (dict(memory_limit=types.SimpleNamespace(arena_bytes=10), margin="x"), "`margin`"),
    ],
)
def test_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        configure(**kwargs)
