from kswap.profiler.attribution import LayerTree, resolver, step_op_name

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


def test_ops_inside_fit_s_call_of_the_step():
    layer_of = resolver(TREE)
    assert layer_of("StatefulPartitionedCall/gradient_tape/outer_1/dense_1_1/MatMul") == "dense_1"
    loop = "while/body/_1/while/cond/then/_107/while/cond/StatefulPartitionedCall/"
    assert layer_of(loop + "outer_1/block_1/conv_1/Conv2D") == "block/conv"
    assert step_op_name(loop + "adam/Mul_3") == "adam/Mul_3"
    assert step_op_name("PartitionedCall_2/outer_1/Cast") == "outer_1/Cast"
    # a function called inside a layer keeps its call's name
    inner = "outer_1/block_1/StatefulPartitionedCall/conv/Conv2D"
    assert step_op_name(inner) == inner and layer_of(inner) == "block"
    assert step_op_name("MakeIterator") == "MakeIterator"
