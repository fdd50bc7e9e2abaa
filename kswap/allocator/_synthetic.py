"""Synthetic packing instances for tests and benchmarks.

Two families:

* :func:`random_instance`: allocations at uniformly random times with
  log-uniform sizes and lifetimes (about 20 buffers alive at any time);
* :func:`training_step_instance`: the buffers of one training step of a deep
  network - weights and optimizer slots alive throughout, each layer's forward
  activation kept until its mirrored backward op, input and weight gradients,
  and short-lived temporaries - the LIFO-like pattern of real traces.

Both return ``(sizes, starts, ends)`` int64 arrays (bytes, integer ticks,
half-open lifetimes).

Example:
    >>> sizes, starts, ends = random_instance(100, seed=0)
    >>> len(sizes), bool((ends > starts).all())
    (100, True)
"""

from __future__ import annotations

import numpy as np

__all__ = ["random_instance", "training_step_instance"]

_KIB = 1024
_MIB = 1024 * 1024


def _log_uniform(rng: np.random.Generator, low: float, high: float, n: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(low), np.log(high), n))


def random_instance(
    n: int, *, seed: int = 0, max_lifetime: int = 100
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random buffers: ``n`` allocations over ``n`` ticks.

    Args:
        n: Number of buffers.
        seed: Seed of the random generator.
        max_lifetime: Lifetimes are log-uniform in ``[1, max_lifetime]`` ticks.

    Returns:
        ``(sizes, starts, ends)``: sizes log-uniform in 256 B - 16 MiB.
    """
    rng = np.random.default_rng(seed)
    sizes = _log_uniform(rng, 256, 16 * _MIB, n).astype(np.int64)
    starts = rng.integers(0, max(n, 1), n, dtype=np.int64)
    lifetimes = np.floor(_log_uniform(rng, 1, max_lifetime + 1, n)).astype(np.int64)
    return sizes, starts, starts + np.maximum(lifetimes, 1)


def training_step_instance(n: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Buffers of one training step of a ``~n / 6.5``-layer network.

    Time advances one tick per op. Forward op ``i`` allocates activation
    ``a_i`` (freed after backward op ``i``) and up to three temporaries that
    live one to three ticks. Backward op ``i`` allocates the input gradient
    (freed after backward op ``i - 1``), the weight gradient (freed at the
    optimizer update, a few ticks later) and up to four temporaries. Weights
    and optimizer slots (``~n / 50`` buffers) live through the whole step.

    Args:
        n: Approximate number of buffers (at least 1).
        seed: Seed of the random generator.

    Returns:
        ``(sizes, starts, ends)`` of about ``n`` buffers.
    """
    rng = np.random.default_rng(seed)
    n_weights = max(1, n // 50)
    n_layers = max(1, round((n - n_weights) / 6.5))
    width = _log_uniform(rng, 32 * _KIB, 4 * _MIB, n_layers)
    act = (width * rng.integers(1, 3, n_layers)).astype(np.int64)
    sizes: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []

    def add(size, start, end) -> None:
        sizes.append(np.asarray(size, np.int64).ravel())
        starts.append(np.asarray(start, np.int64).ravel())
        ends.append(np.asarray(end, np.int64).ravel())

    # Forward: op i runs at tick 2 * i (temporaries may outlive it by 2 ticks).
    fwd_t = 2 * np.arange(n_layers, dtype=np.int64)
    horizon_mid = int(fwd_t[-1]) + 4
    # Backward: op i runs at tick bwd_t[i], in reverse layer order.
    bwd_t = horizon_mid + 2 * (n_layers - 1 - np.arange(n_layers, dtype=np.int64))
    add(act, fwd_t, bwd_t + 1)
    n_tmp = rng.integers(0, 4, n_layers)
    owner = np.repeat(np.arange(n_layers), n_tmp)
    t0 = fwd_t[owner]
    add(width[owner] * rng.uniform(0.25, 2.0, owner.size), t0, t0 + rng.integers(1, 4, owner.size))
    # Input gradient of layer i lives until backward op i - 1 has used it.
    prev = np.where(np.arange(n_layers) > 0, np.arange(n_layers) - 1, 0)
    add(act[prev], bwd_t, np.maximum(bwd_t[prev], bwd_t) + 2)
    step_end = int(bwd_t[0]) + 8
    add(_log_uniform(rng, _KIB, _MIB, n_layers), bwd_t, np.minimum(bwd_t + 6, step_end - 1))
    n_tmp = rng.integers(0, 5, n_layers)
    owner = np.repeat(np.arange(n_layers), n_tmp)
    t0 = bwd_t[owner]
    add(width[owner] * rng.uniform(0.25, 2.0, owner.size), t0, t0 + rng.integers(1, 3, owner.size))
    weights = _log_uniform(rng, 4 * _KIB, 4 * _MIB, n_weights)
    add(weights, np.zeros(n_weights), np.full(n_weights, step_end))
    return (
        np.concatenate(sizes).astype(np.int64),
        np.concatenate(starts),
        np.concatenate(ends),
    )
