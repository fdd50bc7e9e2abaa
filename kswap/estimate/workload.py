"""A static :class:`~kswap.planning.Workload` from a Keras model and a batch size.

:func:`estimate_workload` traces the model's forward pass at the batch size
(nothing runs, see :mod:`kswap.estimate.graph`), takes each block's bytes from
the shapes and dtypes (:mod:`kswap.estimate.memory`), its times from the ops'
FLOPs and bytes on a device preset (:mod:`kswap.estimate.flops`: the roofline
``max(flops / peak, bytes / bandwidth)`` per op, summed), and the persistent
bytes from the weights and the optimizer (:mod:`kswap.estimate.state`).

The workload's ``other_bytes`` are the step's inputs and targets and the
loss's own tensors (the model's outputs again, and their gradient); its
``update_seconds`` the optimizer's update, which reads and writes every
weight and slot once and reads every gradient (memory-bound).

Example:
    >>> import keras
    >>> from kswap.estimate import estimate_workload
    >>> model = keras.Sequential([keras.Input((32, 32, 3)),
    ...                           keras.layers.Conv2D(8, 3, padding="same", activation="relu",
    ...                                               name="conv"),
    ...                           keras.layers.GlobalAveragePooling2D(name="gap"),
    ...                           keras.layers.Dense(10, name="dense")])
    >>> work = estimate_workload(model, batch_size=16, device="k40", optimizer="adam")
    >>> [(b.name, b.kind, b.saved_bytes) for b in work.blocks]
    [('conv', 'conv', 524288), ('gap', 'pool', 0), ('dense', 'dense', 512)]

``conv``'s ReLU reads its output (16 x 32 x 32 x 8 floats); its input is the
model's, on the device anyway. The average pooling's gradient reads only shapes,
and ``dense`` reads its input (16 x 8 floats).
    >>> work.weight_bytes, work.optimizer_bytes   # (224 + 90) weights of 4 bytes, Adam: 2 slots
    (1256, 2512)
"""

from __future__ import annotations

import numbers
from typing import Any

import keras

from kswap.estimate.flops import roofline_seconds
from kswap.estimate.graph import trace_step
from kswap.estimate.memory import StepBytes, analyze
from kswap.estimate.state import resolve_optimizer, state_bytes
from kswap.planning.devices import Device, as_device
from kswap.planning.workload import Block, Workload

__all__ = ["estimate_workload", "as_device", "check_batch_size"]


def check_batch_size(batch_size: Any) -> int:
    """``batch_size`` as an int >= 1, or a ValueError naming it."""
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, numbers.Integral)
        or batch_size < 1
    ):
        raise ValueError(
            f"`batch_size` must be an integer >= 1. Received: batch_size={batch_size!r}"
        )
    return int(batch_size)


def _trainable_handles(model: keras.Model) -> set[int]:
    handles = set()
    for v in model.trainable_variables:
        inner = getattr(v, "_value", v)
        handle = getattr(inner, "handle", None)
        if handle is not None:
            handles.add(id(handle))
    return handles


def _target_bytes(model: keras.Model, batch_size: int, output_bytes: int) -> int:
    loss = getattr(model, "loss", None)
    if isinstance(loss, str) and "sparse" in loss:
        return batch_size * 8 * max(1, len(model.outputs))  # integer class ids (int64)
    return output_bytes


def _seconds(costs, device: Device) -> float:
    return sum(roofline_seconds(c.flops, c.bytes, device, c.dtype) for c in costs)


def estimate_workload(
    model: keras.Model,
    batch_size: int,
    *,
    device: Device | str = "cpu",
    optimizer: Any = None,
    input_shape: Any = None,
) -> Workload:
    """The planner's workload of one training step of ``model``, from shapes alone.

    Args:
        model: A built Sequential or functional Keras model (models nested in
            it are recursed into, as :func:`kswap.OffloadingModel` does).
        batch_size: Samples per step.
        device: A :class:`~kswap.planning.Device` or a preset's name
            (``"k40"``, ``"v100"``, ``"a100"``, ``"h100"``, ``"h200"``, ``"cpu"``):
            its peak FLOP/s and memory bandwidth give the times.
        optimizer: The optimizer whose slots to count: a Keras optimizer or
            its name. Default: the model's compiled optimizer (none if it is
            not compiled).
        input_shape: Shapes (without the batch dimension) for inputs with
            unknown dimensions: one, a list in ``model.inputs`` order or a dict
            by input name.

    Returns:
        A :class:`~kswap.planning.Workload` with one block per layer call in
        forward order, named by the Keras layer's name; Keras operations
        between layers are blocks that can be neither swapped nor recomputed.
        ``metadata`` records the batch size, the device, the optimizer and the
        model's forward FLOPs.

    Raises:
        ValueError: for a bad batch size, an unknown device, an optimizer
            that is not one, or inputs whose shape stays unknown.
    """
    batch_size = check_batch_size(batch_size)
    device = as_device(device)
    optimizer = resolve_optimizer(model, optimizer)
    if not isinstance(model, keras.Model):
        raise ValueError(
            f"`model` must be a keras.Model. Received: model={model!r} of type "
            f"{type(model).__name__}"
        )
    step = trace_step(model, batch_size, input_shape)
    step_bytes: StepBytes = analyze(step, _trainable_handles(model))
    state = state_bytes(model, optimizer)
    blocks, flops = [], 0.0
    for b in step_bytes.blocks:
        forward = _seconds(b.forward_costs, device)
        flops += sum(c.flops for c in b.forward_costs)
        blocks.append(
            Block(
                b.name,
                saved_bytes=b.saved_bytes,
                forward_seconds=forward,
                backward_seconds=_seconds(b.backward_costs, device),
                input_bytes=b.input_bytes,
                forward_bytes=b.forward_bytes,
                backward_bytes=b.backward_bytes,
                shared=b.shared,
                kind=b.kind,
                swappable=b.wrapped,
                recomputable=b.wrapped,
            )
        )
    targets = _target_bytes(model, batch_size, step_bytes.output_bytes)
    other = step_bytes.input_bytes + targets + 2 * step_bytes.output_bytes
    update_bytes = 3 * state.gradient_bytes + 2 * state.optimizer_bytes
    update = roofline_seconds(0.0, update_bytes, device)
    del step
    return Workload(
        tuple(blocks),
        weight_bytes=state.weight_bytes,
        gradient_bytes=state.gradient_bytes,
        optimizer_bytes=state.optimizer_bytes,
        other_bytes=other,
        update_seconds=update,
        name=model.name,
        metadata={
            "source": "static",
            "batch_size": batch_size,
            "device": device.name,
            "optimizer": type(optimizer).__name__ if optimizer is not None else None,
            "slots_per_weight": round(state.slots, 3),
            "forward_flops": flops,
            "input_bytes": step_bytes.input_bytes,
            "target_bytes": targets,
        },
    )
