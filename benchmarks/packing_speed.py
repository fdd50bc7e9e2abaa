"""Speed and quality of kswap.allocator.pack on synthetic instances.

    python benchmarks/packing_speed.py --sizes 1000,10000,100000 --repeats 5

Two families of instances (see ``kswap.allocator._synthetic``):

* ``random``: allocations at uniformly random ticks, log-uniform sizes
  (256 B - 16 MiB) and lifetimes (1 - 100 ticks): ~20 buffers alive at once;
* ``training``: one training step of a deep network - activations kept from
  the forward op to its mirrored backward op, gradients, short temporaries,
  weights alive throughout: thousands of buffers alive at once.

For every algorithm it times ``pack(buffers, algorithm=...)`` end to end
(the ``Buffer`` list is built beforehand) and prints a markdown table of the
median and fastest of the repeats and of ``arena / lower bound``. Every
algorithm is deterministic, so the arena is the same in every repeat and on
every machine; ``"best"`` does as much as a work budget decided from the
instance pays for (about 1.5 s of work on the reference machine), whatever
the clock says. A placement's cost grows with the number of buffers and of
pairs of overlapping lifetimes (the ``pairs`` column; buffers alive
throughout, stacked first, are left out); a run predicted (with the cost
model of ``kswap.allocator._algorithms``) to take longer than
``--max-seconds`` is skipped, and repeats are cut to fit that time.

The 100,000-buffer check of ``"best"`` (under 2 s)::

    python benchmarks/packing_speed.py --sizes 100000 --families random --algorithms best
"""

from __future__ import annotations

import argparse
import statistics
import time

from kswap.allocator import ALGORITHMS, Buffer, pack
from kswap.allocator._algorithms import DEFAULT_WORK_BUDGET, LOCAL_SEARCH_WORK, placement_cost
from kswap.allocator._instance import Instance
from kswap.allocator._intervals import count_overlapping_pairs
from kswap.allocator._synthetic import random_instance, training_step_instance

__all__ = ["main"]

FAMILIES = {"random": random_instance, "training": training_step_instance}
# Placements per run, and work units (~ns) spent besides ("best": see below).
_PLACEMENTS = {"greedy_size": 1, "first_fit": 1, "multi_order": 7, "local_search": 7}
_EXTRA_WORK = {"local_search": LOCAL_SEARCH_WORK}
_SECONDS_PER_BUFFER = 10e-6  # building the plan, validating


def _table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _predicted_seconds(algorithm: str, n: int, placement_work: int) -> float:
    if algorithm == "best":  # its budget; its first placement unless a sweep replaces it
        work = max(min(placement_work, 2 * DEFAULT_WORK_BUDGET), DEFAULT_WORK_BUDGET)
    else:
        work = _PLACEMENTS[algorithm] * placement_work + _EXTRA_WORK.get(algorithm, 0)
    return work * 1e-9 + _SECONDS_PER_BUFFER * n


def run(
    family: str, n: int, algorithms: list[str], repeats: int, max_seconds: float, seed: int
) -> list[list]:
    """Table rows of one instance."""
    sizes, starts, ends = FAMILIES[family](n, seed=seed)
    buffers = [Buffer(int(s), int(a), int(b)) for s, a, b in zip(sizes, starts, ends, strict=True)]
    core = Instance(sizes, starts, ends).core  # what the placement engines see
    pairs = count_overlapping_pairs(starts[core], ends[core])
    work = placement_cost((sizes + 255) // 256, starts, ends)
    rows = []
    for algorithm in algorithms:
        predicted = _predicted_seconds(algorithm, len(buffers), work)
        row = [family, f"{len(buffers):,}", f"{pairs:,}", algorithm]
        if predicted > max_seconds:
            rows.append(row + [f"skipped (~{predicted:.0f} s)", "", "", ""])
            print(f"{family} {n} {algorithm}: skipped, ~{predicted:.0f} s predicted", flush=True)
            continue
        count = max(1, min(repeats, int(max_seconds // max(predicted, 1e-9))))
        times, plan = [], None
        for _ in range(count):
            began = time.perf_counter()
            plan = pack(buffers, algorithm=algorithm)
            times.append(time.perf_counter() - began)
        plan.validate()
        rows.append(
            row
            + [
                f"{statistics.median(times):.3f}",
                f"{min(times):.3f}",
                count,
                f"{plan.overhead:.4f}",
            ]
        )
        print(" ".join(str(c) for c in rows[-1]), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,100000", help="numbers of buffers")
    p.add_argument("--repeats", type=int, default=5, help="runs per measurement (median)")
    p.add_argument("--families", default="random,training", help=f"of {sorted(FAMILIES)}")
    p.add_argument("--algorithms", default=",".join(ALGORITHMS), help="algorithm names")
    p.add_argument("--max-seconds", type=float, default=120.0, help="skip longer runs")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    algorithms = [a for a in args.algorithms.split(",") if a]
    unknown = sorted(set(algorithms) - set(ALGORITHMS))
    if unknown:
        p.error(f"unknown algorithms {unknown}; choose from {sorted(ALGORITHMS)}")
    rows = []
    for family in args.families.split(","):
        if family not in FAMILIES:
            p.error(f"unknown family {family!r}; choose from {sorted(FAMILIES)}")
        for n in (int(s) for s in args.sizes.split(",")):
            rows += run(family, n, algorithms, args.repeats, args.max_seconds, args.seed)
    headers = ["instance", "buffers", "pairs", "algorithm", "median s", "min s", "runs"]
    print()
    print(_table(headers + ["arena / lower bound"], rows))


if __name__ == "__main__":
    main()
