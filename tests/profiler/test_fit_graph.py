"""kswap.profile and kswap.measure run the training graph model.fit runs."""

import json

import keras
import numpy as np
import tensorflow as tf

import kswap
from kswap.profiler.fit_steps import FitSteps, run_steps
from tests.profiler import custom
from tests.profiler.models import chain
from tests.profiler.models import data as chain_data


def data(n=40, features=16, units=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, features), dtype=np.float32), rng.random((n, units), dtype=np.float32)


def test_profiled_step_is_traced_with_an_unknown_batch_dimension():
    model = custom.scale_shift_model("unknown_batch")
    x, y = data()
    kswap.profile(model, x, y, steps=2, batch_size=16)
    # one trace, for any batch size: train_on_batch would trace (16, 16)
    assert custom.traced("unknown_batch") == [(None, 16)]
    # fit (40 samples: a partial last batch) runs that graph: it traces nothing new
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
    assert custom.traced("unknown_batch") == [(None, 16)]
    # while train_on_batch traces a graph of its own, for its static batch
    model.train_on_batch(x[:16], y[:16])
    assert custom.traced("unknown_batch") == [(None, 16), (16, 16)]


def test_measured_steps_run_one_graph_and_the_model_is_left_as_it_was():
    model = custom.scale_shift_model("measured")
    x, y = data()
    before = [w.copy() for w in model.get_weights()]
    m = kswap.measure(model, x, y, steps=2, batch_size=8)
    assert m.batch_size == 8 and m.device_peak_bytes >= m.step_peak_bytes > 0
    # warm-up, timed and profiled steps: a single trace, of fit's graph
    assert custom.traced("measured") == [(None, 16)]
    for a, b in zip(model.get_weights(), before, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not hasattr(model, "history")  # the warm-up's fit left no History behind


def test_a_dataset_batched_with_drop_remainder_keeps_its_static_batch():
    model = custom.scale_shift_model("static_batch")
    x, y = data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
    kswap.profile(model, ds, steps=2)
    assert custom.traced("static_batch") == [(8, 16)]
    model.fit(ds, epochs=1, verbose=0, shuffle=False)  # fit traces this dataset the same way
    assert custom.traced("static_batch") == [(8, 16)]


def test_fit_steps_datasets_and_run_steps():
    model = custom.scale_shift_model("fit_steps")
    x, y = data()
    batches = [(x[:8], y[:8]), (x[8:16], None)]
    steps = FitSteps(model, batches)
    spec = steps.dataset(0).element_spec
    assert [s.shape.as_list() for s in spec] == [[None, 16], [None, 4]]
    assert [s.shape.as_list() for s in steps.dataset(1).element_spec] == [[None, 16]]
    static = FitSteps(model, batches, static_batch=True).dataset(0).element_spec
    assert [s.shape.as_list() for s in static] == [[8, 16], [8, 4]]
    times = run_steps(model, [(x[:8], y[:8])] * 3)  # the first through fit (no train function)
    assert len(times) == 3 and all(t > 0 for t in times)
    assert custom.traced("fit_steps") == [(None, 16)]


def test_the_isolated_process_runs_fit_s_graph_too(tmp_path, monkeypatch):
    log = tmp_path / "steps.jsonl"
    monkeypatch.setenv(custom.STEP_LOG, str(log))
    model = custom.scale_shift_model("isolated_graph")
    x, y = data()
    m = kswap.measure(model, x, y, steps=1, batch_size=16, isolate=True)
    assert m.trace is None and m.step_peak_bytes > 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    # traced in the fresh process (this one traced nothing), once, batch unknown
    assert custom.traced("isolated_graph") == []
    assert lines == [{"model": "isolated_graph", "shape": [None, 16]}]


def test_several_steps_per_execution_still_one_batch_per_step():
    model = chain()
    model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=3)
    x, y = chain_data(model)
    trace = kswap.profile(model, x, y, steps=2, batch_size=32)
    assert len(trace.steps) == 2 and trace.metadata["batch_size"] == 32
    # fit's loop of steps names every op inside it; they are still the layers'
    forward = [b for b in trace.buffers if b.op and b.op.endswith("/MatMul") and b.step == 0]
    assert {b.layer for b in forward} >= {"d1", "d2", "d3"}
    assert all(not b.op.startswith("while/") for b in forward)
    # one batch per profiled step: d1's output appears once in each
    outputs = [b for b in trace.buffers if b.op == "chain_1/d1_1/MatMul"]
    assert sorted(b.step for b in outputs) == [0, 1]
