"""Writes docs/api.md, kswap's API reference, from the public names and their docstrings.

Every name in ``kswap.__all__`` and in the ``__all__`` of each public
subpackage and module of kswap gets an entry: its signature and the first
paragraph of its docstring (for a class, also its public methods and
properties, each with its docstring's first line). What a module is for, and
what the constants mean, is written here. ``tests/test_api_docs.py`` checks
that the committed docs/api.md names every public name.

Run after changing a public name or its docstring:
    python docs/make_api.py            # writes docs/api.md
    python docs/make_api.py --check    # exit status 1 if docs/api.md is out of date
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: Module -> (guide in docs/, what it is for). In the order of the reference.
MODULES: dict[str, tuple[str | None, str]] = {
    "kswap": (
        None,
        "The names most programs need, imported on first use (``import kswap`` itself "
        "imports no TensorFlow; it selects TensorFlow's CPU allocator that records memory, "
        "so import it before running any TensorFlow op). Each is defined in a subpackage "
        "below, where its entry is.",
    ),
    "kswap.offloading": (
        "offloading.md",
        "Offloading on and off in one line: ``OffloadingModel`` wraps a model's layers in "
        "``kswap.layers.Offload``, ``strip`` takes the wrappers off.",
    ),
    "kswap.layers": (
        "offloading.md",
        "The wrapper layer behind ``OffloadingModel``, for wrapping layers by hand (a "
        "subclassed model's, for instance).",
    ),
    "kswap.tuning": (
        "autotune.md",
        "Changing an offloaded model's per-block actions, by hand (``apply_plan``) or from "
        "profiled steps inside ``fit`` (``AutoTune``).",
    ),
    "kswap.profiler": (
        "profiling.md",
        "Profiling and measuring training steps from TensorFlow's allocator events.",
    ),
    "kswap.trace": (
        "profiling.md",
        "The trace model (buffer lifetimes, op intervals) and reading profiler files. No "
        "TensorFlow: traces load, compare and pack anywhere.",
    ),
    "kswap.allocator": (
        "allocator.md",
        "SmartPool packing of buffer lifetimes into one arena, and TensorFlow's allocator "
        "options. Needs NumPy only (``configure`` imports TensorFlow when called).",
    ),
    "kswap.planning": (
        "planning.md",
        "The planner: workloads, links, devices, per-block actions, the simulator, the "
        "strategies and plans. Plain Python, free of any framework.",
    ),
    "kswap.estimate": (
        "estimate.md",
        "Static planning: a training step's workload from a Keras model's shapes, and its plan "
        "(nothing runs).",
    ),
    "kswap.transfer": (
        "offloading.md",
        "The one module that decides device placement: copies between the device and the host "
        "tier (real copies under a reserved name scope when the host tier is emulated on a "
        "CPU), variables moved between tiers, and the link measured.",
    ),
    "kswap.optimizer_state": (
        "offloading.md#optimizer-state-in-host-memory",
        "Optimizer slots in host memory (``OffloadingModel(..., optimizer_state='host')``).",
    ),
    "kswap.modelspec": (
        "profiling.md#command-line",
        "How the command line names, builds and feeds a model (``--model``, ``--input``).",
    ),
    "kswap.demo": (
        "demo.md",
        "``kswap demo`` (``make demo``): a keras.applications model trained plain, offloaded "
        "and with ``AutoTune``, each in a fresh process; the table, the memory chart and a "
        "TensorBoard logdir.",
    ),
    "kswap.cli": ("profiling.md#command-line", "The ``kswap`` command."),
}

#: What constants and names without a docstring are.
NOTES: dict[str, str] = {
    "kswap.demo.RUNS": "The demo's runs, in order: ``baseline`` (the plain model), "
    "``offload`` (``OffloadingModel``) and ``autotune`` (offloaded, with ``AutoTune``).",
    "kswap.offloading.POLICIES": "The named policies of ``OffloadingModel``: ``all``, "
    "``conv`` and ``auto`` (reserved: use ``kswap.AutoTune``).",
    "kswap.offloading.CONV_LAYERS": "The layer classes the ``conv`` policy offloads "
    "(vDNN_conv): Conv1D/2D/3D, DepthwiseConv2D, SeparableConv1D/2D and the transposed "
    "convolutions.",
    "kswap.trace.PHASES": "The phases a buffer or an op is attributed to: forward, backward, "
    "transfer (kswap's copies between tiers), update (the optimizer) and resident (in use "
    "before profiling began).",
    "kswap.trace.RESIDENT": "The layer name of bytes in use before profiling began that "
    "belong to no layer.",
    "kswap.trace.GRANULE": "The bytes TensorFlow's BFC allocator rounds every block up to "
    "a multiple of (256): ``Trace.tensor_sizes`` rounds each request up to it.",
    "kswap.trace.STEP_MARKER": "The name of the trace event kswap puts around each profiled step.",
    "kswap.trace.TIERS": "The memory tiers: ``device`` and ``host``.",
    "kswap.trace.UNATTRIBUTED": "The layer name of what belongs to no layer (the loss, the "
    "input pipeline, Keras operations between layers).",
    "kswap.trace.UNKNOWN_PHASE": "The phase of a buffer whose op name gives none.",
    "kswap.profiler.OPTIMIZER": "The layer name of the optimizer's variables in a trace.",
    "kswap.allocator.ALGORITHMS": "Packing algorithms by name: ``greedy_size``, "
    "``first_fit``, ``multi_order``, ``local_search`` and ``best`` (the smallest valid plan "
    "of these).",
    "kswap.planning.DEVICES": "Device presets by name: ``k40``, ``v100``, ``a100``, "
    "``h100``, ``h200``, ``cpu`` (datasheet figures; the table is in planning.md).",
    "kswap.planning.LINKS": "Link presets by name: ``pcie3``, ``pcie4``, ``pcie5``, "
    "``nvlink-c2c``, ``cpu`` (pinned copy speeds per direction; the table is in "
    "planning.md).",
    "kswap.planning.STRATEGIES": "Planning strategies by name, each "
    "``(workload, budget_bytes, link) -> Plan``: vDNN's ``all``, ``conv``, ``dyn``; "
    "AutoSwap's ``doa``, ``aoa``, ``wdoa``, ``vote``; ``hybrid``; ``auto``; ``exhaustive``.",
    "kswap.transfer.HOST_SCOPE": "The name scope of every op that puts a tensor in the host "
    "tier (how the profiler tells host bytes from device bytes when the tiers are emulated).",
    "kswap.transfer.DEVICE_SCOPE": "The name scope of every op that brings a tensor back to "
    "the device tier.",
    "kswap.optimizer_state.TIERS": "Where ``optimizer_state`` may put an optimizer's slots: "
    "``device`` or ``host``.",
    "kswap.optimizer_state.check_optimizer_state": "Returns ``optimizer_state`` if it is one "
    "of ``TIERS``; raises ``ValueError`` naming the value otherwise.",
    "kswap.cli.main": "The ``kswap`` command (``kswap profile``, ``measure``, ``pack``, "
    "``plan``...): parses ``argv`` (default ``sys.argv[1:]``) and returns the exit status; "
    "``kswap --help`` lists the subcommands.",
}

#: Methods of Keras base classes and callback hooks: not listed under a class.
_INHERITED_HOOKS = re.compile(r"^(on_|set_|build|call|compute_|get_config|from_config)")


_SECTIONS = ("Args", "Attributes", "Returns", "Raises")


def _summary(obj) -> str:
    """The docstring's first paragraph, then its Args/Attributes/Returns/Raises sections."""
    doc = inspect.getdoc(obj) or ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    parts = [paragraph]
    for section, body in _sections(doc):
        items = _items(body) if section in ("Args", "Attributes", "Raises") else []
        if items:
            parts.append(f"{section}:\n" + "\n".join(f"- `{k}`: {v}" for k, v in items))
        else:
            parts.append(f"{section}: " + " ".join(body.split()))
    return "\n\n".join(parts)


def _sections(doc: str) -> list[tuple[str, str]]:
    """Google-style sections of a docstring: ``[(name, indented body)]``."""
    found = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        head = lines[i].strip().rstrip(":")
        if lines[i].strip().endswith(":") and head in _SECTIONS and not lines[i].startswith(" "):
            body = []
            i += 1
            while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
                body.append(lines[i])
                i += 1
            found.append((head, "\n".join(body)))
        else:
            i += 1
    return found


def _items(body: str) -> list[tuple[str, str]]:
    """``name: text`` entries of a section body (continuation lines indented further)."""
    items: list[tuple[str, str]] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        match = re.match(r"^ {4}(\*{0,2}[\w.]+)(?: \([^)]*\))?: ?(.*)$", line)
        if match:
            items.append((match.group(1), match.group(2).strip()))
        elif items:
            items[-1] = (items[-1][0], f"{items[-1][1]} {line.strip()}")
    return items


def _plain(text: str) -> str:
    """Markdown from reST-ish docstring text: ``x`` -> `x`, :func:`~a.b` -> `b`."""
    text = re.sub(r":\w+:`~[\w.]*\.(\w+)`", r"`\1`", text)
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _signature(name: str, obj) -> str:
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return name
    sig = re.sub(r"<function (\w+) at 0x[0-9a-f]+>", r"\1", sig)
    sig = re.sub(r"(: |-> )'([^']*)'", r"\1\2", sig)  # postponed annotations, unquoted
    sig = re.sub(r"^\((?:self|cls)(?:, |(?=\)))", "(", sig)  # methods: as called on an instance
    if inspect.isclass(obj):
        sig = sig.removesuffix(" -> None")
    return f"{name}{sig}"


def _members(cls) -> list[str]:
    """Public methods and properties a class defines itself, one line each."""
    lines = []
    for attr, value in vars(cls).items():
        if attr.startswith("_") or _INHERITED_HOOKS.match(attr):
            continue
        if isinstance(value, property):
            kind, target = "property", value.fget
            head = f"`{attr}`"
        elif isinstance(value, classmethod | staticmethod):
            kind, target = type(value).__name__, value.__func__
            head = f"`{_signature(attr, target)}`"
        elif inspect.isfunction(value):
            kind, target = "method", value
            head = f"`{_signature(attr, target)}`"
        else:
            continue
        first = (inspect.getdoc(target) or "").split("\n", 1)[0].strip()
        prefix = "" if kind == "method" else f"({kind}) "
        lines.append(f"- {head}: {prefix}{first}".rstrip(": "))
    return lines


def _entry(module: str, name: str, obj) -> list[str]:
    qualified = f"{module}.{name}"
    lines = [f"### `{qualified}`", ""]
    if getattr(obj, "_is_protocol", False):
        lines += [f"protocol `{name}`", ""]
    elif inspect.isclass(obj) and issubclass(obj, Exception):
        lines += [f"exception `{name}`", ""]
    elif inspect.isclass(obj) or callable(obj):
        kind = "class" if inspect.isclass(obj) else "function"
        lines += [f"{kind} `{_signature(name, obj)}`", ""]
    else:
        lines += [f"`{name} = {_value(obj)}`", ""]
    text = NOTES.get(qualified) or _summary(obj) if callable(obj) else NOTES.get(qualified)
    if not text:
        raise SystemExit(f"{qualified} has no docstring and no note in docs/make_api.py")
    lines += [text, ""]
    if inspect.isclass(obj):
        members = _members(obj)
        if members:
            lines += ["Methods and properties:", "", *members, ""]
    return lines


def _value(obj) -> str:
    if isinstance(obj, str | int | float):
        return repr(obj)
    if isinstance(obj, tuple) and all(isinstance(v, str) for v in obj):
        return repr(obj)
    if isinstance(obj, tuple):
        return "(" + ", ".join(getattr(v, "__name__", repr(v)) for v in obj) + ")"
    keys = list(obj)
    return "{" + ", ".join(f"{k!r}: ..." for k in keys) + "}"


def render() -> str:
    """The text of docs/api.md."""
    import pkgutil

    import kswap

    public = {f"kswap.{m.name}" for m in pkgutil.iter_modules(kswap.__path__)}
    unknown = sorted(m for m in public - set(MODULES) if not m.split(".")[-1].startswith("_"))
    unknown = [m for m in unknown if m != "kswap.__main__"]
    if unknown:
        raise SystemExit(f"add {unknown} to MODULES in docs/make_api.py (its guide, its purpose)")
    out = [
        "# API reference",
        "",
        "<!-- Written by `python docs/make_api.py` from kswap's docstrings: edit those and",
        "     the script, not this file. tests/test_api_docs.py checks every public name. -->",
        "",
        "Every public name of kswap: the names in `kswap.__all__` and in the `__all__` of",
        "each public subpackage and module, with its signature and what its docstring says",
        "first. The guides ([how it works](how-it-works.md), [offloading](offloading.md),",
        "[profiling](profiling.md), [allocator](allocator.md), [planning](planning.md),",
        "[static planning](estimate.md), [AutoTune](autotune.md)) explain how the pieces",
        "fit together; [limits](limits.md) and [CPU emulation](emulation.md) say what they",
        "do not do. The docstrings (`help(kswap.OffloadingModel)`) have the full argument",
        "lists.",
        "",
    ]
    out += ["| module | what it is for |", "|---|---|"]
    for module, (_, what) in MODULES.items():
        anchor = module.replace(".", "")
        out.append(f"| [`{module}`](#{anchor}) | {_plain(what.split('. ')[0].rstrip('.'))}. |")
    out.append("")
    for module, (guide, what) in MODULES.items():
        mod = importlib.import_module(module)
        out += [f"## `{module}`", "", _plain(what)]
        if guide:
            out[-1] += f" Guide: [{guide.split('#')[0]}]({guide})."
        out.append("")
        if module == "kswap":
            out += ["| name | defined in |", "|---|---|"]
            for name in mod.__all__:
                obj = getattr(mod, name)
                home = obj.__module__.rsplit(".", 1)[0] if "." in obj.__module__ else module
                for candidate in MODULES:
                    if candidate != "kswap" and name in getattr(
                        importlib.import_module(candidate), "__all__", ()
                    ):
                        home = candidate
                        break
                anchor = f"{home}{name}".replace(".", "").lower()
                out.append(f"| `kswap.{name}` | [`{home}.{name}`](#{anchor}) |")
            out.append("")
            continue
        for name in mod.__all__:
            out += [_plain(line) for line in _entry(module, name, getattr(mod, name))]
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    text = render()
    path = os.path.join(HERE, "api.md")
    if args.check:
        with open(path, encoding="utf-8") as f:
            same = f.read() == text
        print("docs/api.md is up to date" if same else "docs/api.md is out of date")
        return 0 if same else 1
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
