"""Exactness of the zoo's models against TensorFlow's own noise, in one table.

    python benchmarks/exactness.py --models ResNet50V2,InceptionV3
    python benchmarks/exactness.py --models ResNet50V2 --steps 5 --json
    python benchmarks/exactness.py --models InceptionV3 --again 3

For each model of ``benchmarks/zoo_models.py`` (``--models``: names or
groups), one fresh process trains it four times through ``model.fit`` from
the same seed, on the same data (:func:`tests.layers.exactness.train`):

1. plain;
2. ``kswap.OffloadingModel(model, policy="all")``;
3. plain, with Grappler's remapper off (the yardstick of "exact up to
   TensorFlow's own rounding");
4. plain again, in the same process, ``--again`` times (default 1): a model
   whose training is not deterministic without kswap differs from itself,
   and the largest of these deviations is its noise.

Each row gives the deviation of runs 2, 3 and 4 from run 1 (the first step's
loss, the largest relative loss difference, and the normwise relative
difference of every weight, BatchNormalization's statistics included) and a
verdict: ``bit-identical``, ``within TensorFlow's noise`` (no figure above
the larger of runs 3 and 4) or ``beyond``; "(plain differs from itself)"
follows when run 4 is not bit-identical.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import run_json  # noqa: E402

FIELDS = ("first_loss", "losses", "weights")


def worker(name: str, steps: int, again: int = 1) -> dict:
    """Trains model ``name`` four times (module docstring); returns the deviations."""
    import zoo_models

    from tests.layers.exactness import deviation, train

    entry = zoo_models.CATALOGUE[name]
    probe = zoo_models.build(entry)
    x, y = zoo_models.make_data(entry, probe, samples=entry.batch * steps)
    del probe

    def build():
        return zoo_models.build(entry)

    kwargs = dict(dataset=entry.dataset)
    plain = train(build, x, y, entry.batch, **kwargs)
    runs = {
        "kswap": [train(build, x, y, entry.batch, offload=True, **kwargs)],
        "remapper_off": [train(build, x, y, entry.batch, remapping=False, **kwargs)],
        "plain_again": [train(build, x, y, entry.batch, **kwargs) for _ in range(again)],
    }
    out = {
        "model": name,
        "steps": steps,
        "again": again,
        "data": "tf.data" if entry.dataset else "arrays",
    }
    for key, samples in runs.items():
        devs = [deviation(run, plain) for run in samples]
        out[key] = {f: max(getattr(d, f) for d in devs) for f in FIELDS}
    return out


def verdict(row: dict) -> str:
    """``bit-identical``, ``within TensorFlow's noise`` or ``beyond`` (module docstring)."""
    ours = row["kswap"]
    if not any(ours.values()):
        return "bit-identical"
    noise = {f: max(row["remapper_off"][f], row["plain_again"][f]) for f in FIELDS}
    word = "within TensorFlow's noise" if all(ours[f] <= noise[f] for f in FIELDS) else "beyond"
    if any(row["plain_again"].values()):
        word += " (plain differs from itself)"
    return word


def table(rows: list[dict]) -> str:
    """The markdown table of ``rows`` (each :func:`worker`'s result, or an error)."""
    again = max((row.get("again", 1) for row in rows), default=1)
    label = "plain again" if again == 1 else f"plain again (largest of {again})"
    head = ["model", "data", "kswap: loss / weights", "remapper off", label, "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['model']} | | | | | error: {row['error']} |")
            continue
        cells = [row["model"], row["data"]]
        for key in ("kswap", "remapper_off", "plain_again"):
            cells.append(f"{row[key]['losses']:.1e} / {row[key]['weights']:.1e}")
        cells.append(verdict(row))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _reject(message: str) -> int:
    print(f"exactness.py: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="ResNet50V2", help="zoo names or groups")
    parser.add_argument("--steps", type=int, default=5, help="training steps compared")
    parser.add_argument("--again", type=int, default=1, help="plain runs again (noise samples)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        return _reject(f"`--steps` must be at least 1. Received: --steps {args.steps}")
    if args.again < 1:
        return _reject(f"`--again` must be at least 1. Received: --again {args.again}")
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps, args.again)))
        return 0
    import zoo_models

    try:
        names = zoo_models.select(args.models)
    except ValueError as e:
        return _reject(f"`--models`: {e}")
    rows = []
    for name in names:
        try:
            row = run_json(
                [__file__, "--worker", name, "--steps", str(args.steps), "--again", str(args.again)]
            )
        except RuntimeError as e:
            row = {"model": name, "error": str(e).strip().splitlines()[-1][:200]}
        rows.append(row)
        print(f"{name}: {verdict(row) if 'error' not in row else row['error']}", file=sys.stderr)
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
