"""kswap.measure(isolate=True) with custom classes: they load, or a one-line error says why."""

import sys
import textwrap
import types

import keras
import numpy as np
import pytest

import kswap
from kswap.profiler._isolate import one_line
from tests.profiler import custom

FIX = "register_keras_serializable"


def data(n=32, features=16, units=4):
    rng = np.random.default_rng(0)
    return rng.random((n, features), dtype=np.float32), rng.random((n, units), dtype=np.float32)


def compiled(layer, name, features=16):
    inp = keras.Input((features,))
    out = keras.layers.Dense(4, name="head")(layer(inp))
    model = keras.Model(inp, out, name=name)
    model.compile("sgd", "mse")
    return model


def test_registered_custom_layer_of_an_importable_module():
    model = custom.scale_shift_model("custom_isolated")
    x, y = data()
    there = kswap.measure(model, x, y, steps=1, batch_size=16, isolate=True)
    here = kswap.measure(model, x, y, steps=1, batch_size=16)
    assert there.trace is None and there.emulated and there.batch_size == 16
    # the same step in both processes: at least ScaleShift's output, kept for backward
    assert there.step_peak_bytes >= 16 * 16 * 4
    assert 0.5 * here.step_peak_bytes <= there.step_peak_bytes <= 2 * here.step_peak_bytes


def test_module_found_only_on_this_process_s_sys_path(tmp_path, monkeypatch):
    (tmp_path / "kswap_test_extra_layers.py").write_text(
        textwrap.dedent(
            """
            import keras

            @keras.saving.register_keras_serializable(package="kswap_test_extra")
            class Doubler(keras.layers.Layer):
                def call(self, x):
                    return 2.0 * x
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import kswap_test_extra_layers

    model = compiled(kswap_test_extra_layers.Doubler(), "extra_path")
    x, y = data()
    m = kswap.measure(model, x, y, steps=1, batch_size=16, isolate=True)
    assert m.step_peak_bytes > 0


def test_class_of_main_is_named_in_one_line():
    local = type("ScaleShiftMain", (custom.ScaleShift,), {"__module__": "__main__"})
    keras.saving.register_keras_serializable(package="kswap_tests_main")(local)
    model = compiled(local(), "main_class")
    x, y = data()
    with pytest.raises(ValueError) as info:
        kswap.measure(model, x, y, steps=1, isolate=True)
    message = str(info.value)
    assert "\n" not in message
    assert "ScaleShiftMain is defined in __main__" in message
    assert FIX in message and "isolate=False" in message


def test_class_of_a_module_made_at_run_time():
    module = types.ModuleType("kswap_test_cell_42")  # what exec'd or notebook code makes
    source = """
        import keras

        class Cell(keras.layers.Layer):
            def call(self, x):
                return x
        """
    exec(textwrap.dedent(source), module.__dict__)
    sys.modules[module.__name__] = module
    try:
        keras.saving.register_keras_serializable(package="kswap_tests_cell")(module.Cell)
        model = compiled(module.Cell(), "cell_class")
        with pytest.raises(ValueError, match="Cell is defined in kswap_test_cell_42, which is not"):
            kswap.measure(model, *data(), steps=1, isolate=True)
    finally:
        del sys.modules[module.__name__]


def test_unregistered_class_is_named():
    model = compiled(custom.Unregistered(), "unregistered")
    with pytest.raises(ValueError) as info:
        kswap.measure(model, *data(), steps=1, isolate=True)
    message = str(info.value)
    assert "\n" not in message
    assert "Unregistered (in tests.profiler.custom) is not registered" in message
    assert FIX in message


def test_model_that_cannot_be_saved():
    model = compiled(custom.NeedsUnits(custom.FirstUnits(4)), "unsavable")
    with pytest.raises(RuntimeError) as info:
        kswap.measure(model, *data(), steps=1, isolate=True)
    message = str(info.value)
    assert "\n" not in message
    assert "cannot be saved" in message and "NeedsUnits" in message
    assert "isolate=False" in message


def test_failure_in_the_fresh_process_is_one_short_line():
    # registered here by a call, but not when the fresh process imports the module
    model = compiled(custom.register_late()(), "late")
    with pytest.raises(RuntimeError) as info:
        kswap.measure(model, *data(), steps=1, isolate=True)
    message = str(info.value)
    assert message.startswith("Measuring in a fresh process failed: TypeError: ")
    assert "Could not locate class 'LateRegistered'" in message
    assert "\n" not in message and "Traceback" not in message and len(message) < 600


def test_one_line():
    error = TypeError("Could not locate class 'X'.\n  Make sure ... Full object config: {'a': 1}")
    assert one_line(error) == "TypeError: Could not locate class 'X'. Make sure ..."
    assert one_line(ValueError("x" * 1000), limit=50) == "ValueError: " + "x" * 47 + "..."
    assert one_line(KeyError()) == "KeyError"
    wrapped = TypeError("Model could not be loaded.\n\nconfig={...}.\n\nException encountered: Y")
    assert one_line(wrapped) == "TypeError: Y"


def test_kswap_s_own_layers_load_in_the_fresh_process():
    # `import kswap` imports no layers: the Offload wrappers' module is
    # imported like any other that defines a class of the model
    model = kswap.OffloadingModel(custom.scale_shift_model("offloaded_isolated", units=64), "all")
    x, y = data(n=64, units=64)
    m = kswap.measure(model, x, y, steps=1, batch_size=64, isolate=True)
    assert m.host_peak_bytes > 0  # activations went to the (emulated) host tier
