"""The blocks of a model as a profiled trace names them: its layers, kinds and inputs.

A block is a layer kswap wraps (or would wrap, in a plain model). The trace
names a nested model's layers ``outer/inner``; :func:`block_layers` walks the
model in that order, looking through kswap's wrappers. The rest is what the
model, rather than the trace, tells of each block: its kind
(:func:`block_kinds`), its inputs' bytes at a batch size
(:func:`input_bytes`), the batch size of a trace that does not record it
(:func:`trace_batch_size`) and the saved tensors several blocks' backward
reads (:func:`shared_reads`). :func:`kswap.profiler.workload.workload_from_trace`
builds the planner's blocks from these and the profiled step.

Example:
    >>> import keras
    >>> from kswap.profiler.blocks import block_kinds, block_layers, input_bytes
    >>> model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, name="d1"),
    ...                           keras.layers.Dense(10, name="d2")])
    >>> [name for name, _ in block_layers(model)]
    ['d1', 'd2']
    >>> sorted(block_kinds(model).values()), input_bytes(model.get_layer("d2"), 16)
    (['dense', 'dense'], 2048)
"""

from __future__ import annotations

import warnings

import keras
import numpy as np

from kswap.trace import Trace

__all__ = [
    "block_kinds",
    "block_layers",
    "input_bytes",
    "ordered_blocks",
    "shared_reads",
    "trace_batch_size",
]


def block_layers(model) -> list[tuple[str, keras.layers.Layer]]:
    """``(trace layer name, layer)`` of every layer kswap wraps, in the model's order.

    Nested models are walked (their layers are named ``outer/inner``, as in
    the trace); kswap's wrappers are looked through.
    """
    return [(name, inner) for name, inner, _ in _walk(model)]


def ordered_blocks(model) -> set[str]:
    """Trace names of the blocks whose backward kswap runs one op at a time.

    Those of kswap's wrappers that swap or recompute; a kept block (and a
    plain model's layer) runs its backward as without kswap.
    """
    return {name for name, _, wrapper in _walk(model) if wrapper and wrapper.action.kind != "keep"}


def _walk(model) -> list[tuple[str, keras.layers.Layer, keras.layers.Layer | None]]:
    from kswap.layers.offload import Offload

    out = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        wrapper = layer if isinstance(layer, Offload) else None
        inner = layer.layer if wrapper else layer
        if isinstance(inner, keras.Model) and hasattr(inner, "layers"):
            out.extend((f"{inner.name}/{n}", sub, w) for n, sub, w in _walk(inner))
        else:
            out.append((layer.name, inner, wrapper))
    return out


def block_kinds(model) -> dict[int, str]:
    """Each block's kind by its layer's ``id``: ``"conv"``, ``"dense"``, ``"norm"`` or ``"other"``.

    ``"conv"`` for the layers ``OffloadingModel(policy="conv")`` wraps
    (convolutions and the pass-through layers producing their inputs; of an
    offloaded model, whose layers are kswap's wrappers, the convolutions only).
    """
    from kswap.offloading import _selector

    conv = _selector("conv", model)
    norms = (keras.layers.BatchNormalization, keras.layers.LayerNormalization)
    kinds = {}
    for _, layer in block_layers(model):
        if conv(layer):
            kinds[id(layer)] = "conv"
        elif isinstance(layer, keras.layers.Dense):
            kinds[id(layer)] = "dense"
        elif isinstance(layer, norms):
            kinds[id(layer)] = "norm"
        else:
            kinds[id(layer)] = "other"
    return kinds


def trace_batch_size(trace: Trace, layers, step: int) -> int:
    """The batch size of a trace that does not record it (one profiled inside ``fit``).

    The leading dimension most often found in the step's buffers of a
    layer whose output shape, but for the batch, matches theirs.
    """
    tails: dict[str, tuple[str, ...]] = {}
    for name, layer in layers:
        try:
            shape = tuple(layer.output.shape)
        except (AttributeError, ValueError, RuntimeError):
            continue
        if len(shape) > 1 and all(d is not None for d in shape[1:]):
            tails[name] = tuple(str(d) for d in shape[1:])
    votes: dict[int, int] = {}
    for b in trace.buffers:
        tail = tails.get(b.layer) if b.step == step and b.shape else None
        if tail is None:
            continue
        dims = b.shape.strip("[]()").replace(" ", "").split(",")
        if tuple(dims[1:]) == tail and dims[0].isdigit():
            votes[int(dims[0])] = votes.get(int(dims[0]), 0) + 1
    return max(votes, key=lambda k: (votes[k], k)) if votes else 0


def input_bytes(layer, batch: int) -> int:
    """The bytes of ``layer``'s inputs at batch size ``batch``, from their shapes and dtypes."""
    try:
        inputs = keras.tree.flatten(layer.input)
    except (AttributeError, ValueError, RuntimeError):  # shared or never called
        return 0
    total = 0
    for t in inputs:
        shape = getattr(t, "shape", None)
        if shape is None:
            continue
        n = batch
        for d in shape[1:]:
            n *= d or 0
        total += n * _itemsize(t)
    return total


def _itemsize(t) -> int:
    try:
        return np.dtype(keras.backend.standardize_dtype(t.dtype)).itemsize
    except TypeError:
        return 4


def shared_reads(model, batch: int, index: dict[str, int], saved: list[int]) -> dict[str, tuple]:
    """``Block.shared`` of each block, from the model's graph (capped at its saved bytes)."""
    from kswap.estimate.graph import trace_step
    from kswap.estimate.memory import analyze

    try:
        step = analyze(trace_step(model, batch))
    except Exception as e:  # the workload stays usable: each tensor with one reader
        warnings.warn(
            f"kswap could not trace {model.name!r} to find tensors that several blocks' "
            f"backward reads ({type(e).__name__}: {e}); the plan assumes one reader each.",
            stacklevel=3,
        )
        return {}
    out = {}
    for b in step.blocks:
        if b.name not in index:
            continue
        room, pairs = saved[index[b.name]], []
        for name, size in b.shared:
            if name in index and name != b.name and room > 0:
                pairs.append((name, min(size, room)))
                room -= pairs[-1][1]
        if pairs:
            out[b.name] = tuple(pairs)
    return out
