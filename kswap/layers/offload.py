"""``Offload``: a wrapper layer whose activations wait in host memory.

Forward runs the wrapped layer, copies to the host tier the tensors its
backward reads, and keeps nothing else for backward. Backward brings them back
(scheduled one block ahead, see :mod:`kswap.layers.schedule`) and computes the
gradients with TensorFlow's own gradient functions (:mod:`kswap.layers.replay`)
— exactly, without re-running the forward. Layers whose forward cannot be
replayed fall back to recomputation with the forward's seeds
(:mod:`kswap.layers.recompute`).

A wrapper's ``action`` (a :class:`kswap.planning.Action`, as a plan gives it)
says what happens to its block: ``"swap"`` (the above, with ``prefetch``),
``"keep"`` (the layer runs as without kswap: TensorFlow keeps what its backward
reads on the device), ``"recompute"`` (only the block's inputs are kept; its
forward runs again in backward) or ``"recompute:host"`` (its inputs wait in host
memory too). Changing it takes effect when the training step is traced again.

Example:
    >>> import keras
    >>> from kswap.layers import Offload
    >>> layer = Offload(keras.layers.Dense(4, activation="relu"))
    >>> model = keras.Sequential([keras.Input((8,)), layer])
    >>> model.compile("sgd", "mse")
    >>> import numpy as np
    >>> _ = model.fit(np.ones((16, 8)), np.ones((16, 4)), verbose=0)
"""

from __future__ import annotations

import numbers
import warnings

import keras
import tensorflow as tf
from tensorflow.python.eager import record

from kswap import transfer
from kswap.layers import calls as calls_lib
from kswap.layers import custom as custom_lib
from kswap.layers import loops as loops_lib
from kswap.layers import recompute, replay, saved
from kswap.layers.chain import dense_parts, order_backward
from kswap.layers.schedule import GraphState, graph_state
from kswap.planning.actions import Action

__all__ = ["Offload", "MIN_OFFLOAD_BYTES", "check_action"]

#: Tensors smaller than this stay on the device (a copy would cost more).
MIN_OFFLOAD_BYTES = 16 * 1024

_warned_eager = False


def check_prefetch(prefetch) -> int:
    if isinstance(prefetch, bool) or not isinstance(prefetch, numbers.Integral) or prefetch < 0:
        raise ValueError(f"`prefetch` must be an integer >= 0. Received: prefetch={prefetch!r}")
    return int(prefetch)


def check_action(action, prefetch: int = 1) -> Action:
    """The :class:`Action` of ``action``: an Action, or its text form.

    ``"swap"`` and ``"recompute:host"`` take ``prefetch``; a form that gives
    its own (``"swap:0"``) keeps it.
    """
    if isinstance(action, Action):
        return action
    if isinstance(action, str) and action.strip() in ("swap", "recompute:host"):
        kind, _, checkpoint = action.strip().partition(":")
        return Action(kind, check_prefetch(prefetch), checkpoint or "device")
    return Action.parse(action)  # names `action` when it is not one


def _bytes(t: tf.Tensor) -> int | None:
    n = t.shape.num_elements()
    return None if n is None else n * t.dtype.size


def _worth_offloading(t: tf.Tensor) -> bool:
    if not (t.dtype.is_floating or t.dtype.is_integer or t.dtype.is_bool or t.dtype.is_complex):
        return False  # handles (resource, variant) and strings stay where they are
    if not tf.executing_eagerly() and t.op.type in (
        "ReadVariableOp",
        "Const",
        "VarHandleOp",
        "Shape",
    ):
        return False
    size = _bytes(t)
    return size is None or size >= MIN_OFFLOAD_BYTES


@keras.saving.register_keras_serializable(package="kswap")
class Offload(keras.layers.Wrapper):
    """Keeps the activations a layer's backward needs in host memory.

    Args:
        layer: The layer to wrap. Its weights are the wrapper's weights (the
            same variables, not copies).
        prefetch: How many blocks ahead backward brings tensors back: 1 starts
            a block's swap-ins when the backward of the next block begins; 0
            when its own begins and the next block's has ended.
        action: What happens to the block (module docstring): ``"swap"``
            (default), ``"keep"``, ``"recompute"``, ``"recompute:host"``, a
            form with its own prefetch (``"swap:0"``) or a
            :class:`kswap.planning.Action`.
        **kwargs: Keras layer arguments (``name``...). The name defaults to
            the wrapped layer's.
    """

    def __init__(self, layer, prefetch: int = 1, action: str | Action = "swap", **kwargs):
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(
                f"`layer` must be a keras.layers.Layer. Received: layer={layer!r} "
                f"of type {type(layer).__name__}"
            )
        if isinstance(layer, Offload):
            raise ValueError(f"`layer` is already offloaded. Received: layer={layer.name!r}")
        kwargs.setdefault("name", layer.name)
        super().__init__(layer, **kwargs)
        self.prefetch = check_prefetch(prefetch)
        self.action = action
        self.supports_jit = False  # XLA ignores device placement
        self.fallbacks: list[str] = []

    @property
    def action(self) -> Action:
        """What happens to the block; setting it also sets ``prefetch``."""
        return self._action

    @action.setter
    def action(self, value: str | Action) -> None:
        action = check_action(value, self.prefetch)
        self._action = action
        if action.copies:
            self.prefetch = action.prefetch

    def build(self, input_shape=None):
        if not self.layer.built:
            self.layer.build(input_shape)
        self.built = True

    def compute_output_shape(self, *args, **kwargs):
        return self.layer.compute_output_shape(*args, **kwargs)

    def compute_output_spec(self, *args, **kwargs):
        return self.layer.compute_output_spec(*args, **kwargs)

    def compute_mask(self, inputs, previous_mask=None):
        # The wrapped layer is called with the masked tensors and sets its outputs'
        # masks itself; Keras asks this only for outputs it left without one. A layer
        # that does not support masking drops the mask, as it does unwrapped.
        if not self.layer.supports_masking:
            return None
        return self.layer.compute_mask(inputs, previous_mask)

    def call(self, inputs, *args, training=None, **kwargs):
        # Keras resolves `training` from the call context; pass it on explicitly,
        # so a recomputation in backward (outside that context) sees it too.
        if getattr(self.layer, "_call_has_training_arg", False):
            kwargs["training"] = training
        if self._action.kind == "keep" or not record.could_possibly_record():
            return self.layer(inputs, *args, **kwargs)  # as without kswap, or no backward
        if _hidden_float_values(args, kwargs):
            # composite values (ragged, sparse) cannot be block inputs, and a
            # closed-over float value would get no gradient: TensorFlow differentiates it
            _warn_not_offloaded(self)
            return self.layer(inputs, *args, **kwargs)
        if tf.executing_eagerly():
            _warn_eager()
            return _block(self, inputs, args, kwargs, graph=False)
        return _block(self, inputs, args, kwargs, graph=True)

    def get_config(self):
        config = super().get_config()
        config["prefetch"] = self.prefetch
        config["action"] = str(self._action)
        return config


def _hidden_float_values(args, kwargs) -> bool:
    """Whether composite float values (ragged, sparse) are passed besides the inputs.

    Tensors passed any way are block inputs (:func:`_call_arguments`) and get
    their gradients; composite values are not, and would get none.
    """
    for t in keras.tree.flatten((list(args), kwargs)):
        if isinstance(t, tf.__internal__.CompositeTensor) and not isinstance(
            t, (tf.Variable, keras.Variable)
        ):
            dtype = getattr(t, "dtype", None)
            if dtype is not None and (dtype.is_floating or dtype.is_complex):
                return True
    return False


def _warn_not_offloaded(wrapper: Offload) -> None:
    if getattr(wrapper, "_warned_arguments", False):
        return
    wrapper._warned_arguments = True
    wrapper.fallbacks.append("composite float values (ragged or sparse) passed besides the inputs")
    warnings.warn(
        f"kswap does not offload layer {wrapper.layer.name!r} "
        f"({type(wrapper.layer).__name__}): it is called with ragged or sparse float "
        "values besides its first argument, which must get gradients too. TensorFlow "
        "differentiates it as without kswap (same gradients; its activations stay on "
        "the device).",
        stacklevel=2,
    )


def _warn_eager() -> None:
    global _warned_eager
    if not _warned_eager:
        _warned_eager = True
        warnings.warn(
            "kswap offloading runs eagerly (run_eagerly=True or a loop without "
            "tf.function): copies to and from the host are synchronous and layers "
            "are recomputed in backward. Train inside tf.function (the default of "
            "model.fit) for overlapped transfers.",
            stacklevel=3,
        )


def _call_arguments(inputs, args, kwargs):
    """The tensors of a call, and how to call the layer with others in their place.

    Every tensor the layer is called with is a block input, wherever it is
    passed (``MultiHeadAttention()(q, v)``, DeBERTa's ``rel_embeddings=``),
    so each gets its gradient. In the first argument anything with a dtype
    (numpy arrays) is converted, as Keras does; elsewhere only tensors are, so
    that Python and numpy values stay what the layer expects.

    Returns:
        ``(tensors, call)``: ``call(ts)`` calls the layer with ``ts`` in the
        place of ``tensors``.
    """
    structure = (inputs, list(args), dict(kwargs))
    flat = list(keras.tree.flatten(structure))
    first = len(keras.tree.flatten(inputs))
    is_tensor = [
        isinstance(t, tf.Tensor)
        or (i < first and (isinstance(t, tf.Variable) or hasattr(t, "dtype")))
        for i, t in enumerate(flat)
    ]
    tensors = [tf.convert_to_tensor(t) for t, ok in zip(flat, is_tensor, strict=True) if ok]

    def rebuild(ts):
        it = iter(ts)
        return keras.tree.pack_sequence_as(
            structure, [next(it) if ok else t for t, ok in zip(flat, is_tensor, strict=True)]
        )

    return tensors, rebuild


def _block(wrapper: Offload, inputs, args, kwargs, graph: bool):
    tensors, rebuild = _call_arguments(inputs, args, kwargs)
    state = graph_state() if graph else None
    index = state.register_block() if graph else -1
    lstate = recompute.layer_state(wrapper.layer)

    def call(ts):
        inputs_, args_, kwargs_ = rebuild(ts)
        return wrapper.layer(inputs_, *args_, **kwargs_)

    structure = {}

    @tf.custom_gradient
    def block(*args):
        *xs, uses = args  # ``uses``: more inputs, filled in below (see _per_use_inputs)
        xs = tuple(xs)
        seeds_before = lstate.seed_values()
        planned_recompute = wrapper.action.kind == "recompute"  # the forward runs again
        if graph and not planned_recompute:
            with record.VariableWatcher() as watcher:
                outputs, ops, scopes = replay.record_ops(lambda: call(xs))
            state.gate_forward(ops)
        else:
            outputs, ops, scopes = call(xs), [], {}
        structure["outputs"] = outputs
        flat_out = [tf.convert_to_tensor(o) for o in keras.tree.flatten(outputs)]
        if planned_recompute:
            host = wrapper.action.checkpoint == "host"
            return flat_out, _recompute_grad(wrapper, state, index, xs, call, seeds_before, host)
        plan = replay.plan_replay(ops, xs, flat_out, watcher.watched_variables()) if graph else None
        if plan is not None and plan.replayable:
            specials = _offload_reads(state, plan, xs)
            slots = structure["slots"] = _per_use_inputs(plan, xs, uses)
            structure["uses"] = uses
            grad = _replay_grad(wrapper, state, index, plan, xs, flat_out, scopes, specials, slots)
        else:
            if plan is not None:
                _fall_back(wrapper, plan.reason)
            grad = _recompute_grad(wrapper, state, index, xs, call, seeds_before)
        return flat_out, grad

    uses: list = []
    out = keras.tree.flatten(block(*tensors, uses))
    if "slots" in structure:  # the list the block got is a copy of ``uses``
        structure["slots"].recorded = _recorded(out, len(tensors), structure["uses"])
    for new, inner in zip(out, keras.tree.flatten(structure["outputs"]), strict=True):
        _keep_keras_attributes(new, inner)
    return keras.tree.pack_sequence_as(structure["outputs"], out)


def _fall_back(wrapper: Offload, reason: str) -> None:
    """Records that a layer is recomputed, and warns the first time for that layer."""
    if reason in wrapper.fallbacks:
        return
    wrapper.fallbacks.append(reason)
    if len(wrapper.fallbacks) > 1:  # warned already (another trace of the same layer)
        return
    warnings.warn(
        f"kswap cannot replay the backward of layer {wrapper.layer.name!r} "
        f"({type(wrapper.layer).__name__}): {reason}. It is recomputed in backward "
        "instead: the gradients are the same, but its forward runs twice per step "
        "(more time), and its working set is on the device during its backward. "
        "`layer.fallbacks` lists the reasons.",
        stacklevel=2,
    )


def _keep_keras_attributes(new, inner) -> None:
    """Carries Keras's tensor annotations over to the block's outputs.

    ``_keras_logits`` (set by softmax and sigmoid) lets the loss start from the
    logits, as it does without kswap; that part of the graph is then
    differentiated by TensorFlow directly. ``_keras_mask`` carries masks.
    """
    for name in ("_keras_logits", "_keras_mask"):
        value = getattr(inner, name, None)
        if value is not None:
            try:
                setattr(new, name, value)
            except AttributeError:
                pass


def _offload_reads(state: GraphState, plan: replay.ReplayPlan, xs) -> tuple[dict, dict, dict]:
    """Sends to host what the block's backward will read.

    Returns:
        The plans of its ``tf.function`` calls, of its custom gradients and
        of its loops.
    """
    calls = {op: calls_lib.prepare_call(op) for op in plan.ops if calls_lib.replayable_call(op)}
    loops = {  # a loop's per-step values get host copies when its backward is built
        op: loops_lib.prepare_loop(op, state, _worth_offloading)
        for op in plan.ops
        if loops_lib.replayable_loop(op)
    }
    custom = {op: custom_lib.custom_gradient_of(op) for op in plan.ops}
    custom = {op: spec for op, spec in custom.items() if spec is not None}
    for spec in custom.values():  # what the user's gradient function holds
        for t in spec.reads:
            if _worth_offloading(t):
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
            if _worth_offloading(t):
                state.offload(t)
        # the gradient may read the shapes of the others
        others += [t for i, t in enumerate(op.inputs) if i not in ins]
        others += [t for i, t in enumerate(op.outputs) if i not in outs]
    for t in others:  # once every host copy exists: a shape is taken from one if it can
        if not t.shape.is_fully_defined() and _worth_offloading(t):
            state.remember_shape(t)
    return calls, custom, loops


def _unique(xs) -> list[bool]:
    seen, first = set(), []
    for x in xs:
        first.append(x.ref() not in seen)
        seen.add(x.ref())
    return first


class _Slots:
    """How many more times each block input is passed, one per further use.

    TensorFlow's tape sums all the gradients of a tensor in one ``AddN``, in
    the order they arrive. A block input that several of the block's ops read
    (BatchNormalization reads its input three times) gets one gradient per
    use. Summed inside the block and then once more with the input's
    gradients from outside it, they round differently from the plain model's
    one sum: in ResNet V2, the residual's gradient and the next
    BatchNormalization's three. So the block takes the input once more per
    further use, and its backward returns one gradient per use, for the tape
    to sum with the others.

    Attributes:
        extra: Per block input, how many more times it is passed.
        recorded: Whether ``tf.custom_gradient`` took the further inputs (it
            flattens its arguments after the forward ran); if not, the
            backward sums each input's gradients itself.
    """

    def __init__(self, extra: list[int]):
        self.extra = extra
        self.recorded = False


def _per_use_inputs(plan: replay.ReplayPlan, xs, uses: list) -> _Slots:
    """Appends to ``uses`` each of ``xs`` once per further use in the block's backward."""
    extra = []
    for x, first, n in zip(xs, _unique(xs), replay.source_uses(plan.ops, xs), strict=True):
        extra.append(max(n - 1, 0) if first else 0)
        uses.extend([x] * extra[-1])
    return _Slots(extra)


def _recorded(out: list, n_inputs: int, uses: list) -> bool:
    """Whether the op ``tf.custom_gradient`` recorded takes ``uses`` after the block's inputs."""
    if not uses or not out or out[0].op.type != "IdentityN":
        return False
    start = len(out) + n_inputs
    taken = list(out[0].op.inputs)[start : start + len(uses)]
    return [t.name for t in taken] == [t.name for t in uses]


def _split_uses(slots: _Slots, xs, per_use: list) -> tuple[list, list]:
    """Each input's first gradient at its place, its others in its further slots."""
    places, further = [], []
    for grads, first, k in zip(per_use, _unique(xs), slots.extra, strict=True):
        if not first:
            places.append(None)  # a tensor passed twice gets its gradients at its first place
            continue
        if len(grads) > k + 1:  # more than source_uses counted: sum the rest
            grads = grads[:k] + [replay.aggregate(grads[k:])]
        grads = grads + [None] * (k + 1 - len(grads))
        places.append(grads[0])
        further += grads[1:]
    return places, further


def _replay_grad(
    wrapper, state: GraphState, index: int, plan, xs, flat_out, scopes, specials, slots: _Slots
):
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
            if _worth_offloading(t):
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
            source_grads, further = _split_uses(slots, xs, source_grads)
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
    source_grads = [
        g if first else None for g, first in zip(source_grads, _unique(xs), strict=True)
    ]
    if variables:
        return source_grads, var_grads
    return source_grads


def _recompute_grad(wrapper, state, index, xs, call, seeds_before, host: bool = True):
    """The backward of a block re-run from its inputs, in host memory if ``host``."""
    offloaded = [host and _worth_offloading(x) for x in xs]
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
