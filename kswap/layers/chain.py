"""Chaining one block's backward ops in the order that keeps the fewest bytes alive.

TensorFlow's executor runs an op as soon as its inputs exist; inside one
block's backward that can start every large product at once.
:func:`order_backward` finds the order of a block's large backward ops that
keeps the fewest bytes alive (:func:`kswap.layers.order.min_peak_order`, pure
Python) and chains them with control dependencies. Values do not change, only
when ops run, except where Grappler would rewrite a chained op differently:
products and sums with a constant it reassociates, reductions it folds, and
ops oneDNN merges only without control inputs are left out of the chain.

Example:
    Three products made before the sums that read them: chained, each
    product waits for the sum of the one before, so one product is alive at
    a time instead of three.

    >>> import tensorflow as tf
    >>> from kswap.layers.chain import order_backward
    >>> graph = tf.Graph()
    >>> with graph.as_default():
    ...     x = tf.ones([256, 256])
    ...     known = set(graph.get_operations())
    ...     products = [tf.matmul(x, x) for _ in range(3)]
    ...     sums = [tf.reduce_sum(p) for p in products]
    ...     new = [op for op in graph.get_operations() if op not in known]
    ...     order_backward(new, sums)
    True
    >>> [[c.name for c in op.control_inputs] for op in new if op.type == "MatMul"]
    [[], ['Sum'], ['Sum_1']]
"""

from __future__ import annotations

import tensorflow as tf

from kswap import transfer
from kswap.layers import order
from kswap.layers.rewrites import chainable
from kswap.layers.tensors import PASS_THROUGH, dense_parts, nominal_bytes
from kswap.trace.build import in_scope

__all__ = [
    "CHAIN_SCRATCH",
    "ORDER_BACKWARD",
    "beside_chain",
    "chain_scratch",
    "chainable",
    "order_backward",
    "scratch_chained",
]

#: Whether :func:`order_backward` orders blocks' backwards (False: TensorFlow's
#: executor alone orders them; for comparisons). Read when a step is traced.
ORDER_BACKWARD = True
#: Whether :func:`chain_scratch` runs a convolution's gradients one after the
#: other where each takes a scratch buffer: None (default) where each replica
#: has fewer than two inter-op threads, True always, False never (for comparisons).
CHAIN_SCRATCH: bool | None = None

# ops whose output shares their first input's buffer
_ALIASES = PASS_THROUGH | {"Reshape", "Squeeze", "ExpandDims", "StopGradient", "Snapshot"}
# oneDNN merges a filter gradient with its bias gradient only when neither has
# control inputs; without the merge the bias gradient rounds differently
_NO_CONTROL_INPUTS = frozenset({"BiasAddGrad", "Conv2DBackpropFilter", "Conv3DBackpropFilterV2"})
# TensorFlow's own CPU kernels of a convolution's gradients (no oneDNN, no GPU)
# take a scratch buffer each beside their inputs and outputs, up to ~30 MiB
# whatever the tensors' sizes; two of them side by side hold two
_SCRATCH = frozenset(
    {
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "Conv3DBackpropInputV2",
        "Conv3DBackpropFilterV2",
    }
)


def _is_transfer(op: tf.Operation) -> bool:
    return in_scope(op.name, transfer.HOST_SCOPE) or in_scope(op.name, transfer.DEVICE_SCOPE)


def order_backward(new_ops: list[tf.Operation], results: list, min_bytes: int = 0) -> bool:
    """Chains a block's large backward ops in the order that keeps least alive.

    ``new_ops`` are the ops a block's backward made, in creation order, and
    ``results`` the gradients it returns (dense, ``tf.IndexedSlices`` or
    None). Ops that make or read a large
    tensor (an eighth of the largest or more) get control dependencies in
    the order :func:`kswap.layers.order.min_peak_order` finds, if that order
    keeps fewer bytes alive at once than the creation order; transfers are
    left to the gates. The values do not change, only when ops run.

    A block whose largest tensor is under ``min_bytes`` is left alone: it
    cannot set the step's peak, and ops chained in sequence lose the
    executor's freedom to run them side by side (ordering every block cost
    MobileNetV2 about a tenth of its step on a two-core CPU). A
    convolution's gradients are run one after the other whatever their
    tensors' sizes where each takes a scratch buffer (:func:`chain_scratch`).

    Returns:
        Whether the ops were chained.
    """
    if not ORDER_BACKWARD:
        return False
    live = _contributing(new_ops, results)
    ops = [op for op in new_ops if not _is_transfer(op) and op in live]
    ordered = _order_large(ops, results, min_bytes)
    return chain_scratch(ops, set(new_ops)) or ordered


def _order_large(ops: list[tf.Operation], results: list, min_bytes: int) -> bool:
    """:func:`order_backward`'s ordering of the ops that make or read a large tensor."""
    sizes: dict = {}
    for op in ops:
        for t in [*op.inputs, *op.outputs]:
            sizes.setdefault(t.ref(), nominal_bytes(t))
    largest = max(sizes.values(), default=0)
    if not largest or largest < min_bytes:
        return False
    big = {ref for ref, size in sizes.items() if size and size >= largest // 8}
    chosen = [op for op in ops if any(t.ref() in big for t in [*op.inputs, *op.outputs])]
    if len(chosen) < 3:
        return False
    position = {op: i for i, op in enumerate(chosen)}
    before: dict = {}  # op -> positions of the chosen ops it depends on
    for op in ops:
        deps: set[int] = set()
        for p in [t.op for t in op.inputs] + list(op.control_inputs):
            if p in before:
                deps |= before[p]
                if p in position:
                    deps.add(position[p])
        before[op] = deps
    made = {t.ref() for op in chosen for t in op.outputs}
    nodes = [
        order.Node(
            inputs=tuple(t.ref() for t in op.inputs if t.ref() in big),
            outputs=tuple((t.ref(), sizes[t.ref()]) for t in op.outputs if t.ref() in big),
            after=tuple(sorted(before[op])),
            alias=op.type in _ALIASES,
        )
        for op in chosen
    ]
    external = {t.ref(): sizes[t.ref()] for op in chosen for t in op.inputs}
    external = {ref: size for ref, size in external.items() if ref in big and ref not in made}
    kept = {t.ref() for t in dense_parts(results)}
    best, peak = order.min_peak_order(nodes, external, kept)
    if peak < order.peak_of(range(len(nodes)), nodes, external, kept):
        last = None
        for i in best:
            op = chosen[i]
            if not chainable(op):
                continue
            if last is not None and op.type not in _NO_CONTROL_INPUTS:
                op._add_control_input(last)
            last = op
        return True
    return False


def chain_scratch(ops: list[tf.Operation], block: set[tf.Operation]) -> bool:
    """Runs the convolution gradients of ``ops`` one after another, each with its scratch.

    Without oneDNN, TensorFlow's CPU kernels of ``Conv2DBackpropInput`` and
    ``Conv2DBackpropFilter`` each take a scratch buffer of up to ~30 MiB
    whatever the tensors' sizes, and the executor starts both at once: a
    swapped block's backward then held two (MobileNetV2 at 64x64 under
    ``MirroredStrategy`` over two logical CPUs, batch 16 per replica: 2 x
    22.4 MiB at the busiest replica's peak, where AutoTune's plans measured
    ~40% over their predictions; docs/benchmarks.md, "AutoTune under
    MirroredStrategy"). The filter's gradient goes first, as it takes no
    control input (:data:`_NO_CONTROL_INPUTS`), and the input's gradient
    waits for it.

    By default only where each replica has fewer than two inter-op threads
    (:func:`kswap.transfer.one_thread_per_replica`, :data:`CHAIN_SCRATCH`):
    there the other replica's ops keep the threads busy. With threads to
    spare, side by side is faster, and one replica's tensor peak did not
    move: chained, the swapped step of VGG16, MobileNetV2 and ResNet50
    (96x96, batch 32) took 9%, 5% and 5% longer on two cores
    (``benchmarks/offload.py``, variants ``all-chained`` and ``all``). A
    no-op on a GPU or with oneDNN. ``block`` is every op of the block's
    backward: an edge that would close a cycle through them is left out.

    Returns:
        Whether any edge was added.
    """
    if not scratch_chained():
        return False
    heavy = [op for op in ops if op.type in _SCRATCH and chainable(op)]
    heavy.sort(key=lambda op: op.type not in _NO_CONTROL_INPUTS)  # stable: ops' order otherwise
    added = False
    for first, then in zip(heavy, heavy[1:], strict=False):
        if then.type in _NO_CONTROL_INPUTS or _depends_on(first, then, block):
            continue
        then._add_control_input(first)
        added = True
    return added


def scratch_chained(replicas: int | None = None) -> bool:
    """Whether :func:`chain_scratch` chains a convolution's gradients in steps traced now.

    ``replicas``: of the step (default: the strategy in scope).
    """
    if CHAIN_SCRATCH is False or transfer.has_gpu() or transfer.onednn_enabled():
        return False
    return CHAIN_SCRATCH is True or transfer.one_thread_per_replica(replicas)


def beside_chain(replicas: int | None = None) -> frozenset[str]:
    """Types of the ops of an ordered block's backward that run beside its chain.

    They take no control input (:data:`_NO_CONTROL_INPUTS`), so the executor
    runs them while the chain's other ops run, with their temporaries: a
    convolution's filter gradient beside its input gradient, each with a
    scratch buffer (unless :func:`scratch_chained`). The planner's working
    set of an ordered block counts them
    (:func:`kswap.profiler.working_sets.backward_bytes`).
    """
    return _NO_CONTROL_INPUTS - _SCRATCH if scratch_chained(replicas) else _NO_CONTROL_INPUTS


def _depends_on(op: tf.Operation, other: tf.Operation, block: set[tf.Operation]) -> bool:
    """Whether ``op`` runs after ``other`` through edges among ``block``'s ops."""
    seen, stack = set(), [op]
    while stack:
        o = stack.pop()
        if o is other:
            return True
        if o in seen or o not in block:
            continue
        seen.add(o)
        stack.extend([t.op for t in o.inputs] + list(o.control_inputs))
    return False


def _contributing(new_ops: list[tf.Operation], results: list) -> set[tf.Operation]:
    """The ops of ``new_ops`` that ``results`` depend on through data inputs.

    A gradient function also makes gradients nobody asked for (``RealDiv``'s of
    its constant denominator). Grappler prunes them at once, unless a control
    edge ties them to a gradient that is needed: then they live on through its
    first rewrites, which then rewrite the needed ones differently.
    """
    made = set(new_ops)
    live: set[tf.Operation] = set()
    stack = [t.op for t in dense_parts(results)]
    while stack:
        op = stack.pop()
        if op in live or op not in made:
            continue
        live.add(op)
        stack.extend(t.op for t in op.inputs)
    return live
