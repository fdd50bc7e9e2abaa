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

import tensorflow as tf

__all__ = [
    "HOST_SCOPE",
    "DEVICE_SCOPE",
    "has_gpu",
    "device_name",
    "to_host",
    "to_device",
    "host_stand_in",
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
