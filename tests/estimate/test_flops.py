"""FLOPs by formula and roofline times on a device preset."""

import keras
import pytest

from kswap.estimate import estimate_workload
from kswap.estimate.flops import roofline_seconds
from kswap.estimate.graph import trace_step
from kswap.estimate.memory import analyze
from kswap.planning import Device


def costs(model, batch):
    return {b.name: b for b in analyze(trace_step(model, batch)).blocks}


def test_conv_dense_and_depthwise_flops():
    model = keras.Sequential(
        [
            keras.Input((16, 16, 3)),
            keras.layers.Conv2D(8, 3, padding="same", use_bias=False, name="conv"),
            keras.layers.DepthwiseConv2D(3, padding="valid", use_bias=False, name="dw"),
            keras.layers.Flatten(),
            keras.layers.Dense(5, use_bias=False, name="dense"),
        ]
    )
    b = costs(model, 2)
    flops = {n: sum(c.flops for c in b[n].forward_costs) for n in ("conv", "dw", "dense")}
    assert flops["conv"] == 2 * (2 * 16 * 16 * 8) * (3 * 3 * 3)
    assert flops["dw"] == 2 * (2 * 14 * 14 * 8) * (3 * 3)
    assert flops["dense"] == 2 * 2 * (14 * 14 * 8) * 5
    # backward: conv's input is the model's (kernel gradient only), the others need both
    back = {n: sum(c.flops for c in b[n].backward_costs) for n in ("conv", "dw", "dense")}
    assert back == {"conv": flops["conv"], "dw": 2 * flops["dw"], "dense": 2 * flops["dense"]}


def test_einsum_and_pooling_flops():
    inputs = keras.Input((6, 10))
    h = keras.layers.EinsumDense("abc,cd->abd", output_shape=(None, 7), name="proj")(inputs)
    h = keras.layers.MaxPooling1D(2, name="pool")(h)
    b = costs(keras.Model(inputs, h), 3)
    einsum = [c.flops for c in b["proj"].forward_costs if c.flops > 3 * 6 * 7]
    assert einsum == [2 * 3 * 6 * 10 * 7]
    assert sum(c.flops for c in b["pool"].forward_costs) >= 3 * 3 * 7 * 2


def test_attention_counts_its_score_products():
    q = keras.Input((16, 32))
    out = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, name="mha")(q, q)
    b = costs(keras.Model(q, out), 2)
    flops = sum(c.flops for c in b["mha"].forward_costs)
    projections = 4 * 2 * (2 * 16 * 32 * 32)  # q, k, v and output: 32 -> 4 x 8 and back
    scores = 2 * 2 * (2 * 4 * 16 * 16 * 8)  # q.k and weights.v
    assert projections + scores <= flops <= 1.2 * (projections + scores)
    assert b["mha"].kind == "attention"


def test_roofline():
    k40 = Device.preset("k40")
    assert roofline_seconds(4.29e12, 1.0, k40) == pytest.approx(1.0)
    assert roofline_seconds(1.0, 288e9, k40) == pytest.approx(1.0)
    h100 = Device.preset("h100")
    assert roofline_seconds(989.5e12, 0, h100, "bfloat16") == pytest.approx(1.0)
    assert roofline_seconds(67e12, 0, h100, "float32") == pytest.approx(1.0)


def test_block_times_on_a_device():
    n = 2048
    model = keras.Sequential(
        [
            keras.Input((n,)),
            keras.layers.Dense(n, use_bias=False, name="first"),
            keras.layers.Dense(n, use_bias=False, name="second"),
        ]
    )
    w = estimate_workload(model, n, device="k40")
    first, second = w.blocks
    compute = 2 * n**3 / 4.29e12  # compute-bound: 17 GFLOP at 4.29 TFLOP/s
    assert first.forward_seconds == pytest.approx(compute)
    assert first.backward_seconds == pytest.approx(compute)  # only the kernel's gradient
    assert second.backward_seconds == pytest.approx(2 * compute)
    assert w.metadata["forward_flops"] == 2 * 2 * n**3
