"""Recording a block's forward ops, with the name scope the tape gives each.

:func:`record_ops` runs a function (a layer's forward) in the current graph and
returns the ops it created, and for each the name scope that was current when
TensorFlow's gradient tape recorded it. The tape builds an op's backward in
``gradient_tape/<that scope>/``; :func:`kswap.layers.replay.replay_gradients`
builds it in the same scope, so that Grappler, which sorts the inputs of sums
by name, rounds them as without kswap.

Example:
    >>> import tensorflow as tf
    >>> from kswap.layers.recording import record_ops
    >>> types = []
    >>> @tf.function
    ... def f(x):
    ...     _, ops, _ = record_ops(lambda: tf.nn.relu(x * x))
    ...     types.extend(op.type for op in ops)
    ...     return x
    >>> _ = f(tf.constant(3.0))
    >>> types
    ['Mul', 'Relu']
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import tensorflow as tf
from tensorflow.python.eager import execute as tf_execute
from tensorflow.python.framework import ops as tf_ops

__all__ = ["record_ops"]


def record_ops(fn: Callable[[], object]) -> tuple[object, list[tf.Operation], dict[str, str]]:
    """Runs ``fn`` in the current graph.

    Returns:
        ``(result, ops, scopes)``: what ``fn`` returned, the ops it created in
        creation order, and for each op (by name) the name scope that was
        current when it was made, as TensorFlow's gradient tape records it.
        The tape names an op's backward ``gradient_tape/<that scope>/...``
        and :func:`kswap.layers.replay.replay_gradients` does the same:
        Grappler sorts the inputs of sums by name, so equal names mean equal
        rounding.
    """
    _install_scope_hook()
    graph = tf.compat.v1.get_default_graph()
    start = len(graph.get_operations())
    outer = getattr(_LOCAL, "sink", None)
    _LOCAL.sink = scopes = {}
    try:
        result = fn()
    finally:
        _LOCAL.sink = outer
        if outer is not None:
            outer.update(scopes)
    return result, graph.get_operations()[start:], scopes


_LOCAL = threading.local()
_HOOK_LOCK = threading.Lock()
_HOOKED: list = []


def _install_scope_hook() -> None:
    """Wraps TensorFlow's gradient recording to note each op's name scope.

    The tape is told the scope (``ops.get_name_scope()`` at recording time)
    but keeps it in C++; the wrapper copies it into the calling thread's
    open :func:`record_ops`, if any, and otherwise only forwards the call.
    """
    with _HOOK_LOCK:
        original = getattr(tf_execute, "record_gradient", None)
        if _HOOKED or original is None:  # hooked, or a TensorFlow without it
            return

        def record_gradient(op_name, inputs, attrs, outputs):
            sink = getattr(_LOCAL, "sink", None)
            if sink is not None and outputs and not tf.executing_eagerly():
                sink[outputs[0].op.name] = tf_ops.get_name_scope()
            return original(op_name, inputs, attrs, outputs)

        tf_execute.record_gradient = record_gradient
        _HOOKED.append(original)


def _tape_scope(op: tf.Operation, scopes: Mapping[str, str]) -> str:
    """The absolute name scope the tape would build ``op``'s backward in."""
    scope = scopes.get(op.name)
    if scope is None:  # made without the recording hook: its parent scope
        scope = op.name.rpartition("/")[0]
    return f"gradient_tape/{scope}/" if scope else "gradient_tape/"
