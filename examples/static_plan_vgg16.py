"""Plan a model that does not fit, before anything runs: VGG16 at batch 256 against 12 GiB.

``kswap.plan`` estimates one training step of a Keras model from its shapes
(the forward pass is traced as a graph at the batch size; no memory is
allocated and nothing is downloaded), on a device preset, and plans per layer
what to keep on the device, swap to host memory or recompute so that the
step's peak stays within a budget. The script does it for VGG16 at 224x224,
batch 256, Adam, on a 12 GiB K40 over PCIe Gen3 (the vDNN paper's case),
prints the estimated baseline and the plan, and saves the plan as JSON.
``kswap.OffloadingModel(model, policy=plan)`` (or ``kswap.apply_plan``)
would then train the model with it.

The plan fits: 11.90 GiB, slowdown 1.073, Adam's slots on the host. The
smallest feasible budget is 10.36 GiB, set by ``block1_conv2``'s backward,
which holds three tensors of 3.06 GiB at once (docs/benchmarks.md, "VGG-16 at
batch 256, 224x224, float32, against 12 GiB"). Below it (``--budget 10GiB``)
the script prints the refusal and plans for the smallest feasible budget.

The figures are static estimates (roofline times at the datasheet's peak
FLOP/s), not measurements: see docs/estimate.md for what they model. The
same from the command line:

    kswap plan --model keras.applications.VGG16 --input 224,224,3 --batch 256 \
        --classes 1000 --budget 12GiB --device k40 --link pcie3

Run:
    python examples/static_plan_vgg16.py [--out DIR] [--batch 256] [--budget 12GiB]
"""

from __future__ import annotations

import argparse
import os

import keras

import kswap
from kswap.planning import DEVICES, parse_budget, smallest_budget

GIB = 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join("logs", "static_plan_vgg16"))
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--budget", default="12GiB")
    parser.add_argument("--device", default="k40", help="a preset of kswap.planning.DEVICES")
    parser.add_argument("--link", default="pcie3", help="a preset of kswap.planning.LINKS")
    args = parser.parse_args()

    model = keras.applications.VGG16(weights=None, input_shape=(224, 224, 3), classes=1000)
    model.compile("adam", "sparse_categorical_crossentropy")

    print(f"VGG16, 224x224, batch {args.batch}, Adam, on {args.device} over {args.link}")
    print("(static estimates: nothing was run)")
    work = kswap.estimate_workload(model, args.batch, device=args.device)
    try:
        plan = kswap.plan(
            model, batch_size=args.batch, budget=args.budget, device=args.device, link=args.link
        )
    except ValueError as error:  # no plan meets the budget: it says the smallest that one does
        print(f"no plan meets {args.budget}: {error}")
        smallest = smallest_budget(work, args.link)
        print(f"planning for the smallest feasible budget instead ({smallest / GIB:.2f} GiB)")
        plan = kswap.plan(
            model, batch_size=args.batch, budget=smallest, device=args.device, link=args.link
        )
    print(f"estimated baseline peak:  {plan.baseline_peak_bytes / GIB:6.2f} GiB")
    print(f"device memory:            {DEVICES[args.device].memory_bytes / GIB:6.2f} GiB")
    print(f"budget:                   {plan.budget_bytes / GIB:6.2f} GiB")
    print(f"predicted peak, planned:  {plan.predicted_peak_bytes / GIB:6.2f} GiB")
    asked = parse_budget(args.budget)
    asked_bytes = asked.bytes or asked.fraction * plan.baseline_peak_bytes
    meets = plan.predicted_peak_bytes <= asked_bytes
    print(f"{'meets ' + args.budget + ':':<26}{meets}")
    print(
        f"predicted step:           {plan.baseline_step_seconds:.2f} s -> "
        f"{plan.predicted_step_seconds:.2f} s (slowdown {plan.slowdown:.3f})"
    )
    print(f"optimizer state:          {plan.optimizer_state}")
    print(f"actions:                  {plan.counts()}")
    print()
    print("blocks that are not kept:")
    table = plan.table(work).splitlines()
    print("\n".join([table[0], *(line for line in table[1:] if not line.endswith(" keep"))]))

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "vgg16_plan.json")
    plan.to_json(path)
    print(f"\nplan saved to {path} (kswap.planning.Plan.from_json reads it)")


if __name__ == "__main__":
    main()
