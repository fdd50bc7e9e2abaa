"""Bytes of a model's training state: weights, optimizer slots, weight gradients.

    python benchmarks/training_state.py                  # ResNet50, MobileNetV2, VGG16
    python benchmarks/training_state.py --optimizer sgd --input 160,160,3

Offloading activations cannot bring a step's device peak below the weights
and the optimizer's slots, which stay on the device for the whole step (the
"resident" column). Weight gradients come on top while they wait for the
optimizer; inside a ``tf.function`` it applies each one as soon as it is
ready, so not all of them need to be alive at once. The models are the ones
``benchmarks/offload.py`` measures (same builder, seed and optimizer); the
optimizer's slots are counted from its variables once built. Sizes only: no
step runs.
"""

from __future__ import annotations

import argparse
import json

from _common import mib, run_json, table
from offload import MODELS, build_variant


def worker(args) -> None:
    from kswap.profiler.profile import variable_bytes

    model = build_variant(args.model, "baseline", args.input, args.optimizer)
    model.optimizer.build(model.trainable_variables)
    nbytes = lambda vs: sum(variable_bytes(v) for v in vs)  # noqa: E731
    weights = nbytes(model.weights)
    slots = nbytes(model.optimizer.variables)
    grads = nbytes(model.trainable_variables)
    print(json.dumps({"weights": weights, "optimizer": slots, "gradients": grads}))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--input", default="96,96,3")
    p.add_argument("--optimizer", default="adam", help="a Keras optimizer name")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    rows = []
    for name in args.models.split(","):
        cmd = [__file__, "--worker", "--model", name, "--input", args.input]
        r = run_json([*cmd, "--optimizer", args.optimizer])
        resident = r["weights"] + r["optimizer"]
        rows.append(
            [name, *(mib(r[k]) for k in ("weights", "optimizer", "gradients")), mib(resident)]
        )
        print(rows[-1], flush=True)
    print(f"\ninput {args.input}, optimizer {args.optimizer}; sizes, no step run\n")
    headers = ["model", "weights MiB", "optimizer MiB", "gradients MiB", "resident MiB"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
