"""Does training repeat itself bit for bit? The same traced step, again and again.

Builds the sequential test model of ``tests/layers/models.py`` (plain, or
under ``kswap.OffloadingModel`` with ``--action`` on the blocks named in
``--blocks`` and ``keep`` on the others), traces its ``model.fit`` step once,
then trains ``--runs`` times from the same weights, optimizer state and seed,
and counts the runs whose weights differ in any bit from the first run's.

    python benchmarks/repeat_runs.py --action recompute:host --blocks bn1 --runs 150
    TF_NUM_INTEROP_THREADS=1 python benchmarks/repeat_runs.py --action recompute:host --blocks bn1

Output: one line, ``<action> <blocks>: <n> of <runs> runs differ (largest <d>)``.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import kswap  # noqa: E402  (first: TensorFlow's CPU allocator is BFC)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--action", default="recompute:host", help="'plain' or a block action")
    p.add_argument("--blocks", default="", help="comma-separated wrapper names; empty: all")
    p.add_argument("--runs", type=int, default=150)
    p.add_argument("--steps", type=int, default=4, help="Adam steps per run (batch 8)")
    args = p.parse_args(argv)
    if args.runs < 1 or args.steps < 1:
        p.error(f"--runs and --steps must be positive. Received: {args.runs}, {args.steps}")

    import keras
    import numpy as np

    from kswap.profiler._state import preserved_state
    from kswap.tuning import apply_plan, wrappers
    from tests.layers.helpers import build, compile_, data

    model = compile_(build("sequential"))
    x, y = data(model, n=8 * args.steps)
    if args.action != "plain":
        model = kswap.OffloadingModel(model)
        names = wrappers(model)
        chosen = set(args.blocks.split(",")) if args.blocks else set(names)
        unknown = chosen - set(names)
        if unknown:
            p.error(f"--blocks: no such block {sorted(unknown)}. Blocks: {sorted(names)}")
        apply_plan(model, {n: args.action if n in chosen else "keep" for n in names})

    def run():
        # every run from the state before the first: weights, optimizer, seeds
        with preserved_state(model, (x[:8], y[:8])):
            keras.utils.set_random_seed(5)
            model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
            return [w.numpy().copy() for w in model.weights]

    first = run()
    differ, largest = 0, 0.0
    for _ in range(args.runs):
        d = max(float(np.max(np.abs(a - b))) for a, b in zip(run(), first, strict=True))
        differ += d > 0
        largest = max(largest, d)
    print(f"{args.action} {args.blocks or 'all'}: {differ} of {args.runs} runs differ "
          f"(largest {largest:.1e})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
