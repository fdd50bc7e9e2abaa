"""Per-graph bookkeeping of offloaded blocks: host copies, swap-ins and gates.

Every offloaded block traced into one graph (one replica of one training
function) registers here in forward order. The state makes four promises:

- **once per tensor:** a tensor several blocks need (a residual branch, a
  concatenation input, a layer's output that the next layer also reads) gets
  one host copy and, in backward, one device copy shared by all of them;
- **scheduled swap-in:** a block's swap-ins wait (control dependency) for the
  upstream gradient of the block ``prefetch`` places earlier in backward order
  (in a chain, block ``i + prefetch``), so they start when that block's
  backward starts and overlap its compute, instead of all at the start of
  backward as TensorFlow's executor would run them (with ``prefetch=0`` they
  wait for the backward just before theirs to end);
- **one backward at a time:** a block's backward starts once the one built
  before it has made its input gradients (and, with ``prefetch=0``, its
  weight gradients too), so independent branches do not hold their working
  sets on the device together;
- **accounting:** tensors the backward had to read from the device (no host
  copy) are recorded, so tests and users can see what stayed.

Within one block, :func:`kswap.layers.chain.order_backward` chains the
backward's large ops in the order that keeps the fewest bytes alive.

Example:
    >>> from kswap.layers.schedule import graph_state
    >>> import tensorflow as tf
    >>> @tf.function
    ... def f(x):
    ...     state = graph_state()
    ...     return state.register_block(), state.register_block()
    >>> [int(i) for i in f(tf.constant(1.0))]
    [0, 1]
"""

from __future__ import annotations

import threading
import weakref

import tensorflow as tf

from kswap import transfer
from kswap.layers.hold import held, not_upstream_of
from kswap.layers.rewrites import chainable
from kswap.layers.shapes import FUSES_WITH_CONSUMERS, shape_chain
from kswap.layers.tensors import canonical, dense_parts, nominal_bytes

__all__ = [
    "GraphState",
    "graph_state",
    "canonical",
    "ONE_THREAD_GATES",
]

_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
#: Whether, with one inter-op thread (per replica of the step: see
#: :func:`kswap.transfer.one_thread_per_replica`), a block's forward waits for
#: the host copies made before it (:meth:`GraphState.gate_forward`) and a
#: block's swap-ins for the weight gradients of the block before
#: (:meth:`GraphState.gate`). Read when a step is traced.
ONE_THREAD_GATES = True


def _one_thread() -> bool:
    """Whether the gates for one inter-op thread apply (see :data:`ONE_THREAD_GATES`)."""
    return ONE_THREAD_GATES and transfer.one_thread_per_replica()


class GraphState:
    """Offloading state of one graph and thread (one replica's trace)."""

    def __init__(self):
        self.blocks = 0
        self.host: dict = {}  # canonical ref -> host copy
        self.device_of: dict = {}  # canonical ref -> device string of the original
        self.restored: dict = {}  # canonical ref -> device copy made in backward
        self.restore: dict = {}  # canonical ref -> how its host copy comes back, if not to_device
        self.shapes: dict = {}  # canonical ref -> its dynamic shape, taken in forward
        self.shape_sources: dict = {}  # canonical ref -> same-shaped tensor with a host copy
        self.stand_ins: dict = {}  # canonical ref -> host stand-in made in backward
        self.arrivals: dict[int, tf.Tensor] = {}  # block -> its upstream gradient
        self.finished: dict[int, tuple[list, list]] = {}  # block -> its input, weight grads
        self.backward_order: list[int] = []  # blocks in the order their backward is built
        self.kept_on_device: list[tuple[str, str]] = []  # (block, tensor) read from device
        self.largest = 0  # bytes of the largest tensor sent to host (unknown dims as 1)
        self.unwaited: list[tf.Tensor] = []  # forward host copies no forward op waits for

    def register_block(self) -> int:
        index = self.blocks
        self.blocks += 1
        return index

    def offload(self, t: tf.Tensor) -> None:
        """Gives ``t`` a host copy unless it has one already."""
        c = canonical(t)
        if c.ref() not in self.host:
            self.host[c.ref()] = transfer.to_host(c)
            self.largest = max(self.largest, nominal_bytes(c))
            self.device_of[c.ref()] = c.device
            self.unwaited.append(self.host[c.ref()])

    def gate_forward(self, ops: list[tf.Operation]) -> bool:
        """With one inter-op thread, makes a block's forward wait for earlier host copies.

        TensorFlow's executor with one inter-op thread runs the forward chain
        inline and queues each copy to the host behind it, so without this
        the copies run after the whole forward, with every activation still
        on the device. The block's variable reads (``ops``' ``ReadVariableOp``
        s, which no fusion takes in) wait for the copies made before it, as
        vDNN waits for a layer's offload before the next layer's forward; a
        block without variables leaves them to the next one that has some.
        With more threads the copies run beside the forward and nothing waits.

        Returns:
            Whether control edges were added.
        """
        if not (self.unwaited and _one_thread()):
            return False
        reads = [op for op in ops if op.type == "ReadVariableOp"]
        if not reads:
            return False
        for op in reads:
            for h in self.unwaited:
                op._add_control_input(h.op)
        self.unwaited = []
        return True

    def add_host_copy(self, t: tf.Tensor, host: tf.Tensor, restore=None) -> None:
        """Registers ``host``, made elsewhere, as ``t``'s host copy (unless it has one).

        For values :func:`kswap.transfer.to_host` cannot copy: a loop's
        ``TensorList`` accumulators, whose host copy is their stacked elements
        (:func:`kswap.transfer.list_to_host`). ``restore(host, device)`` makes
        the device copy :meth:`swap_in` returns (:func:`kswap.transfer.to_device`
        if None).
        """
        c = canonical(t)
        if c.ref() not in self.host:
            self.host[c.ref()] = host
            self.largest = max(self.largest, nominal_bytes(host))
            self.device_of[c.ref()] = c.device
            if restore is not None:
                self.restore[c.ref()] = restore

    def remember_shape(self, t: tf.Tensor) -> None:
        """Takes ``t``'s dynamic shape in forward, for :meth:`stand_in`.

        The shape is read from the host copy of ``t`` or of one of the
        producers :func:`shape_chain` walks through, if one has a copy (taken
        in backward, no device tensor reads it), else from
        :func:`shape_source` itself in forward. Either way no elementwise
        intermediate gets an extra reader: Grappler rewrites a chain like
        ``c * (x * x ** 2)`` into ``(c * x) * x ** 2`` only where nothing else
        reads the inner product, as in the graph without kswap, where the
        gradients' ``Shape`` ops are folded away; and a copied block output
        ``sigmoid(x @ w + b)`` lends its shape to the next block's backward
        without a reader of ``x @ w``, which the remapper (with oneDNN) fuses
        with the bias and the activation only where nothing else reads it.
        Where the chain starts at such a fusion (``x @ w + b``), the shape is
        read from ``t`` itself, which the block asking for it reads anyway (a
        padding's or a sum's input), rather than from an intermediate the
        fusion would absorb.
        """
        c = canonical(t)
        if self.has_shape(c):
            return
        chain = shape_chain(c)  # canonical tensors: c and the producers it walks to
        for member in chain:
            if member.ref() in self.host and member.ref() not in self.restore:
                self.shape_sources[c.ref()] = member  # its shape is read from the host copy
                return
        source = chain[-1]
        if any(canonical(x).op.type in FUSES_WITH_CONSUMERS for x in source.op.inputs):
            source = c
        if source.ref() not in self.shapes:
            self.shapes[source.ref()] = tf.shape(source)
        self.shapes[c.ref()] = self.shapes[source.ref()]

    def has_shape(self, t: tf.Tensor) -> bool:
        key = canonical(t).ref()
        return key in self.shapes or key in self.shape_sources

    def _shape(self, key) -> tf.Tensor:
        if key in self.shapes:
            return self.shapes[key]
        return transfer.host_shape(self.host[self.shape_sources[key].ref()])

    def stand_in(self, t: tf.Tensor, gate: list) -> tf.Tensor:
        """A tensor shaped like ``t`` that holds no device memory, made after ``gate``.

        For gradients that read only the shape of a tensor whose shape is
        not static: they get this instead of ``t``, which may then be freed
        in forward.
        """
        c = canonical(t)
        key = c.ref()
        if key not in self.stand_ins:
            with tf.control_dependencies(gate):
                stand_in = transfer.host_stand_in(self._shape(key), c.dtype)
            stand_in.set_shape(c.shape)
            self.stand_ins[key] = stand_in
        return self.stand_ins[key]

    def has_host_copy(self, t: tf.Tensor) -> bool:
        return canonical(t).ref() in self.host

    def arrive(self, index: int, upstream: list, prefetch: int) -> list:
        """Records that block ``index``'s backward begins with ``upstream``.

        Returns:
            ``upstream``, held until the backward built just before this one
            has made its input gradients (``prefetch >= 1``) or all its
            gradients, weights included but for products and sums
            (``prefetch == 0``; see :meth:`finish`). Blocks'
            backwards thus run one at a time, in the order they are built,
            so two independent branches (a residual block's shortcut and main
            path) do not hold their working sets on the device together; with
            ``prefetch >= 1`` weight gradients still overlap the next block.
        """
        if index not in self.backward_order:
            self.backward_order.append(index)
        pos = self.backward_order.index(index)
        if pos:
            inputs, weights = self.finished.get(self.backward_order[pos - 1], ([], []))
            before = inputs + weights if prefetch == 0 else inputs
            # what ``upstream`` is computed from needs no control edge (Grappler
            # reassociates no product whose nodes have one)
            before = not_upstream_of(before, dense_parts(upstream))
            if before:
                with tf.control_dependencies(before):
                    upstream = [held(g) for g in upstream]
        present = dense_parts(upstream)
        if present and index not in self.arrivals:
            self.arrivals[index] = present[0]
        return upstream

    def finish(self, index: int, input_grads: list, weight_grads: list) -> None:
        """Records the gradients block ``index``'s backward made (its end).

        Gradients may be dense, ``tf.IndexedSlices`` (an embedding's) or None.
        """
        # later swap-ins wait for the weight gradients (:meth:`gate`): only those a
        # control edge out of leaves as Grappler rewrites them (kernel gradients; not
        # a BatchNormalization scale's, a product rounded otherwise with one)
        weights = [g for g in dense_parts(weight_grads) if chainable(g.op, arithmetic=False)]
        self.finished[index] = (dense_parts(input_grads), weights)

    def gate(self, index: int, prefetch: int) -> list[tf.Tensor]:
        """What block ``index``'s swap-ins wait for.

        Blocks are counted in the order their backward is built, which is the
        reverse of the forward for a chain and follows the gradient through
        branches. With ``prefetch >= 1`` the swap-ins wait for the start of
        the backward ``prefetch`` blocks earlier. With ``prefetch == 0`` they
        wait for the block's own upstream gradient and for the end of the
        backward just before it (every gradient it makes, weights included but
        for products and sums, see :meth:`finish`):
        nothing brought back then shares the device with another block's
        backward.
        """
        pos = self.backward_order.index(index)
        own = self.arrivals.get(index)
        if prefetch >= 1:
            ahead = (
                self.arrivals.get(self.backward_order[pos - prefetch]) if pos >= prefetch else None
            )
            deps = [t for t in (ahead if ahead is not None else own,) if t is not None]
            if pos >= 1 and _one_thread():
                # one inter-op thread: the executor runs the block before's weight
                # gradients (which read its swapped-in tensors) only when the chain of
                # input gradients has nothing ready, at the end of backward, unless
                # these swap-ins wait for them (the gradients' own inputs are left as
                # they are: an identity holding one changes the order of an AddN)
                deps += self.finished.get(self.backward_order[pos - 1], ([], []))[1]
            return deps
        deps = [own] if own is not None else []
        if pos >= 1:
            inputs, weights = self.finished.get(self.backward_order[pos - 1], ([], []))
            deps += inputs + weights
        return deps

    def swap_in(self, t: tf.Tensor, gate: list) -> tf.Tensor:
        """The device copy of an offloaded tensor, made once, after ``gate``."""
        c = canonical(t)
        key = c.ref()
        if key not in self.restored:
            restore = self.restore.get(key, transfer.to_device)
            # named after the tensor it copies: Grappler sorts the inputs of a
            # product by name before it reassociates it (``(dy * x) / 6`` becomes
            # ``(first / 6) * second``), so the copy must sort where ``t`` does;
            # then the backward that reads it (``gradient_tape/<layer>/...``),
            # which traces attribute it to
            graph = tf.compat.v1.get_default_graph()
            reader = graph.get_name_scope()
            scope = f"{c.op.name}/{reader}/" if reader else f"{c.op.name}/"
            with graph.name_scope(scope), tf.control_dependencies(gate):
                self.restored[key] = restore(self.host[key], self.device_of[key] or None)
        return self.restored[key]


def graph_state() -> GraphState:
    """The state of the graph being built, for the calling thread."""
    graph = tf.compat.v1.get_default_graph()
    with _LOCK:
        per_thread = _STATES.setdefault(graph, {})
        return per_thread.setdefault(threading.get_ident(), GraphState())
