import json

import numpy as np
import pytest
import tensorflow as tf

import kswap
from tests.profiler.models import chain, data
from tests.scripts import run_python


def test_measure_fields():
    model = chain()
    x, y = data(model)
    m = kswap.measure(model, x, y, steps=2, batch_size=32)
    assert m.emulated
    assert m.device_peak_bytes >= m.step_peak_bytes > 0
    assert m.host_peak_bytes == 0  # nothing is offloaded
    assert m.step_seconds > 0 and m.batch_size == 32 and m.steps == 2
    assert m.trace.peak_bytes() == m.device_peak_bytes
    assert set(m.to_dict()) == {
        "device_peak_bytes",
        "step_peak_bytes",
        "host_peak_bytes",
        "step_seconds",
        "emulated",
        "batch_size",
        "steps",
    }


def _progress_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("[kswap] measure: ")]


def test_isolated_measurement_ignores_other_tensors_of_this_process(capsys):
    model = chain(name="iso")
    x, y = data(model)
    other = tf.ones((16, 1024, 1024))  # 64 MiB another model could be holding
    here = kswap.measure(model, x, y, steps=1, batch_size=32, verbose=0)
    assert _progress_lines(capsys.readouterr().err) == []
    there = kswap.measure(model, x, y, steps=1, batch_size=32, isolate=True)
    # each stage is announced as it starts, the fresh process's own included
    stages = [line.split(": ", 1)[1] for line in _progress_lines(capsys.readouterr().err)]
    assert stages[:-1] == [
        "saving the model and the data for a fresh process",
        "starting a fresh process (imports TensorFlow, loads the model)",
        "warm-up step (traces the training step)",
        "1 timed step",
        "1 profiled step",
    ]
    assert stages[-1].startswith("done in ") and stages[-1].endswith(" s")
    assert there.trace is None and there.emulated and there.step_peak_bytes > 0
    assert here.device_peak_bytes >= other.numpy().nbytes
    # the fresh process does not see the 64 MiB (half of it is margin for the
    # allocator's rounding, far above this small model's own variation)
    assert there.device_peak_bytes < here.device_peak_bytes - other.numpy().nbytes // 2


def test_verbose_is_checked():
    model = chain(name="verbose")
    x, y = data(model)
    for bad in (2, -1, 0.5, "yes"):
        with pytest.raises(ValueError, match=r"`verbose` must be 0 or 1\. Received: verbose="):
            kswap.measure(model, x, y, steps=1, verbose=bad)


#: Measures :func:`sequence_chain`'s step at each batch size twice, in one fresh process.
_SCALING = """
import json, sys
import kswap
from tests.profiler.models import data, sequence_chain
model = sequence_chain()
x, y = data(model, 32)
sizes = json.loads(sys.argv[1])
print(json.dumps([[kswap.measure(model, x, y, steps=1, batch_size=b, verbose=0).device_peak_bytes
                   for _ in range(2)] for b in sizes]))
"""


def test_step_peak_scales_with_batch_when_activations_dominate():
    sizes = (8, 16, 32)
    # measured in a fresh process: the device peak counts every live tensor of
    # the process, and this one holds other tests' models. The least of two
    # measurements: on a loaded machine the executor has run independent ops in
    # an order that held 6.5-7.5 outputs at batch 8, where it held 4.3-4.8 in
    # most runs.
    proc = run_python("-c", _SCALING, json.dumps(sizes), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    peaks = [min(pair) for pair in json.loads(proc.stdout.strip().splitlines()[-1])]
    # weights are a few KiB, so the peak is a number of layer outputs (0.5 MiB
    # per example each): backward needs the three forward outputs plus an
    # upstream gradient at least, and the whole step never holds more than
    # seven. The executor orders independent ops freely, which moves the peak
    # by one output or more between runs, so the count is a range. (Convolutions would
    # not do: TensorFlow's CPU filter gradient takes an im2col buffer, nine
    # outputs' worth per example up to a cap, which outweighs them at small
    # batches.)
    per_output = [b * 4096 * 32 * 4 for b in sizes]
    counts = np.array(peaks) / np.array(per_output)
    assert np.all((counts >= 4) & (counts < 7)), dict(zip(sizes, counts.round(2), strict=True))
