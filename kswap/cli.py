"""The ``kswap`` command line: the argument parser and ``main``.

``main`` parses the arguments and runs the subcommand; the code of each
subcommand is in ``kswap._commands`` (``profile`` for ``kswap profile`` and
``kswap measure``, ``pack``, ``plan``, ``demo``).

Example:
    kswap profile --model keras.applications.ResNet50 --input 64,64,3 --batch 16
    kswap profile --model keras.applications.ResNet50 --input 64,64,3 --pack --save t.json
    kswap pack t.json --plot packing.png
    kswap measure --model keras.applications.VGG16 --input 64,64,3 --batch 8 --json
    kswap plan --model keras.applications.VGG16 --input 224,224,3 --batch 256 --classes 1000 \
        --budget 13.5GiB --link pcie3 --device k40
    kswap demo --out demo
"""

from __future__ import annotations

import argparse
import os
import sys

from kswap._commands import demo, pack, plan, profile
from kswap.allocator.report import DEFAULT_ALGORITHMS

__all__ = ["main"]

#: Default ``--steps`` of ``kswap profile`` and ``kswap measure``: those of
#: ``kswap.profile`` and ``kswap.measure`` (not read from their signatures here,
#: which would import TensorFlow before the arguments are parsed).
_PROFILE_STEPS = 2
_MEASURE_STEPS = 3


def _positive_arg(name: str):
    """An argparse ``type`` for an integer >= 1 (``plan.positive_int``), as a parse error."""

    def parse(text: str) -> int:
        try:
            return plan.positive_int(text, name)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _add_model_args(p: argparse.ArgumentParser, steps: int, steps_help: str) -> None:
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.add_argument(
        "--model", required=True, help="keras.applications.ResNet50 or package.module:factory"
    )
    p.add_argument("--input", default=None, help="input shape without batch, e.g. 64,64,3")
    p.add_argument(
        "--batch", type=_positive_arg("batch"), default=16, help="batch size (default 16)"
    )
    p.add_argument(
        "--steps",
        type=_positive_arg("steps"),
        default=steps,
        help=f"{steps_help} (default {steps})",
    )
    p.add_argument(
        "--classes", type=_positive_arg("classes"), default=10, help="classes of a classifier (10)"
    )
    p.add_argument("--optimizer", default="adam", help="optimizer name (default adam)")
    p.add_argument(
        "--offload",
        default=None,
        metavar="POLICY",
        help="train through kswap.OffloadingModel(model, policy=POLICY): all, conv",
    )
    p.add_argument(
        "--optimizer-state",
        default="device",
        choices=("device", "host"),
        help="where the optimizer's slots live (default device)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kswap", description="Memory profiling and offloading for Keras training."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("profile", help="device peak, step time and bytes per layer")
    _add_model_args(p, _PROFILE_STEPS, "timed and profiled steps")
    p.add_argument("--logdir", default=None, help="keep the raw trace here for TensorBoard")
    p.add_argument(
        "--top", type=_positive_arg("top"), default=20, help="layers to list (default 20)"
    )
    p.add_argument("--save", default=None, help="write the kswap trace as JSON")
    p.add_argument("--pack", action="store_true", help="also pack the step (SmartPool)")
    p.add_argument("--plot", default=None, help="with --pack: draw the best packing (PNG)")
    k = sub.add_parser("pack", help="pack a saved trace's step; compare with the BFC allocator")
    k.error = _one_line_error(k)  # type: ignore[method-assign]
    k.add_argument("trace", help="a trace saved by `kswap profile --save` or Trace.to_json")
    k.add_argument("--algorithms", default=",".join(DEFAULT_ALGORITHMS), help="comma-separated")
    k.add_argument("--plot", default=None, help="draw the best packing (PNG)")
    m = sub.add_parser("measure", help="device peak and step time (--json: as JSON)")
    _add_model_args(m, _MEASURE_STEPS, "timed and profiled steps, as kswap.measure")
    m.add_argument("--json", action="store_true", help="print one JSON object (bytes, seconds)")
    _add_plan_parser(sub)
    _add_demo_parser(sub)
    return parser


def _add_demo_parser(sub) -> None:
    from kswap.demo.runner import Options

    d = Options()
    p = sub.add_parser(
        "demo",
        help="train a keras.applications model three ways: plain, offloaded, with AutoTune",
        description="Trains a model with Keras's progress bars in three fresh processes: "
        "the plain model, kswap.OffloadingModel(model) and that with kswap.AutoTune(budget). "
        "Prints one table, AutoTune's plan and the packing of one step; writes the charts "
        "and a TensorBoard logdir to --out.",
    )
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.add_argument("--model", default=d.model, help=f"model to train (default {d.model})")
    shape = ",".join(map(str, d.input))
    p.add_argument("--input", default=shape, help=f"input shape without batch ({shape})")
    p.add_argument(
        "--batch", type=_positive_arg("batch"), default=d.batch, help=f"batch size ({d.batch})"
    )
    p.add_argument(
        "--steps",
        type=_positive_arg("steps"),
        default=d.steps,
        help=f"timed steps per run, their median is the step time ({d.steps})",
    )
    p.add_argument(
        "--budget", default=d.budget, help=f"AutoTune's budget: 0.5, 50%%, 300MiB ({d.budget})"
    )
    p.add_argument("--out", default=d.out, help=f"output directory, rewritten ({d.out})")


def _one_line_error(parser: argparse.ArgumentParser):
    """``parser.error`` that prints one line (no usage) and exits with status 2."""

    def error(message: str):
        print(f"kswap: error: {message} (see {parser.prog} --help)", file=sys.stderr)
        raise SystemExit(2)

    return error


def _add_plan_parser(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="plan swap/recompute under a memory budget from the model's shapes (no run)",
        description="Estimates one training step of a model from its shapes and a device "
        "preset (nothing is run or downloaded) and plans what to swap, recompute or keep "
        "under a memory budget.",
    )
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.add_argument(
        "--model", required=True, help="keras.applications.VGG16 or package.module:factory"
    )
    p.add_argument("--input", default=None, help="input shape without batch, e.g. 224,224,3")
    p.add_argument("--batch", default="16", help="batch size (default 16)")
    p.add_argument("--classes", default="10", help="classes of a classifier (10)")
    p.add_argument("--optimizer", default="adam", help="optimizer name (default adam)")
    p.add_argument(
        "--budget", default=None, help="12GiB, 500MB, 0.5 or 50%% (default: the device's memory)"
    )
    p.add_argument("--device", default="cpu", help="k40, v100, a100, h100, h200 or cpu")
    p.add_argument("--link", default=None, help="pcie3, pcie4, pcie5, nvlink-c2c or cpu")
    p.add_argument("--strategy", default="auto", help="auto (default), all, conv, dyn, ...")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command == "plan":
            print(f"kswap: error: unrecognized arguments: {' '.join(extra)}", file=sys.stderr)
            return 2
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up quiet
    try:
        if args.command == "profile":
            return profile.run(args)
        if args.command == "pack":
            return pack.run(args)
        if args.command == "plan":
            return plan.run(args)
        if args.command == "demo":
            return demo.run(args)
        return profile.run_measure(args)
    except ValueError as e:
        message = " ".join(str(e).split())  # one line
        print(f"kswap: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
