"""Bytes of a traced step, block by block: what backward reads, working sets.

From the graph of one forward pass (:func:`kswap.estimate.graph.trace_step`)
and TensorFlow's gradient rules (which inputs and outputs each op's gradient
reads: :data:`kswap.layers.saved.GRADIENT_READS`), :func:`analyze` finds per
block:

- **saved bytes**: the tensors its backward reads. Only ops whose gradient is
  needed count: ops between a trainable weight and the loss (the model's
  input needs no gradient, nor do BatchNormalization's moving statistics).
  A product (``MatMul``, ``Conv2D``, ``Mul``, ``Einsum``...) reads the other
  operand for each operand that needs a gradient, so the first convolution
  reads its input (for its kernel's gradient) but a product with a
  non-trainable mask reads only the mask. A tensor is counted once, in the
  first block (in forward order) that reads it: its backward comes last, so
  the tensor lives until then; the later blocks that read it too are its
  block's ``shared`` bytes. Views (``Reshape``, ``Identity``...) share
  their source's buffer. Weights (``ReadVariableOp``) and the model's inputs
  are not saved bytes: they stay on the device whatever the plan does.
- **input bytes**: the block's inputs, which a recompute keeps instead.
- **forward bytes**: the most bytes its forward holds beyond its saved bytes:
  its tensors until their last use in it (or the block's end, for those used
  later), and tensors made earlier that wait for a later block. An
  elementwise op (``BiasAdd``, ``Relu``, ``Mul``...) writes into an input's
  buffer when that input is used no more, as TensorFlow's kernels do.
- **backward bytes**: the most bytes its backward holds beyond its saved
  bytes: the upstream gradients of its outputs, the gradients it makes (of
  its inputs and intermediate tensors, freed once used; ``BiasAdd`` and
  ``Add`` hand the incoming gradient on as it is, and an activation's
  gradient kernel, ``ReluGrad`` or ``TanhGrad``, writes into it), less the
  saved tensors already freed (each after the last op whose gradient reads
  it). So a ``Conv2D`` with a ReLU holds its saved output and the upstream
  gradient, then the gradient of its input beside the ReLU's: one tensor
  beyond its saved one. Kernels' own temporaries (a CPU's ``MaxPoolGrad``
  workspace) are not modelled. Weight gradients are persistent bytes, not
  counted here.

Example:
    >>> import keras
    >>> from kswap.estimate.graph import trace_step
    >>> from kswap.estimate.memory import analyze
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, name="a"),
    ...                           keras.layers.ReLU(name="r"), keras.layers.Dense(2, name="b")])
    >>> blocks = analyze(trace_step(model, batch_size=4)).blocks
    >>> [(b.name, b.saved_bytes) for b in blocks]   # r: its output (4 x 16 floats)
    [('a', 0), ('r', 256), ('b', 0)]

``a`` reads its input for its kernel's gradient, but that is the model's input
(on the device throughout); ``b`` reads its input, ``r``'s output, counted in
``r``.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from kswap.estimate.flops import FREE_OPS, LINEAR_OPS, OpCost, op_cost, tensor_bytes
from kswap.estimate.graph import TracedStep
from kswap.layers.saved import op_reads

__all__ = ["BlockBytes", "StepBytes", "analyze", "FORWARDING_OPS", "VIEW_OPS"]

#: Ops whose output shares its input's buffer (TensorFlow forwards it).
VIEW_OPS = frozenset({"Identity", "Reshape", "Squeeze", "ExpandDims", "StopGradient",
                      "PreventGradient", "Snapshot", "EnsureShape", "IdentityN"})  # fmt: skip

#: For products: the operands; the gradient of one reads the other.
_OPERANDS = {
    **{t: (0, 1) for t in LINEAR_OPS if t not in ("Conv2DBackpropInput", "Conv3DBackpropInputV2")},
    "Conv2DBackpropInput": (1, 2),
    "Conv3DBackpropInputV2": (1, 2),
    "Mul": (0, 1),
}
#: Elementwise ops whose kernel writes into an input's buffer when nothing else needs it
#: (TensorFlow's ``forward_input_or_allocate_output``).
FORWARDING_OPS = frozenset({"BiasAdd", "Relu", "Relu6", "Elu", "Selu", "Sigmoid", "Tanh",
                            "Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum",
                            "Neg", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Softplus",
                            "LeakyRelu", "Erf"})  # fmt: skip
#: Ops whose gradient hands the incoming gradient on unchanged to same-shaped inputs.
_PASS_GRADIENT = frozenset({"BiasAdd", "BiasAddV1", "Add", "AddV2", "AddN"})
#: Elementwise ops whose gradient kernel (``ReluGrad``, ``SigmoidGrad``...) writes into
#: the incoming gradient's buffer: a ``BinaryElementWiseOp`` or cwise op that forwards an
#: input nothing else holds. Measured: on a CPU, VGG16's ``block1_conv2`` backward
#: allocates no buffer for its ``ReluGrad``.
_FORWARDED_GRADIENT = frozenset({"Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Softplus",
                                 "Sigmoid", "Tanh"})  # fmt: skip
_NO_GRADIENT = frozenset({"StopGradient", "PreventGradient", "Shape", "ShapeN", "Size", "Rank"})


@dataclasses.dataclass(frozen=True)
class BlockBytes:
    """One block's bytes and costs (see the module docstring)."""

    name: str
    kind: str
    wrapped: bool
    saved_bytes: int
    input_bytes: int
    output_bytes: int
    forward_bytes: int
    backward_bytes: int
    forward_costs: tuple[OpCost, ...]
    backward_costs: tuple[OpCost, ...]
    shared: tuple[tuple[str, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class StepBytes:
    """The blocks' bytes, and the model's inputs and outputs at the batch size."""

    blocks: tuple[BlockBytes, ...]
    input_bytes: int
    output_bytes: int


def _float(t: tf.Tensor) -> bool:
    return t.dtype.is_floating or t.dtype.is_complex


class _Graph:
    """Which tensors carry gradients, and the buffer each tensor is a view of."""

    def __init__(self, step: TracedStep, trainable: set[int]) -> None:
        ops = step.graph.get_operations()
        self.source: dict[str, tf.Tensor] = {}
        for op in ops:
            for t in op.outputs:
                if op.type in VIEW_OPS and op.inputs:
                    self.source[t.name] = self.source.get(op.inputs[0].name, op.inputs[0])
        captured = {id(internal): external for external, internal in step.graph.captures}
        depends: set[str] = set()
        for op in ops:
            if op.type == "ReadVariableOp":
                handle = captured.get(id(op.inputs[0]))
                if handle is not None and id(handle) in trainable:
                    depends.add(op.outputs[0].name)
                continue
            if op.type in _NO_GRADIENT:
                continue
            if any(t.name in depends for t in op.inputs):
                depends.update(t.name for t in op.outputs if _float(t))
        reach: set[str] = {t.name for t in step.outputs}
        for op in reversed(ops):
            if any(t.name in reach for t in op.outputs) and op.type not in _NO_GRADIENT:
                reach.update(t.name for t in op.inputs)
        self.grad = {n for n in depends if n in reach}
        self.variable = {op.outputs[0].name for op in ops if op.type == "ReadVariableOp"} | {
            t.name for op in ops if op.type == "Const" for t in op.outputs
        }
        self.inputs = {t.name for t in step.inputs}

    def root(self, t: tf.Tensor) -> tf.Tensor:
        return self.source.get(t.name, t)

    def needs_grad(self, t: tf.Tensor) -> bool:
        return t.name in self.grad

    def storage(self, t: tf.Tensor) -> bool:
        """Whether ``t`` is activation memory (not a weight, constant or model input)."""
        r = self.root(t)
        return r.name not in self.variable and r.name not in self.inputs and tensor_bytes(r) > 0

    def reads(self, op: tf.Operation) -> list[tf.Tensor]:
        """The tensors ``op``'s gradient reads, if any input needs a gradient."""
        wanted = [i for i, t in enumerate(op.inputs) if self.needs_grad(t)]
        if not wanted or not any(self.needs_grad(t) for t in op.outputs):
            return []
        if op.type in _OPERANDS and len(op.inputs) > max(_OPERANDS[op.type]):
            a, b = _OPERANDS[op.type]
            out = [op.inputs[b]] if a in wanted else []
            return out + ([op.inputs[a]] if b in wanted else [])
        skipped = frozenset(i for i in range(len(op.inputs)) if i not in wanted)
        ins, outs = op_reads(op, skipped)
        return [op.inputs[i] for i in ins] + [op.outputs[i] for i in outs]


def _backward_cost(op: tf.Operation, g: _Graph, reads: list[tf.Tensor]) -> OpCost:
    forward = op_cost(op)
    wanted = [t for t in op.inputs if g.needs_grad(t)]
    if op.type in _OPERANDS:
        a, b = _OPERANDS[op.type]
        count = sum(1 for i in (a, b) if i < len(op.inputs) and g.needs_grad(op.inputs[i]))
    else:
        count = 1
    moved = sum(tensor_bytes(t) for t in reads)
    moved += sum(tensor_bytes(t) for t in op.outputs if g.needs_grad(t))
    moved += sum(tensor_bytes(t) for t in wanted)
    return OpCost(forward.flops * count, moved, forward.dtype)


def analyze(step: TracedStep, trainable_handles: set[int] | None = None) -> StepBytes:
    """Bytes and op costs of every block of ``step`` (see the module docstring).

    Args:
        step: The traced forward pass.
        trainable_handles: ``id``s of the trainable variables' resource
            handles; by default those of every variable the graph captures.
    """
    if trainable_handles is None:
        trainable_handles = {id(external) for external, _ in step.graph.captures}
    g = _Graph(step, trainable_handles)
    blocks = step.blocks
    owner: dict[str, int] = {}
    readers: dict[str, set[int]] = {}
    root_of: dict[str, tf.Tensor] = {}
    per_op_reads: dict[str, list[tf.Tensor]] = {}
    for i, block in enumerate(blocks):
        for op in block.ops:
            read = [t for t in g.reads(op) if g.storage(t)]
            per_op_reads[op.name] = read
            for t in read:
                r = g.root(t)
                root_of[r.name] = r
                owner.setdefault(r.name, i)
                readers.setdefault(r.name, set()).add(i)
    saved = [0] * len(blocks)
    shared: list[dict[int, int]] = [{} for _ in blocks]
    for name, i in owner.items():
        size = tensor_bytes(root_of[name])
        saved[i] += size
        for j in readers[name] - {i}:  # later blocks whose backward reads it too
            shared[i][j] = shared[i].get(j, 0) + size
    # last forward use (block index) of each buffer made in a block
    last_use: dict[str, int] = {}
    outputs = {g.root(t).name for t in step.outputs}
    for i, block in enumerate(blocks):
        for op in block.ops:
            for t in op.inputs:
                last_use[g.root(t).name] = i
    in_flight = [0] * (len(blocks) + 1)
    for i, block in enumerate(blocks):
        for op in block.ops:
            if op.type in VIEW_OPS:
                continue
            for t in op.outputs:
                if not g.storage(t):
                    continue
                end = owner.get(t.name, last_use.get(t.name, i))
                if t.name in outputs:
                    end = len(blocks)
                for j in range(i + 1, min(end, len(blocks))):
                    in_flight[j] += tensor_bytes(t)
    result = []
    for i, block in enumerate(blocks):
        b = _block(block, i, g, owner, saved[i], last_use, in_flight[i], per_op_reads)
        also = tuple((blocks[j].name, n) for j, n in sorted(shared[i].items()))
        result.append(dataclasses.replace(b, shared=also))
    return StepBytes(
        blocks=tuple(result),
        input_bytes=sum(tensor_bytes(t) for t in step.inputs),
        output_bytes=sum(tensor_bytes(t) for t in step.outputs),
    )


def _block(block, i, g: _Graph, owner, saved, last_use, in_flight, per_op_reads) -> BlockBytes:
    unique = {}
    for t in block.inputs:
        if g.storage(t) and _float(g.root(t)):
            unique[g.root(t).name] = tensor_bytes(g.root(t))
    input_bytes = sum(unique.values())
    outs = {g.root(t).name: tensor_bytes(g.root(t)) for t in block.outputs if g.storage(t)}
    # forward: buffers made here live until their last use in this block, or
    # its end if a later block uses them (those a later block saves included)
    local_last: dict[str, int] = {}
    for k, op in enumerate(block.ops):
        for t in op.inputs:
            local_last[g.root(t).name] = k
    live = peak = 0
    alive: dict[str, int] = {}

    def wanted_after(name: str, k: int) -> bool:
        return (
            local_last.get(name, -1) > k
            or last_use.get(name, i) > i
            or name in outs
            or name in owner
        )

    for k, op in enumerate(block.ops):
        if op.type in FORWARDING_OPS and op.outputs:
            size = tensor_bytes(op.outputs[0])
            for t in op.inputs:  # the output takes over a dying input's buffer
                if t.name in alive and alive[t.name] == size and not wanted_after(t.name, k):
                    live -= alive.pop(t.name)
                    break
        if op.type not in VIEW_OPS:
            for t in op.outputs:
                if g.storage(t) and owner.get(t.name) != i:
                    alive[t.name] = tensor_bytes(t)
                    live += alive[t.name]
        peak = max(peak, live)
        for name in [n for n in alive if not wanted_after(n, k)]:
            live -= alive.pop(name)
    forward_bytes = peak + in_flight
    # backward: the block's saved tensors and the gradients of its outputs first,
    # each op's input gradients made, an output's gradient freed once its
    # producer's gradient has run, a saved tensor once its last reader's has
    grads = {g.root(t).name: tensor_bytes(g.root(t)) for t in block.outputs if g.needs_grad(t)}
    last_reader: dict[str, int] = {}  # saved tensor -> the first op (in forward) reading it
    held: dict[str, int] = {}
    for k, op in enumerate(block.ops):
        for t in per_op_reads.get(op.name, []):
            r = g.root(t)
            if owner.get(r.name) == i and r.name not in last_reader:
                last_reader[r.name], held[r.name] = k, tensor_bytes(r)
    live = peak = sum(grads.values()) + saved  # saved: the sizes in ``held``, summed
    forward_costs, backward_costs = [], []
    for k in reversed(range(len(block.ops))):
        op = block.ops[k]
        forward_costs.append(op_cost(op))
        reads = per_op_reads.get(op.name, [])
        if any(g.needs_grad(t) for t in op.inputs) and any(g.needs_grad(t) for t in op.outputs):
            backward_costs.append(_backward_cost(op, g, reads))
            if op.type not in VIEW_OPS and op.type not in FREE_OPS:
                live += _input_gradients(op, g, grads)
                peak = max(peak, live)
                for t in op.outputs:
                    live -= grads.pop(t.name, 0)
        for name in [n for n, at in last_reader.items() if at == k]:
            live -= held.pop(name, 0)
    forward_costs.reverse()
    return BlockBytes(
        name=block.name,
        kind=block.kind,
        wrapped=block.wrapped,
        saved_bytes=saved,
        input_bytes=input_bytes,
        output_bytes=sum(outs.values()),
        forward_bytes=forward_bytes,
        backward_bytes=peak - saved,
        forward_costs=tuple(forward_costs),
        backward_costs=tuple(backward_costs),
    )


def _input_gradients(op: tf.Operation, g: _Graph, grads: dict[str, int]) -> int:
    """Adds the gradients ``op``'s backward makes for its inputs to ``grads``; the new bytes.

    ``BiasAdd`` and ``Add`` hand the incoming gradient on as it is to their
    same-shaped inputs, and the gradient kernels of elementwise activations
    (``ReluGrad``, ``TanhGrad``...) write into the incoming gradient's buffer,
    which nothing else reads (TensorFlow's ``forward_input_or_allocate_output``):
    neither makes new bytes.
    """
    made, passed = 0, None
    if (op.type in _PASS_GRADIENT or op.type in _FORWARDED_GRADIENT) and op.outputs:
        if op.outputs[0].name in grads:
            passed = op.outputs[0]  # same-shaped inputs get this very buffer
    for t in op.inputs:
        r = g.root(t)
        if g.needs_grad(t) and r.name not in g.variable and r.name not in grads:
            if passed is not None and tensor_bytes(r) == tensor_bytes(passed):
                grads[r.name] = grads.pop(passed.name, 0)
                if op.type in _FORWARDED_GRADIENT:
                    passed = None  # one buffer, one input
                continue
            grads[r.name] = tensor_bytes(r)
            made += grads[r.name]
    return made
