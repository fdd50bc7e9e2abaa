"""An offloaded model saved as ``.keras`` loads in a fresh process after ``import kswap``.

``import kswap`` imports no Keras code of kswap's, but has Keras import
:mod:`kswap.layers` (which registers ``kswap.layers.Offload``) right after
Keras itself (:mod:`kswap._registration`); ``import kswap.layers`` works too.
The child imports kswap before Keras, as the README says to, and the
other order is checked too.
"""

from __future__ import annotations

import json
import subprocess
import sys

import keras
import pytest

import kswap
from tests.scripts import script_env

LOAD = """
import json, sys
import kswap
import keras

def load():
    try:
        model = keras.models.load_model(sys.argv[1])
        return type(model.get_layer("d")).__name__
    except Exception as error:
        return type(error).__name__

first = load()
import kswap.layers
print(json.dumps({"import kswap": first, "import kswap.layers": load()}))
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "offloaded.keras"
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, name="d")])
    model.compile("sgd", "mse")
    kswap.OffloadingModel(model).save(path)
    return path


def _last_line(code: str, path) -> str:
    """Runs ``code`` in a fresh process with ``path`` as its argument; its last line."""
    env = script_env()
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def loads(saved):
    return json.loads(_last_line(LOAD, saved))


def test_loads_after_import_kswap_layers(loads):
    assert loads["import kswap.layers"] == "Offload"


def test_loads_after_import_kswap(loads):
    assert loads["import kswap"] == "Offload"


def test_loads_after_import_keras_then_kswap(saved):
    code = (
        "import sys, keras, kswap\n"
        "print(type(keras.models.load_model(sys.argv[1]).get_layer('d')).__name__)"
    )
    assert _last_line(code, saved) == "Offload"


def test_without_kswap_keras_s_error_shows_kswap_s_module(saved):
    # what docs/offloading.md tells users to look for: kswap is not imported,
    # so the message is Keras's, and the only hint is the printed config
    code = (
        "import sys, keras\n"
        "try:\n"
        "    keras.models.load_model(sys.argv[1])\n"
        "    print('loaded')\n"
        "except TypeError as e:\n"
        "    m = ' '.join(str(e).split())\n"
        "    print('could not be deserialized properly' in m, "
        "\"'module': 'kswap.layers.offload', 'class_name': 'Offload'\" in m)"
    )
    assert _last_line(code, saved) == "True True"
