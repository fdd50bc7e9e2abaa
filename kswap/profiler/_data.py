"""Argument checks and batching for the profiling entry points."""

from __future__ import annotations

import numbers

import keras
import numpy as np
import tensorflow as tf

__all__ = ["check_model", "check_steps", "make_batches", "static_batch"]


def check_model(model, fn: str) -> None:
    if not isinstance(model, keras.Model):
        raise ValueError(
            f"`model` must be a keras.Model. Received: model={model!r} "
            f"of type {type(model).__name__}"
        )
    if not getattr(model, "compiled", False) or model.optimizer is None:
        raise ValueError(
            f"`model` must be compiled before kswap.{fn}: call "
            "model.compile(optimizer=..., loss=...) first. "
            f"Received: an uncompiled model {model.name!r}"
        )


def check_steps(steps, name: str = "steps") -> int:
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
        raise ValueError(f"`{name}` must be an integer >= 1. Received: {name}={steps!r}")
    return int(steps)


def _samples(data, name: str) -> int:
    leaves = keras.tree.flatten(data)
    if not leaves:
        raise ValueError(f"`{name}` is empty. Received: {name}={data!r}")
    counts = set()
    for leaf in leaves:
        shape = getattr(leaf, "shape", None)
        if shape is None:
            shape = np.shape(leaf)
        if len(shape) == 0:
            raise ValueError(
                f"`{name}` must hold arrays with a batch dimension. "
                f"Received a scalar in {name}: {leaf!r}"
            )
        counts.add(int(shape[0]))
    if len(counts) > 1:
        raise ValueError(
            f"All arrays in `{name}` must have the same number of samples. "
            f"Received sample counts {sorted(counts)}"
        )
    n = counts.pop()
    if n == 0:
        raise ValueError(f"`{name}` is empty: it has 0 samples.")
    return n


def static_batch(x) -> bool:
    """Whether ``model.fit(x)`` traces its step with a known batch size.

    True for a ``tf.data.Dataset`` whose every component has a known first
    dimension (batched with ``drop_remainder=True``). False otherwise: kswap
    traces arrays as fit does when a partial batch is left over (fit knows the
    batch size only when it divides the number of samples).
    """
    if not isinstance(x, tf.data.Dataset):
        return False
    shapes = [getattr(s, "shape", None) for s in tf.nest.flatten(x.element_spec)]
    return all(s is not None and s.rank and s[0] is not None for s in shapes)


def make_batches(x, y, batch_size, count: int) -> list[tuple]:
    """Returns ``count`` ``(x, y)`` batches, cycling over the data.

    Only full batches are used, so every step has the same shapes and the
    training function is traced once. Arrays are sliced, not converted: each
    step converts its own batch, as ``fit`` does, so batches waiting for
    their step are not counted as device memory.
    """
    if isinstance(x, tf.data.Dataset):
        if y is not None:
            raise ValueError(
                "`y` must be None when `x` is a tf.data.Dataset (it yields (x, y)). "
                f"Received: y of type {type(y).__name__}"
            )
        if batch_size is not None:
            raise ValueError(
                "`batch_size` must be None when `x` is a tf.data.Dataset (it is "
                f"already batched). Received: batch_size={batch_size!r}"
            )
        elements = list(x.take(count))
        if not elements:
            raise ValueError("`x` is an empty tf.data.Dataset.")
        out = []
        for i in range(count):
            e = elements[i % len(elements)]
            out.append(tuple(e) if isinstance(e, (tuple, list)) else (e, None))
        return [(b[0], b[1] if len(b) > 1 else None) for b in out]
    if x is None:
        raise ValueError("`x` must be given. Received: x=None")
    n = _samples(x, "x")
    if y is not None:
        ny = _samples(y, "y")
        if ny != n:
            raise ValueError(
                f"`x` and `y` must have the same number of samples. Received: x has {n}, y has {ny}"
            )
    if batch_size is None:
        batch_size = min(32, n)
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise ValueError(
            f"`batch_size` must be a positive integer. Received: batch_size={batch_size!r}"
        )
    if not 1 <= batch_size <= n:
        raise ValueError(
            f"`batch_size` must be between 1 and the number of samples ({n}). "
            f"Received: batch_size={batch_size}"
        )
    full = n // batch_size

    def batch(i):
        lo = (i % full) * batch_size
        take = lambda a: a[lo : lo + batch_size]  # noqa: E731
        return keras.tree.map_structure(take, x), (
            None if y is None else keras.tree.map_structure(take, y)
        )

    return [batch(i) for i in range(count)]
