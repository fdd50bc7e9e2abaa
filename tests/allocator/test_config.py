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


def test_memory_limit_emulates_a_smaller_device_and_warns_how_bluntly():
    # what exceeds the limit is not caught: on CPU it may abort the process
    # instead of raising ResourceExhaustedError, so only the exit is checked
    proc = run(
        """
        import kswap, warnings
        from kswap.allocator import configure
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = configure(memory_limit=64 * 2**20)
        print(report.applied["memory_limit"], report.memory_limit_bytes)
        print(len(caught), caught[0].filename, "host tier" in str(caught[0].message))
        import tensorflow as tf
        small = tf.ones((4, 1024, 1024)) + 1      # 16 MiB fits
        print("FITS", flush=True)
        big = tf.ones((32, 1024, 1024)) + 1       # 128 MiB does not
        print("NO OOM", float(big[0, 0, 0]), flush=True)
        """
    )
    lines = proc.stdout.split("\n")
    assert lines[0] == "TF_CPU_BFC_MEM_LIMIT_IN_MB=64 (device memory emulated on CPU:0) 67108864"
    assert lines[1] == "1 <string> True"  # one warning, pointing at the caller
    assert lines[2] == "FITS", proc.stderr[-2000:]
    assert "NO OOM" not in proc.stdout and proc.returncode != 0


TRAIN_OVER_A_LIMIT = """
    import sys
    import kswap
    from kswap.allocator import configure
    configure(memory_limit=int(sys.argv[1]) * 2**20)
    import keras, numpy as np
    inp = keras.Input((64, 64, 8))
    h = inp
    for i in range(3):
        h = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(h)
    out = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(h))
    model = keras.Model(inp, out)
    model.compile("sgd", "mse")
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 64, 64, 8), "float32"), rng.random((32, 2), "float32")
    print("BUILT", flush=True)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)    # one baseline step
    print("TRAINED", flush=True)
"""


def train_with_limit(mib: int) -> subprocess.Popen:
    """Starts the step under a limit of ``mib`` MiB in a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(TRAIN_OVER_A_LIMIT), str(mib)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finished(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_a_step_over_the_limit_does_not_succeed_in_its_own_process():
    # Both processes run at once: the one over the limit spends 10 s idle in the
    # BFC allocator's retry before it gives up.
    started = train_with_limit(12), train_with_limit(512)
    # a step of batch 32 holds convolution outputs of 16 MiB each
    over, fits = (_finished(proc) for proc in started)
    assert "BUILT" in over.stdout, over.stderr[-2000:]  # the limit let the model be built
    assert "TRAINED" not in over.stdout
    # an uncaught ResourceExhaustedError (exit 1), or an abort (a signal)
    assert over.returncode != 0
    assert over.returncode < 0 or over.returncode > 1 or "ResourceExhausted" in over.stderr
    # the control: the same step trains under a limit it fits in
    assert fits.returncode == 0 and "TRAINED" in fits.stdout, fits.stderr[-2000:]


# Three checks that need a fresh process each pay TensorFlow's import there:
# they share one, run in this order (TensorFlow has created no device until
# the third).
IN_ORDER = """
    import kswap, types, warnings
    from kswap.allocator import configure
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        report = configure(
            growth=True, allocator="cuda_malloc_async", host_limit=2**30, gc=False
        )
    print("GPU OPTIONS", sorted(report.not_applicable), len(w), report.applied)
    plan = types.SimpleNamespace(arena_bytes=100 * 2**20)
    print("PLAN", configure(memory_limit=plan, margin=0.25).memory_limit_bytes)
    import tensorflow as tf
    tf.ones(3)
    try:
        configure(memory_limit=2**30)
    except RuntimeError as e:
        print("RuntimeError:", e)
"""


@pytest.fixture(scope="module")
def in_order() -> dict[str, str]:
    """What each check of ``IN_ORDER`` printed, by its first word(s)."""
    proc = run(IN_ORDER)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = {}
    for line in proc.stdout.splitlines():
        for key in ("GPU OPTIONS ", "PLAN ", "RuntimeError: "):
            if line.startswith(key):
                out[key.strip(" :")] = line[len(key) :]
    return out


def test_gpu_options_without_a_gpu_are_reported_not_dropped(in_order):
    assert in_order.get("GPU OPTIONS") == "['allocator', 'gc', 'growth', 'host_limit'] 4 {}"


def test_limit_from_a_packing_plan_adds_the_margin(in_order):
    assert in_order.get("PLAN") == str(125 * 2**20)


def test_refused_after_tensorflow_created_its_devices(in_order):
    assert in_order.get("RuntimeError", "").startswith("TensorFlow has already created its devices")


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
