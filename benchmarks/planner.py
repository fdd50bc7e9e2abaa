"""How close the planning strategies come to the optimal plan, and how fast auto plans.

    python benchmarks/planner.py
    python benchmarks/planner.py --seeds 0-9 --details

Every instance is a workload and a budget; the budget is a share of the way
from the smallest feasible one (``kswap.planning.smallest_budget``) to the
baseline's peak (everything kept), so that every instance can be met. The
exhaustive search (``kswap.planning.exhaustive``: keep, swap with prefetch 1
or recompute for every block, and both tiers of the optimizer's slots) gives
the least predicted step time within the budget; every strategy's gap is its
predicted step time over that optimum, minus one, or "-" when its plan does
not fit. A negative gap is a plan the exhaustive search's actions cannot
express (another prefetch distance, inputs on the host).

Instances: random workloads of 8 to 16 blocks (``--seeds`` per size) and
VGG-16-, ResNet-50- and GPT-2-like ones built from layer shapes (see
``kswap.planning._synthetic``), at budget shares 0.25 and 0.6 (the random
ones) and 0.1, 0.25, 0.6, 0.9 (the hand-built ones).

Then auto plans two 1,000-block workloads (random, and 62 ResNet-50-like
bottleneck stages in a row) at half their peak; the table gives the median of
``--repeats`` runs in wall-clock and CPU seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from _common import table

from kswap.planning import STRATEGIES, Link, Workload, make_plan, smallest_budget
from kswap.planning._search import Context
from kswap.planning._synthetic import random_workload, resnet_like, transformer_like, vgg_like
from kswap.planning.exhaustive import exhaustive

__all__ = ["main"]

COMPARED = ["auto", "hybrid", "doa", "aoa", "wdoa", "vote", "dyn", "all", "conv"]


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def instances(seeds: list[int]):
    """``(name, workload, link, shares)`` of every instance."""
    for n in (8, 10, 12, 14, 16):
        for seed in seeds:
            yield f"random n={n} seed={seed}", random_workload(n, seed), "pcie3", (0.25, 0.6)
    shares = (0.1, 0.25, 0.6, 0.9)
    yield "VGG-16-like b64 K40", vgg_like(batch=64), "pcie3", shares
    yield "ResNet-50-like b32 V100", resnet_like(batch=32), "pcie3", shares
    yield "GPT-2-like 12 layers A100", transformer_like(layers=12), "pcie4", shares


def gaps(workload: Workload, budget: int, link: Link) -> tuple[float, dict[str, float | None]]:
    """The optimum's slowdown and every strategy's gap to it."""
    best = exhaustive(workload, budget, link)
    assert best.fits, "the budget is above the smallest feasible one"
    out: dict[str, float | None] = {}
    for name in COMPARED:
        plan = STRATEGIES[name](workload, budget, link)
        ratio = plan.predicted_step_seconds / best.predicted_step_seconds
        out[name] = ratio - 1 if plan.fits else None
    return best.slowdown, out


def _cell(gap: float | None) -> str:
    return "-" if gap is None else f"{gap:+.1%}"


def chain_of_resnet_blocks(stages: int) -> Workload:
    """``16 * stages`` ResNet-50-like bottleneck blocks (about 1,000 for 62)."""
    one = resnet_like(batch=32)
    blocks = tuple(
        dataclasses.replace(b, name=f"{s}/{b.name}") for s in range(stages) for b in one.blocks
    )
    return Workload(
        blocks,
        weight_bytes=stages * one.weight_bytes,
        gradient_bytes=stages * one.gradient_bytes,
        optimizer_bytes=stages * one.optimizer_bytes,
        update_seconds=stages * one.update_seconds,
        name=f"{len(blocks)} ResNet-50-like blocks",
    )


def timing(repeats: int) -> list[list]:
    rows = []
    for w in (random_workload(1000, 7), chain_of_resnet_blocks(62)):
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            plan = make_plan(w, 0.5, "pcie3")
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        counts = plan.counts()
        rows.append(
            [
                w.name,
                len(w.blocks),
                f"{statistics.median(walls):.2f}",
                f"{statistics.median(cpus):.2f}",
                f"{plan.slowdown:.3f}",
                f"{counts['swap']} / {counts['recompute']}",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0-5", help="random workloads per size: 0-5 or 1,4")
    parser.add_argument("--details", action="store_true", help="a row for every random instance")
    parser.add_argument("--repeats", type=int, default=3, help="runs of the 1,000-block timing")
    args = parser.parse_args()

    rows, summary = [], {name: [] for name in COMPARED}
    for name, workload, link_name, shares in instances(_seeds(args.seeds)):
        link = Link.preset(link_name)
        baseline = Context(workload, 0, link).baseline.peak_bytes
        lowest = smallest_budget(workload, link)
        for share in shares:
            budget = int(lowest + share * (baseline - lowest))
            slowdown, found = gaps(workload, budget, link)
            for strategy, gap in found.items():
                summary[strategy].append(gap)
            if args.details or not name.startswith("random"):
                row = [name, len(workload.blocks), f"{budget / baseline:.2f}", f"{slowdown:.3f}"]
                rows.append(row + [_cell(found[s]) for s in COMPARED])
    print("Gap to the optimum (predicted step time / exhaustive optimum - 1):\n")
    headers = ["instance", "blocks", "budget / peak", "optimum slowdown", *COMPARED]
    print(table(headers, rows))
    total = len(summary["auto"])
    print(f"\nOver all {total} instances:\n")
    srows = []
    for strategy in COMPARED:
        met = [g for g in summary[strategy] if g is not None]
        srows.append(
            [
                strategy,
                f"{len(met)} / {total}",
                _cell(statistics.median(met)) if met else "-",
                _cell(max(met)) if met else "-",
                sum(g > 0.02 for g in met),
            ]
        )
    print(table(["strategy", "meets budget", "median gap", "worst gap", "over 2%"], srows))
    print(f"\nauto on 1,000 blocks at half the peak over PCIe Gen3 (median of {args.repeats}):\n")
    headers = ["workload", "blocks", "wall s", "CPU s", "slowdown", "swapped / recomputed"]
    print(table(headers, timing(args.repeats)))


if __name__ == "__main__":
    main()
