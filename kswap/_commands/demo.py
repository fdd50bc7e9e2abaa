"""``kswap demo``: trains a model plain, offloaded and with AutoTune (``kswap.demo``)."""

from __future__ import annotations

import sys

__all__ = ["run"]


def run(args) -> int:
    """``kswap demo``."""
    from kswap.demo import Options, run_demo
    from kswap.demo.runner import parse_input

    options = Options(
        model=args.model,
        input=parse_input(args.input),
        batch=args.batch,
        steps=args.steps,
        budget=args.budget,
        out=args.out,
    ).check()
    from kswap.modelspec import resolve

    resolve(options.model)  # names a callable (imports it: Keras, not a TensorFlow op)
    try:
        run_demo(options)
    except (RuntimeError, ImportError) as e:
        print(f"kswap: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    return 0
