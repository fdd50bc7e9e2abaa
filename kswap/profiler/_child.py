"""Entry point of ``kswap.measure(..., isolate=True)``'s fresh process."""

from __future__ import annotations

import json
import pickle
import sys


def main(argv: list[str]) -> None:
    model_path, data_path, steps, out_path, optimizer_state = argv
    import keras
    import tensorflow as tf

    import kswap  # noqa: F401  (selects the CPU BFC allocator before TF starts)
    from kswap.optimizer_state import place_optimizer_state
    from kswap.profiler.measure import measure_batches
    from kswap.profiler.profile import _check_allocator

    model = keras.models.load_model(model_path)
    if model.optimizer is not None:
        place_optimizer_state(model.optimizer, optimizer_state, model.trainable_variables)
    with open(data_path, "rb") as f:
        batches = pickle.load(f)
    to_tensor = lambda a: None if a is None else tf.convert_to_tensor(a)  # noqa: E731
    batches = [keras.tree.map_structure(to_tensor, b) for b in batches]
    _check_allocator()
    result = measure_batches(model, batches, int(steps))
    with open(out_path, "w") as f:
        json.dump(result.to_dict(), f)


if __name__ == "__main__":
    main(sys.argv[1:])
