"""The raw trace kswap keeps opens in TensorBoard's Profile plugin."""

import gzip
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import kswap
from tests.profiler.models import chain, data


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
    if body[:2] == b"\x1f\x8b":  # the plugin gzips some answers
        body = gzip.decompress(body)
    return json.loads(body)


@pytest.mark.slow
def test_profile_plugin_serves_memory_profile(tmp_path):
    pytest.importorskip("tensorboard_plugin_profile")
    model = chain()
    x, y = data(model)
    trace = kswap.profile(model, x, y, steps=2, batch_size=32, logdir=str(tmp_path))
    port = _free_port()
    tb = [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(tmp_path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(
        tb,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    base = f"http://127.0.0.1:{port}/data"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                listing = _get(f"{base}/plugins_listing")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.5)
        assert listing["profile"]["enabled"]
        (run,) = _get(f"{base}/plugin/profile/runs")
        assert "memory_profile" in _get(f"{base}/plugin/profile/run_tools?run={run}")
        (host,) = _get(f"{base}/plugin/profile/hosts?run={run}&tag=memory_profile")
        profile = _get(
            f"{base}/plugin/profile/data?run={run}&tag=memory_profile&host={host['hostname']}"
        )["memoryProfilePerAllocator"]
        (summary,) = [v["profileSummary"] for v in profile.values()]
        theirs = int(summary["peakStats"]["peakBytesInUse"])
        assert abs(theirs - trace.peak_bytes()) <= 0.02 * trace.peak_bytes()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
