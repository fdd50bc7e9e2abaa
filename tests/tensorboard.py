"""TensorBoard on localhost for the tests: started on a free port, read over HTTP."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_bytes(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
    if body[:2] == b"\x1f\x8b":  # the profile plugin gzips some answers
        body = gzip.decompress(body)
    return body


def get(url: str):
    return json.loads(get_bytes(url))


@contextlib.contextmanager
def tensorboard(logdir: str | os.PathLike, timeout: float = 90) -> Iterator[str]:
    """Runs TensorBoard on ``logdir`` and yields its API's base URL once it answers."""
    port = free_port()
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", os.fspath(logdir)]
    proc = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    base = f"http://127.0.0.1:{port}/data"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                get(f"{base}/plugins_listing")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def memory_profile_peaks(base: str, run: str) -> dict[str, int]:
    """The Profile plugin's ``memory_profile`` of one run: the peak bytes of each allocator."""
    assert "memory_profile" in get(f"{base}/plugin/profile/run_tools?run={run}")
    (host,) = get(f"{base}/plugin/profile/hosts?run={run}&tag=memory_profile")
    query = urllib.parse.urlencode({"run": run, "tag": "memory_profile", "host": host["hostname"]})
    profile = get(f"{base}/plugin/profile/data?{query}")["memoryProfilePerAllocator"]
    return {
        name: int(value["profileSummary"]["peakStats"]["peakBytesInUse"])
        for name, value in profile.items()
    }
