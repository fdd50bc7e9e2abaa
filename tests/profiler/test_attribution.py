from kswap.profiler.attribution import LayerTree, resolver

TREE = LayerTree(
    "outer",
    (
        LayerTree("dense"),
        LayerTree("dense_1"),
        LayerTree("block", (LayerTree("conv"), LayerTree("bn"))),
    ),
)


def test_forward_backward_and_uniquified_scopes():
    layer_of = resolver(TREE)
    assert layer_of("outer_1/dense_2/MatMul") == "dense"
    assert layer_of("outer/dense_1/MatMul") == "dense_1"  # exact name wins
    assert layer_of("gradient_tape/outer_1/dense_1_1/MatMul") == "dense_1"
    assert layer_of("outer_1/block_1/conv_1/Conv2D") == "block/conv"
    assert layer_of("gradient_tape/outer_1/block_1/bn_3/mul") == "block/bn"
    assert layer_of("outer_1/block_1/add") == "block"


def test_ops_outside_layers():
    layer_of = resolver(TREE)
    assert layer_of("adam/Mul_3") is None
    assert layer_of("outer_1/Cast") is None
    assert layer_of("dense") is None  # an op named like a layer is not in it
