"""Static estimates: a training step's workload from a Keras model's shapes, and its plan.

Nothing runs: the model's forward pass is traced at the batch size, and the
bytes come from the shapes and dtypes, the times from FLOPs on a device
preset. ``kswap.planning`` plans the result; :func:`plan` does both.

Example:
    >>> import keras, kswap
    >>> model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, name="a"),
    ...                           keras.layers.ReLU(name="relu"), keras.layers.Dense(10, name="b")])
    >>> model.compile("adam", "mse")
    >>> plan = kswap.plan(model, batch_size=64, budget=0.9, device="k40")
    >>> plan.fits, plan.budget_bytes <= 0.9 * plan.baseline_peak_bytes
    (True, True)
"""

from kswap._env import require_tensorflow

require_tensorflow("kswap.estimate")

from kswap.estimate.plan import plan  # noqa: E402
from kswap.estimate.workload import estimate_workload  # noqa: E402

__all__ = ["estimate_workload", "plan"]
