"""The backward of an offloaded block: what forward sends to host, and its gradients.

An offloaded block (:mod:`kswap.layers.offload`) is one ``tf.custom_gradient``.
In forward, :func:`offload_reads` sends to host memory the tensors its
backward will read (:mod:`kswap.layers.saved`, and the plans of its called
functions, custom gradients and loops). Its gradient function is
:func:`replay_grad`: TensorFlow's own gradient functions replayed from the
copies brought back (:mod:`kswap.layers.replay`), its large ops chained in the
order that keeps the fewest bytes alive (:mod:`kswap.layers.chain`); or, for
a block that cannot be replayed or is planned for recomputation,
:func:`recompute_grad`: the forward run again from its inputs
(:mod:`kswap.layers.recompute`). Both wait for their turn in the graph's
schedule (:mod:`kswap.layers.schedule`). ``worth(tensor)`` says which tensors
are worth a host copy (:data:`kswap.layers.offload.MIN_OFFLOAD_BYTES`).

Example:
    Eagerly (no graph state), a recomputed block's gradient function:

    >>> import types, keras, tensorflow as tf
    >>> from kswap.layers.backward import recompute_grad
    >>> from kswap.layers.recompute import layer_state
    >>> layer = keras.layers.Dense(2)
    >>> x = tf.ones((1, 3))
    >>> _ = layer(x)
    >>> seeds = layer_state(layer).seed_values()
    >>> grad = recompute_grad(types.SimpleNamespace(layer=layer), None, -1, [x],
    ...                       lambda xs: layer(xs[0]), seeds, worth=lambda t: False)
    >>> grad(tf.ones((1, 2)))[0].shape
    TensorShape([1, 3])
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from kswap import transfer
from kswap.layers import calls as calls_lib
from kswap.layers import custom as custom_lib
from kswap.layers import loops as loops_lib
from kswap.layers import recompute, replay, saved
from kswap.layers.chain import order_backward
from kswap.layers.per_use import Slots, split_uses, unique
from kswap.layers.schedule import GraphState
from kswap.layers.tensors import dense_parts

__all__ = ["offload_reads", "replay_grad", "recompute_grad"]


def offload_reads(
    state: GraphState, plan: replay.ReplayPlan, xs, *, worth: Callable[[tf.Tensor], bool]
) -> tuple[dict, dict, dict]:
    """Sends to host what the block's backward will read (of it, what is ``worth`` a copy).

    Returns:
        The plans of its ``tf.function`` calls, of its custom gradients and
        of its loops.
    """
    calls = {op: calls_lib.prepare_call(op) for op in plan.ops if calls_lib.replayable_call(op)}
    loops = {  # a loop's per-step values get host copies when its backward is built
        op: loops_lib.prepare_loop(op, state, worth)
        for op in plan.ops
        if loops_lib.replayable_loop(op)
    }
    custom = {op: custom_lib.custom_gradient_of(op) for op in plan.ops}
    custom = {op: spec for op, spec in custom.items() if spec is not None}
    for spec in custom.values():  # what the user's gradient function holds
        for t in spec.reads:
            if worth(t):
                state.offload(t)
    # an input is "skipped" (no gradient wanted) as in replay_gradients
    wanted = {x.ref() for x in xs} | {t.ref() for op in plan.ops for t in op.outputs}
    others = []
    for op in plan.ops:
        if op in custom or op in loops:
            continue
        if op in calls:  # what the tf.function's backward reads: some of its outputs
            ins, outs = (), calls[op].reads
        else:
            skipped = frozenset(i for i, t in enumerate(op.inputs) if t.ref() not in wanted)
            ins, outs = saved.op_reads(op, skipped)
            ins = tuple(i for i in ins if i not in saved.inputs_read_in_place(op))
            in_place = saved.outputs_read_in_place(op)
            outs = tuple(i for i in outs if i not in in_place)
        for t in [op.inputs[i] for i in ins] + [op.outputs[i] for i in outs]:
            if worth(t):
                state.offload(t)
        # the gradient may read the shapes of the others
        others += [t for i, t in enumerate(op.inputs) if i not in ins]
        others += [t for i, t in enumerate(op.outputs) if i not in outs]
    for t in others:  # once every host copy exists: a shape is taken from one if it can
        if not t.shape.is_fully_defined() and worth(t):
            state.remember_shape(t)
    return calls, custom, loops


def replay_grad(
    wrapper,
    state: GraphState,
    index: int,
    plan,
    xs,
    flat_out,
    scopes,
    specials,
    slots: Slots,
    *,
    worth: Callable[[tf.Tensor], bool],
):
    """The gradient function of a replayed block; ``worth``: tensors that get a host copy."""
    calls, custom, loops = specials
    graph = tf.compat.v1.get_default_graph()

    # read from the device whatever the host holds (see saved.outputs_read_in_place
    # and saved.inputs_read_in_place)
    in_place = {op.outputs[i].ref() for op in plan.ops for i in saved.outputs_read_in_place(op)}
    in_place |= {op.inputs[i].ref() for op in plan.ops for i in saved.inputs_read_in_place(op)}

    def grad(*upstream, variables=None):
        upstream = state.arrive(index, list(upstream), wrapper.prefetch)
        gate = state.gate(index, wrapper.prefetch)

        def fetch(t: tf.Tensor, by_value: bool) -> tf.Tensor:
            if t.ref() in in_place:
                state.kept_on_device.append((wrapper.name, t.name))
                return t
            if not by_value:
                # a static shape needs no tensor: TensorFlow folds it to a constant
                if t.shape.is_fully_defined():
                    return t
                if state.has_shape(t):
                    return state.stand_in(t, gate)
            if state.has_host_copy(t):
                return state.swap_in(t, gate)
            if worth(t):
                state.kept_on_device.append((wrapper.name, t.name))
            return t

        reads = replay.variable_reads(plan.ops, variables or [])
        start = len(graph.get_operations())
        source_grads, var_grads = replay.replay_gradients(
            plan.ops,
            xs,
            flat_out,
            list(upstream),
            fetch,
            reads,
            scopes,
            saved.op_reads,
            calls,
            custom,
            loops,
            per_use=slots.recorded,
        )
        further: list = []
        if slots.recorded:
            source_grads, further = split_uses(slots, xs, source_grads)
        # blocks whose tensors are under a quarter of the largest cannot set the peak
        results = [*source_grads, *further, *var_grads]
        order_backward(graph.get_operations()[start:], results, state.largest // 4)
        state.finish(index, [*source_grads, *further], list(var_grads))
        if slots.recorded:
            return ([*source_grads, further], var_grads) if variables else [*source_grads, further]
        return _gradients(xs, source_grads, var_grads, variables)

    return grad


def _gradients(xs, source_grads, var_grads, variables):
    """What a ``tf.custom_gradient`` function returns.

    A tensor passed twice (``Multiply()([h, h])``) already has its full
    gradient at its first position; the others get None so it is not counted
    twice.
    """
    source_grads = [g if first else None for g, first in zip(source_grads, unique(xs), strict=True)]
    if variables:
        return source_grads, var_grads
    return source_grads


def recompute_grad(
    wrapper,
    state,
    index,
    xs,
    call,
    seeds_before,
    host: bool = True,
    *,
    worth: Callable[[tf.Tensor], bool],
):
    """The backward of a block re-run from its inputs, in host memory if ``host``.

    Of the inputs, those ``worth`` a copy wait there.
    """
    offloaded = [host and worth(x) for x in xs]
    if state is not None:  # graph: through the shared state (one copy per tensor)
        for x, off in zip(xs, offloaded, strict=True):
            if off:
                state.offload(x)
    else:  # eager
        hosts = [transfer.to_host(x) if off else x for x, off in zip(xs, offloaded, strict=True)]
    # named as the tape names a layer's backward, so a trace attributes it to the layer
    scope = f"gradient_tape/{tf.compat.v1.get_default_graph().get_name_scope()}/"

    def grad(*upstream, variables=None):
        if state is None:
            return backward(list(upstream), variables)
        with tf.compat.v1.get_default_graph().name_scope(scope):
            return backward(list(upstream), variables)

    def backward(upstream, variables):
        if state is not None:
            upstream = state.arrive(index, upstream, wrapper.prefetch)
            gate = state.gate(index, wrapper.prefetch)
            back = [
                state.swap_in(x, gate) if off else x for x, off in zip(xs, offloaded, strict=True)
            ]
        else:  # one device copy per tensor, as the graph's state makes
            copies: dict = {}
            for h, x, off in zip(hosts, xs, offloaded, strict=True):
                if x.ref() not in copies:
                    copies[x.ref()] = transfer.to_device(h, x.device or None) if off else x
            back = [copies[x.ref()] for x in xs]
        # the re-run starts with this block's backward, not when its inputs exist
        after = dense_parts(upstream) if state is not None else []
        source_grads, var_grads = recompute.rerun_gradients(
            wrapper.layer, back, call, upstream, list(variables or []), seeds_before, after
        )
        if state is not None:
            state.finish(index, list(source_grads), list(var_grads))
        return _gradients(xs, source_grads, var_grads, variables)

    return grad
