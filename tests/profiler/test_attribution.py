from kswap.profiler.attribution import (
    LayerTree,
    copies_one_tensor,
    layer_from_inputs,
    phase_resolver,
    resolver,
    step_op_name,
)

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


def test_a_mirrored_strategy_s_other_replicas_have_the_same_layers_and_phases():
    # MirroredStrategy runs replica N > 0 under `replica_N/` (its gradients under
    # `gradient_tape/replica_N/`); step_op_name keeps the scope, which says the replica
    layer_of, phase_of = resolver(TREE), phase_resolver(TREE, TRANSFERS)
    for op, layer, phase in [
        ("replica_1/outer_1/dense_2/MatMul", "dense", "forward"),
        ("gradient_tape/replica_1/outer_1/block_1/bn_3/mul", "block/bn", "backward"),
        ("replica_3/outer_1/dense_2/kswap_host_tier/DeepCopy", "dense", "transfer"),
        ("PartitionedCall/replica_1/outer_1/block_1/conv_1/Conv2D", "block/conv", "forward"),
    ]:
        assert (layer_of(op), phase_of(op)) == (layer, phase), op
    assert step_op_name("gradient_tape/replica_1/outer_1/x") == "gradient_tape/replica_1/outer_1/x"
    assert layer_of("replica_1/adam/Mul") is None


# --- ops kswap and the tape make outside a layer's scope ----------------------------

TRANSFERS = ("kswap_host_tier", "kswap_device_tier")


def test_a_layer_recomputed_outside_the_model_keeps_its_layer():
    # a recomputed layer runs in its block's backward, outside the model's scope
    layer_of = resolver(TREE)
    assert layer_of("dense_1/MatMul") == "dense_1"
    assert layer_of("dense_3/while/body/_1/dense_3/while/MatMul") == "dense"
    assert layer_of("gradient_tape/dense_3/MatMul_grad/MatMul") == "dense"
    # a nested model's layer: found at any depth when one layer has that name
    assert layer_of("conv_2/Conv2D") == "block/conv"
    assert layer_of("gradient_tape/bn_4/mul") == "block/bn"
    assert layer_of("compile_loss/Sum") is None


def test_a_name_that_two_nested_layers_share_is_not_guessed():
    conv = (LayerTree("conv"),)
    tree = LayerTree("m", (LayerTree("a", conv), LayerTree("b", conv)))
    layer_of = resolver(tree)
    assert layer_of("m_1/a_1/conv_1/Conv2D") == "a/conv"
    assert layer_of("conv_1/Conv2D") is None


def test_phases():
    phase_of = phase_resolver(TREE, TRANSFERS, ("adam",))
    cases = {
        "outer_1/dense_2/MatMul": "forward",
        "outer_1/dense_2/kswap_host_tier/DeepCopy": "transfer",
        "outer_1/dense_2/kswap_host_tier_1/DeepCopy": "transfer",
        "gradient_tape/outer_1/dense_2/dense_2/MatMul/kswap_device_tier/DeepCopy": "transfer",
        "kswap_device_tier/DeepCopy_3": "transfer",  # a recomputed block's swap-in
        "gradient_tape/outer_1/dense_2/dense_2/MatMul/MatMul_1": "backward",
        "dense_4/MatMul": "backward",  # recomputed in backward
        "conv_2/Conv2D": "backward",  # a nested layer recomputed
        "zeros_like_5": "backward",  # the tape's zeros for an output without gradient
        "outer_1/block_1/zeros_like": "forward",  # a layer's own zeros_like
        "AddN_12": "backward",  # the tape's sum of a tensor's gradients
        "outer_1/block_1/AddN": "forward",  # a layer's own sum
        "adam/Mul_3": "update",
        "adam/AssignSubVariableOp/kswap_host_tier/x": "update",  # a host-tier slot's update
        "compile_loss/sparse_categorical_crossentropy/Sum": "forward",
        "gradient_tape/compile_loss/sparse_categorical_crossentropy/Tile": "backward",
        "MakeIterator": "forward",
        "StatefulPartitionedCall/gradient_tape/outer_1/dense_2/MatMul": "backward",
    }
    assert {op: phase_of(op) for op in cases} == cases


def test_ops_that_copy_one_tensor():
    assert copies_one_tensor("kswap_device_tier/DeepCopy", TRANSFERS)
    assert copies_one_tensor("kswap_device_tier_2/DeepCopy_1", TRANSFERS)
    assert copies_one_tensor("zeros_like_3")
    assert copies_one_tensor("gradient_tape/outer_1/zeros_like")
    assert not copies_one_tensor("kswap_device_tier/DeepCopy")  # no transfer scopes given
    assert not copies_one_tensor("outer_1/Add", TRANSFERS)
    assert not copies_one_tensor("zeros_like_3/shape", TRANSFERS)


# the step graph of a model whose layer "dense" is recomputed: its swap-in is built
# at the root, and reads the host copy its forward made
HOST_COPY = "outer_1/dense_1/kswap_host_tier/DeepCopy"
STEP = {
    "kswap_device_tier/DeepCopy": (HOST_COPY,),
    HOST_COPY: ("outer_1/dense_1/MatMul",),
    "outer_1/dense_1/MatMul": ("IteratorGetNext", "outer_1/dense_1/Cast"),
    "zeros_like_2": ("outer_1/dense_2/IdentityN",),
    "copy_of_copy": ("kswap_device_tier/DeepCopy",),
    "outer_1/Add": ("outer_1/dense_1/MatMul", "outer_1/block_1/conv_1/Conv2D"),
    "mixed": ("outer_1/Add",),
    "orphan": ("IteratorGetNext",),
}


def test_layer_from_inputs():
    layer_of = resolver(TREE)
    assert layer_of("kswap_device_tier/DeepCopy") is None  # the name alone says nothing
    assert layer_from_inputs("kswap_device_tier/DeepCopy", [STEP], layer_of) == "dense_1"
    assert layer_from_inputs("zeros_like_2", [STEP], layer_of) == "dense"
    assert layer_from_inputs("copy_of_copy", [STEP], layer_of) == "dense_1"  # looks through
    assert layer_from_inputs("copy_of_copy", [STEP], layer_of, depth=0) is None
    # inputs from two layers, from none, or no such op: no layer
    assert layer_from_inputs("mixed", [STEP], layer_of) is None
    assert layer_from_inputs("orphan", [STEP], layer_of) is None
    assert layer_from_inputs("absent", [STEP], layer_of) is None
    # several traces of the step: they must agree
    retrace = dict(STEP)
    assert layer_from_inputs("zeros_like_2", [STEP, retrace, {}], layer_of) == "dense"
    other = {**STEP, "zeros_like_2": ("outer_1/block_1/bn_1/mul",)}
    assert layer_from_inputs("zeros_like_2", [STEP, other], layer_of) is None


def test_cycles_end():
    graph = {"a": ("b",), "b": ("a",)}
    assert layer_from_inputs("a", [graph], resolver(TREE)) is None


def test_an_offloaded_model_s_transfers_and_backward_have_layers():
    """A recurrent layer is recomputed in backward: its swap-in and re-run carry its name."""
    import warnings

    import keras
    import numpy as np

    import kswap
    from kswap.trace import RESIDENT, UNATTRIBUTED

    model = keras.Sequential(
        [
            keras.Input((8, 16)),
            keras.layers.Dense(64, name="proj"),
            keras.layers.LSTM(16, return_sequences=True, name="lstm"),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(4, name="head"),
        ],
        name="rnn",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the LSTM falls back to recomputation
        model = kswap.OffloadingModel(model)
        model.compile("adam", "mse")
        rng = np.random.default_rng(0)
        x = rng.random((32, 8, 16), dtype=np.float32)
        trace = kswap.profile(model, x, np.zeros((32, 4), np.float32), steps=1, batch_size=16)
    ops = [b for b in trace.buffers if b.op and b.op != RESIDENT]
    swap_ins = [b for b in ops if "kswap_device_tier" in b.op]
    assert swap_ins and "lstm" in {b.layer for b in swap_ins}
    assert not [b for b in swap_ins if b.op.startswith("kswap_device_tier")]  # none at the root
    for b in ops:
        if "kswap_host_tier" in b.op or "kswap_device_tier" in b.op:
            assert b.layer and b.phase in ("transfer", "update"), b
        elif b.op.startswith(("gradient_tape/rnn", "lstm_")):
            assert b.layer and b.phase == "backward", b
        if b.layer is None:  # left for the loss, the input pipeline and the update
            assert b.phase != "transfer" and not b.op.startswith("gradient_tape/rnn"), b
    assert {b.phase for b in ops if b.layer == "lstm"} >= {"forward", "backward", "transfer"}
    peak = trace.by_layer_phase()
    assert set(peak.get(UNATTRIBUTED, {})) <= {"forward", "resident", "(unknown)"}
