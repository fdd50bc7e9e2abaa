"""Entry point of ``kswap.measure(..., isolate=True)``'s fresh process.

``python -m kswap.profiler._child JOB.json``: the job names the saved model,
the pickled batches, the modules to import before loading (those defining
the model's custom classes), the parent's ``sys.path`` and where to write the
result: ``{"measurement": {...}}``, or ``{"error": "Type: message"}`` on one
line (exit code 1).
"""

from __future__ import annotations

import importlib
import json
import pickle
import sys


def _run(job: dict) -> dict:
    import kswap  # noqa: F401  (selects the CPU BFC allocator before TF starts)

    parent_path = list(job["sys_path"])
    sys.path[:] = parent_path + [p for p in sys.path if p not in parent_path]
    for name in job["modules"]:
        importlib.import_module(name)  # registers the model's custom classes

    import keras

    from kswap.optimizer_state import place_optimizer_state
    from kswap.profiler.measure import _Progress, measure_batches
    from kswap.profiler.profile import _check_allocator

    model = keras.models.load_model(job["model"])
    if model.optimizer is not None:
        place_optimizer_state(model.optimizer, job["optimizer_state"], model.trainable_variables)
    with open(job["batches"], "rb") as f:
        batches = pickle.load(f)
    _check_allocator()
    result = measure_batches(
        model,
        batches,
        int(job["steps"]),
        static_batch=bool(job["static_batch"]),
        progress=_Progress(bool(job.get("verbose", False))),
    )
    return {"measurement": result.to_dict()}


def run_job(argv: list[str], run) -> int:
    """A child process's main: ``run(job)`` on the job file ``argv`` names.

    The payload ``run`` returns, or ``{"error": "Type: message"}`` on one
    line, goes to the job's ``"out"`` file as JSON; the exit code is 1 on an
    error. Nothing but the standard library is imported before ``run``, so a
    job may set up ``sys.path`` and import the user's modules before Keras.
    """
    (job_path,) = argv
    with open(job_path) as f:
        job = json.load(f)
    try:
        payload = run(job)
    except Exception as error:  # reported to the parent in one line
        from kswap.profiler._isolate import one_line

        payload = {"error": one_line(error)}
    with open(job["out"], "w") as f:
        json.dump(payload, f)
    return 1 if "error" in payload else 0


def main(argv: list[str]) -> int:
    return run_job(argv, _run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
