"""The raw trace kswap keeps opens in TensorBoard's Profile plugin."""

import pytest

import kswap
from tests.profiler.models import chain, data
from tests.tensorboard import get, memory_profile_peaks, tensorboard


@pytest.mark.slow
def test_profile_plugin_serves_memory_profile(tmp_path):
    pytest.importorskip("tensorboard_plugin_profile")
    model = chain()
    x, y = data(model)
    trace = kswap.profile(model, x, y, steps=2, batch_size=32, logdir=str(tmp_path))
    with tensorboard(tmp_path) as base:
        assert get(f"{base}/plugins_listing")["profile"]["enabled"]
        (run,) = get(f"{base}/plugin/profile/runs")
        (theirs,) = memory_profile_peaks(base, run).values()
        assert abs(theirs - trace.peak_bytes()) <= 0.02 * trace.peak_bytes()
