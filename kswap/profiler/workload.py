"""A planner's :class:`~kswap.planning.Workload` from a profiled training step.

:func:`workload_from_trace` reads one profiled step of a :class:`~kswap.Trace`
(of the plain model, or of an offloaded one) and the model, and gives the
planner what it plans for: one :class:`~kswap.planning.Block` per layer kswap
wraps, in the model's order, and the bytes that stay on the device. How each
field is derived (``t_b``: when the blocks' last forward op ends, the
backward's start; ``t_e``: when its last backward op ends; "step buffers":
device buffers allocated in the step; "backward ops": those starting at
``t_b`` or later, not the shape computations the executor runs during the
forward):

- ``saved_bytes``: step buffers of the forward phase alive at ``t_b``, which
  the backward reads (plus, in an offloaded trace, the layer's host copies
  alive then). Each counts once, in the block whose backward frees it: the
  layer of the last backward op to end before it is freed, which is its
  last reader (a convolution's output that BatchNormalization's backward
  reads belongs to the BatchNormalization). One that outlives the backward
  stays with the layer that made it.
- ``forward_seconds``, ``backward_seconds``: the step's wall time shared out
  among its ops: each op gets its share of the time it ran (ops running
  together split it equally, :func:`kswap.trace.optime.op_shares`) and the
  idle time before it (the executor dispatching it; the step's first op also
  gets the time before it, its last the time after it), so the times add up
  to the step's length. An op of no block (the input pipeline, the loss, a
  Keras operation between layers) counts for the block whose op of the same
  phase started last before it (the first one, if none did).
  ``recompute_seconds`` is the forward's.
- ``update_seconds``: the optimizer's ops (phase ``update``), wherever they
  ran. Transfer ops (an offloaded trace's copies) are in no block:
  ``metadata["transfer_seconds"]``; the simulator runs copies on the link.
- ``forward_bytes``: the most bytes alive at once of the forward-phase step
  buffers that are not saved and that the block's forward ops made or were
  the last to read (its input, when no backward needs it);
  ``backward_bytes``: the same of the backward-phase step buffers freed by
  ``t_e`` (weight gradients kept for the update are ``gradient_bytes``),
  so the gradient the block receives is in its working set, and so is a
  weight gradient the optimizer applied and freed before ``t_e`` (fit's
  graph runs a weight's update as soon as its gradient exists, on an idle
  core, while the backward goes on). The optimizer's buffers freed by
  ``t_e`` (an interleaved update's temporaries: Adam's of a weight are
  several times its size) count for the block whose backward op ended
  last before they were freed, and never as an op's temporaries, since
  they run beside the backward however kswap orders it. kswap's
  wrappers run a swapped or recomputed block's backward ops one after
  another, in the order that keeps the fewest bytes alive
  (:mod:`kswap.layers.order`), so there only the largest op's temporaries
  count, and of a block profiled side by side ``backward_bytes`` is the
  least of that and its backward replayed one op at a time in such an
  order (each buffer read last by the op that ended last before it was
  freed; BatchNormalization's gradient then holds two tensors of its
  input's size instead of four); a kept block runs them side by side (the
  CPU's convolution gradients each allocate im2col buffers of several times
  their output): ``keep_backward_bytes``.
  Whichever way a block ran in the profiled step is measured; the other is
  derived (one op's temporaries, or those of as many ops as the executor
  runs at once: the CPU's inter-op threads, one on a GPU).
- ``input_bytes``: the layer's inputs, from their shapes and dtypes at the
  trace's batch size.
- ``kind``: ``"conv"`` for the layers ``OffloadingModel(policy="conv")``
  wraps (convolutions and the pass-through layers producing their inputs;
  of an offloaded model, whose layers are kswap's wrappers, the
  convolutions only), then ``"dense"``, ``"norm"`` or ``"other"``.
- ``gradient_bytes`` of a block: its trainable weights' gradients that the
  step still held when its backward ended (``t_e``): its backward-phase
  step buffers alive then, at most its weights' bytes. The simulator counts
  them from the block's backward to the step's end. Where the update ran
  interleaved with the backward (fit's graph on CPU) that is next to
  nothing; where it waited for every gradient (an optimizer that clips by
  the global norm) it is every weight's. The workload's
  ``gradient_bytes``: those of trainable weights of no block, plus (up to
  the gradients that no block's count holds) the backward-phase buffers of
  no block alive at ``t_e``.
- ``weight_bytes``: every weight; ``optimizer_bytes``: the optimizer's
  slots (its variables that are not scalars, which a plan may move; not
  under a ``tf.distribute`` strategy: ``optimizer_movable``);
  ``other_bytes``: what else was on the device when the step began (the
  batch, metrics, the optimizer's scalars; not the weights, nor the slots
  that were there, nor those in the host tier) plus saved bytes of no
  block (the loss's).

The model's side (its blocks, their kinds and inputs) is
:mod:`kswap.profiler.blocks`; the step's times by block,
:mod:`kswap.profiler.step_times`; its buffers by block,
:mod:`kswap.profiler.step_buffers`.

Example:
    >>> import kswap, keras, numpy as np
    >>> from kswap.profiler.workload import workload_from_trace
    >>> model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, name="d1"),
    ...                           keras.layers.Dense(10, name="d2")])
    >>> model.compile("adam", "mse")
    >>> x, y = np.ones((32, 64), "float32"), np.ones((32, 10), "float32")
    >>> work = workload_from_trace(kswap.profile(model, x, y, batch_size=16), model)
    >>> work.names, work.blocks[0].kind
    (('d1', 'd2'), 'dense')
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection

from kswap.layers import chain
from kswap.optimizer_state import distributed, host_variables, slot_variables
from kswap.planning import Block, Workload
from kswap.planning._checks import is_positive
from kswap.profiler import working_sets
from kswap.profiler.blocks import (
    block_kinds,
    block_layers,
    input_bytes,
    ordered_blocks,
    shared_reads,
    trace_batch_size,
)
from kswap.profiler.profile import variable_bytes
from kswap.profiler.step_buffers import block_buffers
from kswap.profiler.step_times import block_times, step_seconds_by_op
from kswap.trace import Trace, extra_by_phase
from kswap.trace.optime import select_ops

# block_layers and step_seconds_by_op (kswap.profiler.blocks, .step_times) are re-exported
__all__ = ["block_layers", "step_seconds_by_op", "workload_from_trace"]


def _width(trace: Trace) -> int:
    """How many ops the plain step runs at once: the CPU's cores, or a GPU's one stream."""
    if not trace.emulated:
        return 1
    import tensorflow as tf

    return tf.config.threading.get_inter_op_parallelism_threads() or os.cpu_count() or 1


def workload_from_trace(
    trace: Trace,
    model,
    *,
    step: int | None = None,
    name: str | None = None,
    ordered_backward: bool | Collection[str] | None = None,
    shared: bool = True,
    tensor_bytes: bool = True,
    step_seconds: float | None = None,
) -> Workload:
    """Builds the planner's workload from one profiled step (see the module's docstring).

    Args:
        trace: A trace from :func:`kswap.profile` or :func:`kswap.measure` of
            ``model``, with op intervals.
        model: The profiled model (plain or offloaded).
        step: Which profiled step; the last if None.
        name: The workload's name; the model's if None.
        ordered_backward: The blocks whose backward ran one op at a time in
            the profiled step: True for every block, False for none, or
            their names; None (default) takes them from the model (kswap's
            wrappers that swap or recompute, :func:`ordered_blocks`). Each
            block gets both working sets, ``backward_bytes`` (one op's
            temporaries at a time, as kswap runs a swapped or recomputed
            block) and ``keep_backward_bytes`` (side by side, as a kept block
            runs): the one that ran is measured, the other derived from it.
            An ordered block's counts the temporaries of ops that run beside
            kswap's chain (:func:`kswap.layers.chain.beside_chain`, for the
            trace's replicas): without oneDNN, a convolution's two gradients
            each take a scratch buffer, and unchained they run side by side.
        shared: Find which saved tensors the backward of more than one block
            reads (``Block.shared``) from the model's graph at the trace's
            batch size (:func:`kswap.estimate.memory.analyze`; a trace shows
            only the last reader).
        tensor_bytes: Count each buffer at the bytes its tensor asked for
            (:meth:`~kswap.Trace.tensor_sizes`), not at the block the
            allocator gave it. The allocator's extra changes from step to
            step (TensorFlow's BFC allocator hands out a free block whole,
            up to twice the request) and would make the blocks' bytes, and
            the plan, depend on the profiled step's luck; it is recorded
            once instead, in ``metadata["allocator_overhead"]``.
        step_seconds: The wall time of the same step run without the
            profiler (the median of a few timed steps). A profiled step
            does not take the time it takes unprofiled (the profiler
            records every op and allocation; on a CPU with oneDNN the
            unprofiled steps of docs/benchmarks.md took 0.72x to 1.19x the
            profiled one), so the blocks' and the update's times are
            scaled by this over the profiled step's
            length (:meth:`~kswap.planning.Workload.scaled_times`). None
            keeps the profiled times.

    Returns:
        A :class:`~kswap.planning.Workload`; its ``metadata`` records the
        source, step, batch size, step time (``step_seconds``: the
        unprofiled one where given, ``profiled_step_seconds``: the profiled
        step's length, ``time_scale``: their ratio), device peak (the
        allocator's) and ``allocator_overhead``: how much higher the step's
        device peak was than that of its tensors' bytes, as a fraction of
        the latter, and ``allocator_extra_by_phase``: the same for the
        step's persistent, forward and backward buffers
        (:func:`kswap.trace.extra_by_phase`; the simulator's
        ``allocated_peak_bytes``).

    Raises:
        ValueError: The trace has no steps, no ops or no backward ops in the
            step, or ``step`` is out of range.
    """
    if not trace.steps:
        raise ValueError("`trace` has no profiled steps. Received: a trace with steps=()")
    if step_seconds is not None and not is_positive(step_seconds):
        raise ValueError(
            f"`step_seconds` must be a positive number of seconds or None. "
            f"Received: step_seconds={step_seconds!r}"
        )
    if step is None:
        step = len(trace.steps) - 1
    ops = select_ops(trace, step)  # raises on a bad step
    if not ops:
        raise ValueError(
            f"`trace` has no op intervals in step {step}: profile with this version of kswap."
        )
    lo, hi = trace.steps[step]
    device_peak = trace.peak_bytes("device", step)
    overhead = trace.allocator_extra("device", step)
    by_phase = extra_by_phase(trace, "device", step)  # of the blocks: before tensor_sizes
    if tensor_bytes:
        trace = trace.tensor_sizes()
    layers = block_layers(model)
    names = [n for n, _ in layers]
    index = {n: i for i, n in enumerate(names)}
    forward_ends = [o.end_ns for o in ops if o.phase == "forward" and o.layer in index]
    # the backward proper: its shape computations run early, as soon as shapes are known.
    # A block's forward op that ends after the last backward op started (another
    # replica's, under tf.distribute) does not delay it.
    last_backward = max((o.start_ns for o in ops if o.phase == "backward"), default=None)
    t_b = max((e for e in forward_ends if last_backward is None or e <= last_backward), default=lo)
    backward = [o for o in ops if o.phase == "backward" and o.start_ns >= t_b]
    if not backward:
        raise ValueError(f"`trace` step {step} has no backward ops: is it a training step?")
    t_e = max(o.end_ns for o in backward)
    # the blocks' kinds, the batch, and the step's times and buffers by block
    kinds = block_kinds(model)
    batch = int(trace.metadata.get("batch_size") or 0) or trace_batch_size(trace, layers, step)
    times = block_times(ops, index, len(names), t_b, lo, hi)
    found = block_buffers(trace, step, ops, backward, index, len(names), t_b, t_e)
    saved, held = found.saved, found.held

    if ordered_backward is None:
        ordered_backward = ordered_blocks(model)
    if isinstance(ordered_backward, bool):
        ordered = set(names) if ordered_backward else set()
    else:
        ordered = set(ordered_backward)
        unknown = sorted(ordered - set(names))
        if unknown:
            raise ValueError(
                f"`ordered_backward` names blocks the model does not have: {unknown[:5]}"
            )
    trainable = {id(v): v for v in model.trainable_weights}
    grads = [0] * len(names)
    for k, (_, layer) in enumerate(layers):
        for v in layer.trainable_weights:
            if trainable.pop(id(v), None) is not None:  # a shared weight counts once
                grads[k] += variable_bytes(v)
    # only what the step still held at the backward's end: the update freed the rest
    applied = sum(grads)
    grads = [min(g, h) for g, h in zip(grads, held, strict=True)]
    applied -= sum(grads)
    also = shared_reads(model, batch, index, saved) if shared and batch else {}
    width = _width(trace)
    beside = chain.beside_chain(trace.metadata.get("replicas"))
    blocks = []
    for k, (block_name, layer) in enumerate(layers):
        blocks.append(
            Block(
                name=block_name,
                shared=also.get(block_name, ()),
                saved_bytes=saved[k],
                forward_seconds=times.forward[k],
                backward_seconds=times.backward[k],
                input_bytes=input_bytes(layer, batch),
                forward_bytes=working_sets.peak(found.forward_sets[k]),
                backward_bytes=working_sets.backward_bytes(
                    found.backward_sets[k],
                    times.ops.get(f"backward:{k}", []) + times.ops.get(f"backward+:{k}", []),
                    backward,
                    block_name in ordered,
                    beside,
                ),
                keep_backward_bytes=(
                    working_sets.side_by_side_peak(found.backward_sets[k], width)
                    if block_name in ordered
                    else working_sets.peak(found.backward_sets[k])
                ),
                kind=kinds[id(layer)],
                gradient_bytes=grads[k],
            )
        )

    # --- persistent bytes -----------------------------------------------------
    weights = {id(v): v for v in model.weights}
    weight_bytes = sum(variable_bytes(v) for v in weights.values())
    gradient_bytes = sum(variable_bytes(v) for v in trainable.values())  # of no block
    gradient_bytes += min(found.stray, applied)  # gradients the trace gives no block
    optimizer = getattr(model, "optimizer", None)
    # the slots a plan may move (counters and the learning rate stay: other bytes)
    slots = {id(v): v for v in (slot_variables(optimizer) if optimizer is not None else ())}
    optimizer_bytes = sum(variable_bytes(v) for v in slots.values())
    # slots kept in the host tier were not on the device when the step began
    on_host = {id(v) for v in host_variables(optimizer)} if optimizer is not None else set()
    device_slots = sum(variable_bytes(v) for k, v in slots.items() if k not in on_host)
    at_start = trace.timeline("device", step).at(lo)
    other = max(at_start - weight_bytes - device_slots, 0) + found.unowned
    work = Workload(
        blocks=tuple(blocks),
        weight_bytes=weight_bytes,
        gradient_bytes=gradient_bytes,
        optimizer_bytes=optimizer_bytes,
        other_bytes=other,
        optimizer_movable=optimizer is None or not distributed(optimizer),
        update_seconds=times.update,
        name=name or model.name,
        metadata={
            "source": "trace",
            "step": step,
            "batch_size": batch,
            "emulated": trace.emulated,
            "step_seconds": (hi - lo) / 1e9,
            "profiled_step_seconds": (hi - lo) / 1e9,
            "device_peak_bytes": device_peak,
            "allocator_overhead": max(overhead, 0.0),
            "allocator_extra_by_phase": by_phase.to_dict(),
            "transfer_seconds": times.transfer,
            "ordered_backward": sorted(ordered) if 0 < len(ordered) < len(names) else bool(ordered),
        },
    )
    if step_seconds is None:
        return work
    work = work.scaled_times(float(step_seconds) / max((hi - lo) / 1e9, 1e-9))
    # the measured figure itself, not the profiled one times the scale (a rounding away)
    return dataclasses.replace(
        work, metadata={**work.metadata, "step_seconds": float(step_seconds)}
    )
