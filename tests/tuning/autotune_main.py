"""AutoTune's closed loop in a fresh process (``python -m tests.tuning.autotune_main``).

Trains ``tests.tuning.test_autotune``'s MLP plain and offloaded with
``kswap.AutoTune(0.85)`` from the same seed and prints, as JSON on its last
line, what the loop did and whether losses and weights are bit-identical.
"""

import json

import keras
import numpy as np

import kswap
from kswap.tuning import AutoTune, current_actions
from tests.tuning.test_autotune import BATCH, _data, _model


def main() -> None:
    x, y = _data()
    ref = _model()
    keras.utils.set_random_seed(1)
    h_ref = ref.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0).history["loss"]
    off = kswap.OffloadingModel(_model())
    tune = AutoTune(0.85, profile_steps=1, max_rounds=2, verbose=0, link="pcie4")
    keras.utils.set_random_seed(1)
    h_off = off.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0, callbacks=[tune])
    planned = dict(zip(tune.plan.blocks, tune.plan.actions, strict=True)) if tune.plan else None
    result = {
        "rounds": len(tune.rounds),
        "start_peak_bytes": tune.start_peak_bytes or 0,
        "first_measured": bool(tune.rounds) and tune.rounds[0].measured_peak_bytes is not None,
        "actions_are_the_plan": planned is not None and current_actions(off) == planned,
        "restored": tune.restored,
        "losses_identical": h_off.history["loss"] == h_ref,
        "weights_identical": all(
            np.array_equal(a.numpy(), b.numpy())
            for a, b in zip(ref.weights, off.weights, strict=True)
        ),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
