"""``kswap plan``: plans swap and recompute under a budget from a model's shapes.

Nothing is run: ``kswap.estimate`` estimates the step from the shapes and a
device preset. The arguments that need no model are checked before
TensorFlow starts.
"""

from __future__ import annotations

import json

__all__ = ["positive_int", "run"]


def positive_int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1. Received: {name}={text!r}")
    return value


def run(args) -> int:
    """``kswap plan``."""
    from kswap.planning.budget import format_bytes

    # everything that needs no model is checked first, before TensorFlow starts
    batch = positive_int(args.batch, "batch")
    classes = positive_int(args.classes, "classes")
    from kswap.estimate.plan import check_plan_arguments, static_plan

    _, link, device = check_plan_arguments(args.budget, args.link, args.device, args.strategy)
    from kswap.modelspec import build_model, parse_shape

    shape = parse_shape(args.input) if args.input else None
    model = build_model(args.model, shape, classes=classes, optimizer=args.optimizer)
    result = static_plan(
        model, batch, args.budget, link=link, device=device, strategy=args.strategy
    )
    plan, work = result.plan, result.workload
    if args.json:
        out = result.to_dict()
        out["model"], out["input"] = args.model, args.input
        print(json.dumps(out))
        return 0
    gib = format_bytes
    capacity = device.memory_bytes
    fits = result.baseline_fits_device
    verdict = (
        "capacity unknown"
        if fits is None
        else f"{'fits' if fits else 'does not fit'} the device's {gib(capacity)}"
    )
    counts = plan.counts()
    tier = "host" if plan.optimizer_state == "host" else "device"
    print(f"model            {model.name}  batch {batch}  input {args.input or 'default'}")
    print(f"device           {device.name} ({device.description})  link {link.name}")
    print(
        f"persistent       weights {gib(work.weight_bytes)}, gradients {gib(work.gradient_bytes)}, "
        f"optimizer {gib(work.optimizer_bytes)} ({work.metadata.get('optimizer')})"
    )
    print(f"baseline peak    {gib(plan.baseline_peak_bytes)} (estimated); {verdict}")
    print(f"budget           {gib(plan.budget_bytes or 0)}")
    print(
        f"plan             {plan.strategy}: {counts['swap']} swapped, "
        f"{counts['recompute']} recomputed, {counts['keep']} kept; optimizer state on the {tier}"
    )
    print(
        f"predicted peak   {gib(plan.predicted_peak_bytes)} "
        f"({'within' if plan.fits else 'over'} the budget)"
    )
    print(
        f"step time        {plan.baseline_step_seconds * 1000:,.1f} ms baseline, "
        f"{plan.predicted_step_seconds * 1000:,.1f} ms planned: slowdown {plan.slowdown:.3f}x"
    )
    print("(static estimate from shapes and the device preset; nothing was run)")
    print()
    print(plan.table(work))
    return 0
