"""``kswap pack``: packs a saved trace's step and compares it with the BFC allocator.

Needs no TensorFlow: the trace is read from its JSON file and packed by
``kswap.allocator``. ``kswap profile --pack`` prints the same report.
"""

from __future__ import annotations

__all__ = ["report", "run"]


def report(trace, algorithms, plot) -> None:
    """Prints the packing report of ``trace`` for ``algorithms``; draws the best to ``plot``."""
    from kswap.allocator import plot_packing
    from kswap.allocator.report import compare, format_comparison

    comparison = compare(trace, algorithms)
    print(format_comparison(comparison))
    if plot:
        best = comparison.best
        plot_packing(
            best.plan, plot, title=f"{trace.metadata.get('model', 'trace')}: {best.algorithm}"
        )
        print(f"packing drawn: {plot}")


def run(args) -> int:
    """``kswap pack``."""
    from kswap.trace import Trace

    try:
        trace = Trace.from_json(args.trace)
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ValueError(
            f"`trace` must be a kswap trace JSON file. Received: trace={args.trace!r} ({reason})"
        ) from None
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    report(trace, algorithms, args.plot)
    return 0
