"""Holding a block's upstream gradient until the backward built before it is done.

:meth:`kswap.layers.schedule.GraphState.arrive` makes the gradient a block's
backward starts from anew under control dependencies on the gradients the
block before made: :func:`not_upstream_of` leaves out those it is computed
from anyway (a control edge into a product stops Grappler reassociating it),
and :func:`held` makes the new tensors with :func:`named_identity`, named
next to the originals so that Grappler, which sorts a product's inputs by
name, rounds it as in the tape's own graph. Used by the schedule only.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["held", "named_identity", "not_upstream_of"]


def not_upstream_of(deps: list[tf.Tensor], tensors: list[tf.Tensor]) -> list[tf.Tensor]:
    """``deps`` without the ones ``tensors`` already depend on through data inputs.

    Only ops made after the first of ``deps`` are searched (op ids grow as
    ops are made), which keeps the search to the ops between two blocks.
    """
    if not deps:
        return deps
    wanted = {d.op for d in deps}
    floor = min(op._id for op in wanted)
    seen, stack, found = set(), [t.op for t in tensors], set()
    while stack:
        op = stack.pop()
        if op in seen or op._id < floor:
            continue
        seen.add(op)
        if op in wanted:
            found.add(op)
        stack.extend(t.op for t in op.inputs)
    return [d for d in deps if d.op not in found]


def held(g):
    """``g`` made anew under the current control dependencies (None stays None)."""
    if isinstance(g, tf.IndexedSlices):
        values, indices = named_identity(g.values), named_identity(g.indices)
        return tf.IndexedSlices(values, indices, g.dense_shape)
    return named_identity(g) if isinstance(g, tf.Tensor) else g


def named_identity(t: tf.Tensor) -> tf.Tensor:
    """``tf.identity(t)`` named ``<t's op>/Identity``.

    Grappler sorts the inputs of commutative ops by name before it reassociates
    products (``(dy * x) * c`` becomes ``(c * first) * second``, by name); a name
    next to the original's keeps the tape's order, and its rounding.
    """
    with tf.compat.v1.get_default_graph().name_scope(t.op.name + "/"):
        return tf.identity(t)
