"""Keeps a model's training state exactly as it was around kswap's own steps."""

from __future__ import annotations

import contextlib

__all__ = ["model_variables", "preserved_state"]


def model_variables(model) -> list:
    """The variables of ``model``, its metrics and its optimizer, each once."""
    seen, out = set(), []
    groups = [model.variables, getattr(model, "metrics_variables", [])]
    if model.optimizer is not None:
        groups.append(model.optimizer.variables)
    for group in groups:
        for v in group:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


@contextlib.contextmanager
def preserved_state(model, sample_batch):
    """Restores weights, optimizer state, metrics and RNG states on exit.

    The model (and its optimizer) are built first if needed, so that every
    variable training could touch exists before the snapshot.
    """
    # a model built under tf.distribute makes its variables in its strategy's scope
    strategy = getattr(model, "distribute_strategy", None)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        if not model.built:
            model(sample_batch[0])
        optimizer = model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(model.trainable_variables)
    variables = model_variables(model)
    values = [v.numpy() for v in variables]
    try:
        yield
    finally:
        for v, value in zip(variables, values, strict=True):
            v.assign(value)
