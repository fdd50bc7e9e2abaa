"""Device placement and transfers between the device and host tiers.

This is the one module of kswap that decides where a tensor lives. On a GPU,
:func:`to_host` copies a tensor to host memory (inside ``tf.function`` through
TensorFlow's pinned host pool) and :func:`to_device` copies it back. On a
machine without a GPU both tiers are emulated on ``CPU:0``: the copies are real
copies (``DeepCopy``) so the allocator sees a new buffer, and host copies are
made under the reserved name scope :data:`HOST_SCOPE`, which is how the
profiler tells host bytes from device bytes there.

Example:
    >>> import tensorflow as tf
    >>> from kswap import transfer
    >>> x = tf.ones((4, 4))
    >>> on_host = transfer.to_host(x)
    >>> back = transfer.to_device(on_host)
    >>> bool(tf.reduce_all(back == x))
    True
"""

from __future__ import annotations

import contextlib
import functools
import os
import statistics
import time

import tensorflow as tf
from tensorflow.python.ops import gen_list_ops

__all__ = [
    "HOST_SCOPE",
    "DEVICE_SCOPE",
    "has_gpu",
    "device_name",
    "one_inter_op_thread",
    "inter_op_threads",
    "local_replicas",
    "one_thread_per_replica",
    "onednn_enabled",
    "to_host",
    "to_device",
    "list_to_host",
    "list_to_device",
    "host_stand_in",
    "host_shape",
    "move_variable",
    "release_variable",
    "host_update",
    "measure_link",
]

#: Name scope of every op that puts a tensor in the host tier.
HOST_SCOPE = "kswap_host_tier"
#: Name scope of every op that brings a tensor back to the device tier.
DEVICE_SCOPE = "kswap_device_tier"


@functools.cache
def has_gpu() -> bool:
    """Whether TensorFlow sees a GPU (if not, the tiers are emulated)."""
    return bool(tf.config.list_physical_devices("GPU"))


def device_name() -> str:
    """The device kswap treats as "the device": ``/GPU:0``, or ``/CPU:0`` if emulated."""
    return "/GPU:0" if has_gpu() else "/CPU:0"


def one_inter_op_thread() -> bool:
    """Whether TensorFlow was set to run ops on one inter-op thread.

    Then its executor runs a block's copy to the host only when the chain of
    forward ops it follows has nothing ready: after the whole forward, with
    every activation still on the device, unless the forward waits for the
    copies (:meth:`kswap.layers.schedule.GraphState.gate_forward` makes it).
    """
    return tf.config.threading.get_inter_op_parallelism_threads() == 1


def inter_op_threads() -> int:
    """How many inter-op threads TensorFlow runs ops on in this process.

    The number set (``tf.config.threading``), else ``TF_NUM_INTEROP_THREADS``,
    else TensorFlow's default: one per CPU core the process may run on.
    """
    threads = tf.config.threading.get_inter_op_parallelism_threads()
    if threads > 0:
        return threads
    try:
        threads = int(os.environ.get("TF_NUM_INTEROP_THREADS", "0"))
    except ValueError:
        threads = 0
    if threads > 0:
        return threads
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def local_replicas() -> int:
    """How many replicas of the step this process runs (1 without a strategy).

    Under ``tf.distribute.MirroredStrategy`` every local device runs its
    replica of the step on the same inter-op threads.
    """
    if not tf.distribute.has_strategy():
        return 1
    try:
        return max(len(tf.distribute.get_strategy().extended.worker_devices), 1)
    except (AttributeError, NotImplementedError, RuntimeError, ValueError):
        return max(tf.distribute.get_strategy().num_replicas_in_sync, 1)


def one_thread_per_replica(replicas: int | None = None) -> bool:
    """Whether each replica of the step has fewer than two inter-op threads of its own.

    ``replicas`` defaults to :func:`local_replicas` (the strategy in scope).

    Then, as with :func:`one_inter_op_thread`, the threads are busy running
    the replicas' forward chains inline, and a block's copy to the host
    waits until a forward has ended: under ``MirroredStrategy`` over two
    logical CPUs on a two-core machine each replica's copies ran after its
    whole forward (the other's after the first replica's whole backward),
    with their activations still on the device.
    """
    replicas = local_replicas() if replicas is None else replicas
    return one_inter_op_thread() or inter_op_threads() < 2 * replicas


def onednn_enabled() -> bool:
    """Whether TensorFlow runs oneDNN's CPU kernels and fusions in this process.

    TensorFlow turns them on by itself on x86 CPUs with AVX512_VNNI,
    AVX512_BF16 or AMX (``TF_ENABLE_ONEDNN_OPTS=0`` turns them off); with
    them, Grappler's remapper fuses more patterns (``MatMul`` with ``BiasAdd``
    and exact GELU, for one), which round differently from the ops they
    replace, and a ``MaxPool`` is paired with its gradient
    (:func:`kswap.layers.saved.outputs_read_in_place`).
    """
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def to_host(x: tf.Tensor) -> tf.Tensor:
    """Copies ``x`` to the host tier and returns the host copy."""
    with tf.name_scope(HOST_SCOPE):
        if has_gpu():
            with tf.device("/CPU:0"):
                return tf.identity(x)
        return tf.raw_ops.DeepCopy(x=x)


def to_device(x: tf.Tensor, device: str | None = None) -> tf.Tensor:
    """Copies ``x`` back to the device tier.

    Args:
        x: A tensor in the host tier.
        device: Target device; the first GPU (or ``/CPU:0`` when emulated) if
            None.
    """
    with tf.name_scope(DEVICE_SCOPE):
        if has_gpu():
            with tf.device(device or device_name()):
                return tf.identity(x)
        return tf.raw_ops.DeepCopy(x=x)


def list_to_host(handle: tf.Tensor, element_shape: tf.Tensor, element_dtype: tf.DType) -> tf.Tensor:
    """The elements of the ``TensorList`` ``handle``, stacked into one host-tier tensor.

    The stack is the copy: on a GPU it runs on the host (TensorFlow copies
    the list's elements there); when the tiers are emulated it runs on
    ``CPU:0`` under :data:`HOST_SCOPE`, so its buffer counts as host bytes.
    Unlike :func:`to_host` the op is stateless, so it runs as soon as the list
    exists even when it is made after ops that run later (TensorFlow chains
    stateful ops without resource inputs in the order they are made).
    """
    on_host = tf.device("/CPU:0") if has_gpu() else contextlib.nullcontext()
    with tf.name_scope(HOST_SCOPE), on_host:
        return gen_list_ops.tensor_list_stack(
            handle, element_shape=element_shape, element_dtype=element_dtype
        )


def list_to_device(x: tf.Tensor, element_shape: tf.Tensor, device: str | None = None) -> tf.Tensor:
    """A ``TensorList`` in the device tier whose elements are the rows of host-tier ``x``.

    ``TensorListFromTensor`` copies every row into a buffer of its own, so the
    list's elements are the copy: on a GPU the list is built on the host and
    TensorFlow copies its elements to ``device``; when the tiers are emulated
    it is built on ``CPU:0`` under :data:`DEVICE_SCOPE`. No dense device copy
    of ``x`` is made.
    """
    with tf.name_scope(DEVICE_SCOPE):
        if has_gpu():
            with tf.device("/CPU:0"):
                on_host = gen_list_ops.tensor_list_from_tensor(x, element_shape)
            with tf.device(device or device_name()):
                return tf.identity(on_host)
        return gen_list_ops.tensor_list_from_tensor(x, element_shape)


def host_stand_in(shape: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """An uninitialized host-tier tensor of ``shape`` and ``dtype``.

    It stands in for a device tensor of which only the shape is read (a
    gradient that calls ``tf.shape`` on a tensor with an unknown dimension),
    so that the device tensor need not stay alive for it. Its memory is never
    written, so the operating system does not back it with pages.
    """
    on_host = tf.device("/CPU:0") if has_gpu() else contextlib.nullcontext()
    with tf.name_scope(HOST_SCOPE), on_host:
        return tf.raw_ops.Empty(shape=shape, dtype=dtype, init=False)


def host_shape(x: tf.Tensor) -> tf.Tensor:
    """The dynamic shape of host-tier ``x``, read on the host (no copy of ``x`` is made)."""
    on_host = tf.device("/CPU:0") if has_gpu() else contextlib.nullcontext()
    with tf.name_scope(HOST_SCOPE), on_host:
        return tf.shape(x)


def move_variable(variable: tf.Variable, tier: str) -> tf.Variable:
    """A new variable in ``tier`` (``"host"`` or ``"device"``) holding ``variable``'s value.

    It keeps the name, dtype, trainability, aggregation and synchronization.
    On a GPU the host tier is ``/CPU:0``: TensorFlow then runs the ops that
    assign to the variable there and copies what device ops read of it. When
    the tiers are emulated both live on ``CPU:0`` and the value is copied.
    """
    if tier not in ("host", "device"):
        raise ValueError(f"`tier` must be 'host' or 'device'. Received: tier={tier!r}")
    on = tf.device("/CPU:0" if tier == "host" else device_name())
    with tf.init_scope(), on if has_gpu() else contextlib.nullcontext():
        value = (to_host if tier == "host" else to_device)(variable)
        return tf.Variable(
            value,
            dtype=variable.dtype,
            trainable=variable.trainable,
            name=variable.name.split(":")[0],
            aggregation=variable.aggregation,
            synchronization=variable.synchronization,
        )


def release_variable(variable: tf.Variable) -> None:
    """Frees ``variable``'s buffer now, even where traced functions still hold its handle.

    A function traced before a variable moved (:func:`move_variable`)
    captures the old variable's handle, and TensorFlow keeps the buffer as
    long as any handle lives: without this, a model's old optimizer slots
    stay on the device after they move to the host. The variable cannot be
    read afterwards; functions that captured it must be traced again.
    """
    # Variables hold their resource by a counted handle, which destroying does
    # not free: give it an empty value in place of its buffer instead.
    with tf.init_scope():
        empty = tf.zeros([0], variable.dtype)
        tf.raw_ops.AssignVariableOp(resource=variable.handle, value=empty, validate_shape=False)


@contextlib.contextmanager
def host_update():
    """Scope of the ops that update a host-tier variable in place.

    On a GPU, TensorFlow places them with the variable (on the host); when the
    tiers are emulated, the scope is what marks the buffers they allocate
    (copy-on-write) as host bytes.
    """
    with tf.name_scope(HOST_SCOPE):
        yield


def _timed_copies(direction: str, nbytes: int, repeats: int, round_trips: int = 0) -> float:
    """Median seconds of a ``tf.function`` copying ``nbytes`` in ``direction`` once.

    The copy is the one kswap's blocks make (:func:`to_host`, :func:`to_device`);
    with ``round_trips``, the copy then goes that many times there and back,
    each copy waiting for the one before. The function returns one element,
    read back to wait for it.
    """
    n = max(nbytes // 4, 1)
    source = "/CPU:0" if direction == "h2d" and has_gpu() else device_name()
    with tf.device(source):
        x = tf.random.uniform((n,), dtype=tf.float32)
    first, second = (to_device, to_host) if direction == "h2d" else (to_host, to_device)

    @tf.function
    def run(t):
        t = first(t)
        for _ in range(round_trips):
            t = first(second(t))
        return t[:1]

    run(x).numpy()  # trace and warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(x).numpy()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_link(nbytes: int = 64 * 2**20, *, repeats: int = 5, small_bytes: int = 2**16):
    """The link between the tiers, measured: a :class:`kswap.planning.Link` named ``"measured"``.

    Times kswap's own copies inside a ``tf.function`` each way: on a GPU the
    device-to-host copy into TensorFlow's pinned host pool and back; on a
    machine without one the emulated copy (``DeepCopy`` on ``CPU:0``). Two
    sizes give the bandwidth, so the function call's cost cancels out:
    ``bandwidth = (nbytes - small_bytes) / (t(nbytes) - t(small_bytes))``.
    The latency is a copy's fixed cost inside the graph: the time 16 round
    trips of the small tensor add to one copy, per copy, less the bytes'
    own time.

    Args:
        nbytes: Bytes of the large copy (> ``small_bytes``).
        repeats: Copies timed per size and direction (median).
        small_bytes: Bytes of the small copy.

    Example:
        >>> from kswap import transfer
        >>> link = transfer.measure_link(8 * 2**20, repeats=3)
        >>> link.name, link.h2d_bytes_per_s > 0
        ('measured', True)
    """
    from kswap.planning import Link

    for name, value in (("nbytes", nbytes), ("small_bytes", small_bytes), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be an integer >= 1. Received: {name}={value!r}")
    if nbytes <= small_bytes:
        raise ValueError(
            f"`nbytes` must be more than `small_bytes` ({small_bytes}). Received: nbytes={nbytes}"
        )
    rates = {}
    for direction in ("d2h", "h2d"):
        small = _timed_copies(direction, small_bytes, repeats)
        large = _timed_copies(direction, nbytes, repeats)
        # a large copy faster than a small one: timer noise; its own rate is the best guess
        rates[direction] = (
            (nbytes - small_bytes) / (large - small) if large > small else nbytes / large
        )
    trips = 16
    chained = _timed_copies("d2h", small_bytes, repeats, trips)
    single = _timed_copies("d2h", small_bytes, repeats)
    per_copy = max(chained - single, 0.0) / (2 * trips)
    transfer_s = small_bytes / 2 * (1 / rates["h2d"] + 1 / rates["d2h"])
    return Link(rates["h2d"], rates["d2h"], max(per_copy - transfer_s, 0.0), "measured")
