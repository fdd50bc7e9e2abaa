"""kswap, kswap.trace, .allocator and .planning import without TensorFlow; the rest says so."""

import json
import os
import subprocess
import sys
import textwrap

# Run first in a fresh interpreter: makes TensorFlow and Keras unimportable, as
# on a machine without them (Keras with KERAS_BACKEND=tensorflow imports it).
BLOCK = """
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("tensorflow", "keras"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Block())
"""


def run(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
    )


def test_pure_packages_import_without_tensorflow():
    proc = run(
        """
        import importlib, json, pkgutil, sys
        import kswap, kswap.allocator, kswap.trace, kswap.cli, kswap.planning
        names = []
        for package in (kswap.trace, kswap.allocator, kswap.planning):
            for m in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                importlib.import_module(m.name)
                names.append(m.name)
        from kswap.allocator import pack
        from kswap.trace import Allocation, Trace
        trace = Trace(buffers=(Allocation(size=1024, start_ns=0, end_ns=5),
                               Allocation(size=512, start_ns=3, end_ns=9)), duration_ns=9)
        from kswap.planning import Block, Workload, make_plan
        work = Workload(tuple(Block(f"b{i}", 100, 1.0, 2.0) for i in range(4)))
        print(json.dumps({
            "plan": make_plan(work, 0.75, "pcie3").fits,
            "modules": names,
            "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras")),
            "arena": pack(trace).arena_bytes,
            "Trace": kswap.Trace is Trace,
        }))
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    for name in (
        "allocator.config",
        "allocator.packing",
        "allocator.report",
        "trace.xspace",
        "planning.strategies",
        "planning.simulate",
    ):
        assert f"kswap.{name}" in out["modules"]
    assert out["loaded"] == []
    assert out["arena"] == 1536 and out["Trace"] and out["plan"]


def test_names_that_need_tensorflow_say_what_to_install():
    proc = run(
        """
        import kswap
        for name in ("OffloadingModel", "strip", "profile", "measure", "Measurement", "profiler"):
            try:
                getattr(kswap, name)
            except ImportError as e:
                print(f"kswap.{name} |", e)
            else:
                print(f"kswap.{name} | no error")
        try:
            import kswap.profiler
        except ImportError as e:
            print("kswap.profiler |", e)
        try:
            kswap.no_such_name
        except AttributeError as e:
            print("AttributeError |", e)
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 8
    for line in lines[:7]:
        name, message = line.split(" | ")
        assert message.startswith(f"{name} needs TensorFlow"), line
        assert "pip install kswap[cpu]" in message and "kswap[gpu]" in message
    assert lines[7] == "AttributeError | module 'kswap' has no attribute 'no_such_name'"


def test_pack_command_without_tensorflow(tmp_path):
    path = tmp_path / "t.json"
    proc = run(
        f"""
        from kswap.trace import Allocation, Trace
        Trace(buffers=(Allocation(size=4096, start_ns=0, end_ns=5),),
              steps=((0, 5),), duration_ns=5).to_json({str(path)!r})
        from kswap.cli import main
        raise SystemExit(main(["pack", {str(path)!r}, "--algorithms", "greedy_size"]))
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "greedy_size" in proc.stdout and "lower bound" in proc.stdout


def test_import_kswap_selects_the_bfc_allocator_before_tensorflow_starts():
    drop = ("TF_CPU_ALLOCATOR_USE_BFC", "KSWAP_CPU_BFC")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    code = (
        "import os, kswap, tensorflow as tf\n"
        "from kswap._env import cpu_allocator_is_bfc\n"
        "print(os.environ.get('TF_CPU_ALLOCATOR_USE_BFC'), cpu_allocator_is_bfc())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["true", "True"]
    # the control: opted out, TensorFlow's default CPU allocator reports nothing
    env["KSWAP_CPU_BFC"] = "0"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["None", "False"]


def test_this_test_process_runs_on_the_bfc_allocator():
    # conftest.py imports kswap before any TensorFlow op
    from kswap._env import cpu_allocator_is_bfc

    assert os.environ["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    assert cpu_allocator_is_bfc()
