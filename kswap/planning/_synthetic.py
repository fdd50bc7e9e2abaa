"""Workloads for tests and benchmarks: random ones and hand-built models.

The model workloads are built from layer shapes the way a static estimate
would be: bytes from the activations' shapes (float32), times from FLOPs at
half the device's peak FP32 rate, backward twice the forward. They are
approximations of the networks they are named after, good enough to give the
planner realistic proportions (big early activations in VGG, bottlenecks
whose inner tensors recompute cheaply in ResNet, attention in a
transformer).
"""

from __future__ import annotations

import random

from kswap.planning.devices import Device
from kswap.planning.workload import Block, Workload

__all__ = ["random_workload", "vgg_like", "resnet_like", "transformer_like"]

MiB = 2**20
_EFFICIENCY = 0.5


def random_workload(n: int, seed: int) -> Workload:
    """``n`` blocks of random sizes (1-200 MiB) and times (1-10 ms), Adam-sized state."""
    r = random.Random(seed)
    blocks = []
    for i in range(n):
        f = r.uniform(1, 10) * 1e-3
        blocks.append(
            Block(
                f"b{i}",
                saved_bytes=r.randint(1, 200) * MiB,
                forward_seconds=f,
                backward_seconds=f * r.uniform(1.5, 2.5),
                recompute_seconds=f * r.uniform(0.8, 1.2),
                input_bytes=r.randint(1, 100) * MiB,
                forward_bytes=r.randint(0, 20) * MiB,
                backward_bytes=r.randint(0, 50) * MiB,
                kind=r.choice(("conv", "dense", "other")),
            )
        )
    weights = r.randint(0, 500) * MiB
    return Workload(
        tuple(blocks),
        weight_bytes=weights,
        gradient_bytes=weights,
        optimizer_bytes=2 * weights,
        update_seconds=r.uniform(0, 5e-3),
        name=f"random-{n}-{seed}",
    )


def _block(name, flops, saved, inp, work, device, kind, fwd_bytes=0) -> Block:
    forward = flops / (device.fp32_flops * _EFFICIENCY)
    return Block(
        name,
        saved_bytes=int(saved),
        forward_seconds=forward,
        backward_seconds=2 * forward,
        input_bytes=int(inp),
        forward_bytes=int(fwd_bytes),
        backward_bytes=int(work),
        kind=kind,
    )


def vgg_like(batch: int = 64, size: int = 224, device: str = "k40") -> Workload:
    """VGG-16's 13 convolutions (pooling folded in) and 3 dense layers.

    A block saves its input (what a convolution's backward reads; the ReLU's
    output is the next block's input); its backward holds the gradients of
    its input and output.
    """
    dev, b, blocks = Device.preset(device), batch, []
    plan = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]
    channels, hw, params = 3, size, 0
    for stage, (width, layers) in enumerate(plan):
        for k in range(layers):
            x = b * channels * hw * hw * 4
            y = b * width * hw * hw * 4
            flops = 2 * b * hw * hw * channels * width * 9
            params += channels * width * 9 + width
            blocks.append(_block(f"conv{stage + 1}_{k + 1}", flops, x, x, x + y, dev, "conv"))
            channels = width
        hw //= 2
    features = channels * hw * hw
    for k, width in enumerate((4096, 4096, 1000)):
        x = b * features * 4
        flops = 2 * b * features * width
        params += features * width + width
        blocks.append(_block(f"fc{k + 1}", flops, x, x, x + b * width * 4, dev, "dense"))
        features = width
    weights = params * 4
    return Workload(
        tuple(blocks),
        weight_bytes=weights,
        gradient_bytes=weights,
        optimizer_bytes=2 * weights,
        update_seconds=3 * weights / dev.memory_bytes_per_s,
        name=f"vgg16-like b{batch} {size}px {device}",
    )


def resnet_like(batch: int = 32, size: int = 224, device: str = "v100") -> Workload:
    """ResNet-50's 16 bottleneck blocks (3-4-6-3), the stem folded into the first.

    A block saves its input and its inner tensors (three convolutions, their
    batch norms and ReLUs, the residual sum): a recompute keeps only the
    input, a tenth of it.
    """
    dev, b, blocks = Device.preset(device), batch, []
    hw, channels, params = size // 4, 64, 0
    for stage, (width, count) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for k in range(count):
            if stage and k == 0:
                hw //= 2
            out = 4 * width
            x = b * channels * hw * hw * 4
            inner = b * width * hw * hw * 4
            outer = b * out * hw * hw * 4
            flops = 2 * b * hw * hw * (channels * width + 9 * width * width + width * out)
            params += channels * width + 9 * width * width + width * out + 6 * width + 2 * out
            saved = x + 6 * inner + 3 * outer
            name = f"stage{stage + 1}_block{k + 1}"
            blocks.append(_block(name, flops, saved, x, x + 2 * outer, dev, "conv", inner))
            channels = out
    weights = params * 4
    return Workload(
        tuple(blocks),
        weight_bytes=weights,
        gradient_bytes=weights,
        optimizer_bytes=2 * weights,
        update_seconds=3 * weights / dev.memory_bytes_per_s,
        name=f"resnet50-like b{batch} {size}px {device}",
    )


def transformer_like(
    layers: int = 12, batch: int = 8, seq: int = 1024, dim: int = 768, device: str = "a100"
) -> Workload:
    """A GPT-2-small-like decoder: attention scores dominate what a layer saves."""
    dev, b, blocks = Device.preset(device), batch, []
    heads = dim // 64
    x = b * seq * dim * 4
    scores = b * heads * seq * seq * 4
    for k in range(layers):
        flops = 2 * b * seq * (12 * dim * dim) + 4 * b * seq * seq * dim
        saved = 10 * x + 4 * x + 2 * scores  # projections, MLP (4x wide), softmax in and out
        blocks.append(_block(f"layer{k}", flops, saved, x, 2 * x + scores, dev, "attention"))
    params = layers * 12 * dim * dim + 50257 * dim
    weights = params * 4
    return Workload(
        tuple(blocks),
        weight_bytes=weights,
        gradient_bytes=weights,
        optimizer_bytes=2 * weights,
        other_bytes=b * seq * 50257 * 4,  # the logits
        update_seconds=3 * weights / dev.memory_bytes_per_s,
        name=f"gpt2-like {layers} layers b{batch} seq{seq} {device}",
    )
