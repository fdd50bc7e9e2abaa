"""How long the first ``fit`` call takes, plain and offloaded: tracing the step.

    python benchmarks/first_step.py                          # ResNet50, MobileNetV2 at 32x32
    python benchmarks/first_step.py --models VGG16 --repeats 3

The first call of ``model.fit`` traces the training step (and Grappler
optimizes the graph) before it runs it. Where the optimizer is not built yet
(a compiled model fresh from ``compile``), Keras builds it inside that first
trace, and ``tf.function``, having seen variables made, traces the step a
second time. ``kswap.OffloadingModel`` builds the optimizer of the model it
returns, so its step is traced once.

Variants, each in a fresh process per repeat (nothing else traced in it),
variants interleaved; the time of one ``fit`` call of one batch (``--batch``
examples, Adam), and of a second call (the step traced):

- ``plain``: the compiled model as it is (its optimizer built in the trace);
- ``plain-built``: the same with ``model.optimizer.build(...)`` called first;
- ``kswap``: ``kswap.OffloadingModel(model)``.

Prints a markdown table of the medians over ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from _common import model_args, run_worker, table

VARIANTS = ("plain", "plain-built", "kswap")


def worker(args) -> None:
    import keras
    import numpy as np

    import kswap

    shape = tuple(int(d) for d in args.input.split(","))
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, args.model)(weights=None, input_shape=shape, classes=10)
    model.compile("adam", "sparse_categorical_crossentropy")
    if args.variant == "plain-built":
        model.optimizer.build(model.trainable_variables)
    elif args.variant == "kswap":
        model = kswap.OffloadingModel(model)
    rng = np.random.default_rng(0)
    x = rng.random((args.batch, *shape), dtype=np.float32)
    y = rng.integers(0, 10, args.batch)
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0)
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"first_seconds": seconds[0], "second_seconds": seconds[1]}))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    model_args(p, models="ResNet50,MobileNetV2", input_shape="32,32,3", batch=8)
    p.add_argument("--repeats", type=int, default=1, help="fresh processes per variant")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.repeats < 1:
        p.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.worker:
        return worker(args)
    rows = []
    for name in args.models.split(","):
        runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for _ in range(args.repeats):
            for v in VARIANTS:
                spec = dict(model=name, variant=v, input=args.input, batch=args.batch)
                runs[v].append(run_worker(__file__, **spec))
                print(name, v, json.dumps(runs[v][-1]), file=sys.stderr, flush=True)
        plain = statistics.median(r["first_seconds"] for r in runs["plain"])
        for v in VARIANTS:
            first = statistics.median(r["first_seconds"] for r in runs[v])
            second = statistics.median(r["second_seconds"] for r in runs[v])
            rows.append([name, v, f"{first:.1f}", f"{first / plain:.2f}", f"{second:.2f}"])
    print(
        f"input {args.input}, batch {args.batch}, Adam; medians of {args.repeats} fresh "
        "processes per variant, variants interleaved\n"
    )
    print(table(["model", "variant", "first fit s", "of plain", "second fit s"], rows))


if __name__ == "__main__":
    main()
