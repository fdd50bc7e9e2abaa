"""benchmarks/exactness.py's verdict and table, on made-up rows (no model is trained)."""

import importlib.util
import os

from tests.scripts import ROOT

_spec = importlib.util.spec_from_file_location(
    "exactness_script", os.path.join(ROOT, "benchmarks", "exactness.py")
)
exactness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(exactness)

ZERO = {"first_loss": 0.0, "losses": 0.0, "weights": 0.0}


def _row(kswap, remapper_off=ZERO, plain_again=ZERO, again=1):
    return {
        "model": "M",
        "data": "arrays",
        "again": again,
        "kswap": kswap,
        "remapper_off": remapper_off,
        "plain_again": plain_again,
    }


def _dev(first_loss, losses, weights):
    return {"first_loss": first_loss, "losses": losses, "weights": weights}


def test_verdicts():
    assert exactness.verdict(_row(ZERO)) == "bit-identical"
    assert exactness.verdict(_row(_dev(0, 1e-6, 1e-7), remapper_off=_dev(0, 1e-5, 1e-6))) == (
        "within TensorFlow's noise"
    )
    assert exactness.verdict(_row(_dev(0, 1e-4, 1e-7), remapper_off=_dev(0, 1e-5, 1e-6))) == (
        "beyond"
    )
    # a plain model that differs from itself: its largest sample is the noise
    noisy = _row(_dev(0, 1e-4, 1e-5), plain_again=_dev(0, 2e-4, 2e-5), again=3)
    assert exactness.verdict(noisy) == "within TensorFlow's noise (plain differs from itself)"


def test_table_names_the_number_of_noise_samples():
    text = exactness.table([_row(ZERO, again=3), {"model": "N", "error": "boom"}])
    head, _, ok, failed = text.splitlines()
    assert "plain again (largest of 3)" in head
    assert ok.endswith("| bit-identical |") and "0.0e+00 / 0.0e+00" in ok
    assert failed == "| N | | | | | error: boom |"
    assert "plain again |" in exactness.table([_row(ZERO)]).splitlines()[0]


def test_bad_arguments_exit_2(capsys):
    assert exactness.main(["--again", "0"]) == 2
    assert "`--again` must be at least 1. Received: --again 0" in capsys.readouterr().err
    assert exactness.main(["--steps", "0"]) == 2
