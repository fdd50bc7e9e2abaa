"""What a fresh process needs to rebuild a model saved as ``.keras``.

``keras.models.load_model`` finds a custom class (or function) by the name
it was registered under with ``keras.saving.register_keras_serializable``,
and that name exists only once the module defining it has been imported. A
fresh process has imported nothing of the user's, so the parent names the
modules to import: those defining the model's classes (the model, every
layer at any depth, the optimizer, the losses) and every registered object
its saved configuration refers to (activations, metrics, initializers...).
What a fresh process cannot rebuild (a class defined in ``__main__`` or in a
notebook, a class that is not registered) is reported here, in the parent,
in one line.
"""

from __future__ import annotations

import json
import sys
import types
import zipfile
from collections.abc import Iterator

import keras

__all__ = ["IsolationError", "modules_to_import", "one_line"]

#: Packages whose objects Keras deserializes without their modules being imported.
_BUILTIN_PACKAGES = frozenset({"builtins", "keras", "tensorflow", "tf_keras"})


class IsolationError(ValueError):
    """The model cannot be rebuilt in a fresh process."""


def one_line(error: BaseException, limit: int = 400) -> str:
    """``Type: message`` on one line, without Keras's dumps of whole configs.

    Keras wraps the error that stopped loading (``Exception encountered:
    ...``) in one naming the outer model: the inner one is kept.
    """
    text = " ".join(str(error).split())
    text = text.rsplit("Exception encountered: ", 1)[-1]
    text = text.split(" Full object config:")[0]
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _findable(module: str) -> bool:
    """Whether a fresh import of ``module``'s top-level package would find it.

    Asks the import system's finders directly, not ``sys.modules``: a module
    made at run time (a notebook's, one built with ``exec``) is in
    ``sys.modules`` but no finder knows it.
    """
    top = module.split(".")[0]
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            if find_spec(top, None) is not None:
                return True
        except (ImportError, ValueError, AttributeError, TypeError):
            continue
    return False


def _layers(model) -> list:
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is not None:
        return list(flatten(include_self=True, recursive=True))
    out, todo = [], [model]
    while todo:
        layer = todo.pop()
        out.append(layer)
        todo.extend(getattr(layer, "layers", ()))
    return out


def _objects(model) -> Iterator[tuple[str, str]]:
    """``(name, module)`` of the classes and functions the model is made of."""
    for layer in _layers(model):
        yield type(layer).__name__, type(layer).__module__
    optimizer = model.optimizer
    while optimizer is not None:
        yield type(optimizer).__name__, type(optimizer).__module__
        optimizer = getattr(optimizer, "inner_optimizer", None)
    for loss in keras.tree.flatten(getattr(model, "loss", None)):
        if loss is None or isinstance(loss, str):
            continue
        if isinstance(loss, types.FunctionType):
            yield loss.__name__, loss.__module__
        else:
            yield type(loss).__name__, type(loss).__module__


def _config_entries(config) -> Iterator[dict]:
    if isinstance(config, dict):
        if "class_name" in config and "module" in config:
            yield config
        for value in config.values():
            yield from _config_entries(value)
    elif isinstance(config, list):
        for value in config:
            yield from _config_entries(value)


def _saved(config) -> Iterator[tuple[str, str | None, bool]]:
    """``(name, module, registered)`` of the custom objects a saved config names.

    A registered object's module is the one that registers it (Keras saves
    functions under the module ``builtins``, with their registered name).
    """
    for entry in _config_entries(config):
        module, class_name = entry.get("module"), entry.get("class_name")
        if class_name == "function":
            name = entry.get("config")
            if not isinstance(name, str) or ">" not in name:
                continue  # a Keras function ("relu"), or Keras reports it when loading
        else:
            if not module or module.split(".")[0] in _BUILTIN_PACKAGES:
                continue
            name = entry.get("registered_name") or class_name
        obj = keras.saving.get_registered_object(name)
        if obj is None:
            yield str(name), module, False
        else:
            yield str(name), getattr(obj, "__module__", module), True


def modules_to_import(model, saved_path: str) -> list[str]:
    """The modules a fresh process imports before loading ``saved_path``.

    Args:
        model: The model that was saved.
        saved_path: Its ``.keras`` file.

    Returns:
        Module names, sorted.

    Raises:
        IsolationError: A class or function is defined where a fresh process
            cannot import it, or is not registered for loading.
    """
    with zipfile.ZipFile(saved_path) as archive:
        config = json.loads(archive.read("config.json"))
    problems: dict[str, str] = {}
    modules: set[str] = set()

    def add(name: str, module: str | None) -> None:
        if not module or module.split(".")[0] in _BUILTIN_PACKAGES:
            return
        if module == "__main__":
            problems.setdefault(name, f"{name} is defined in __main__ (a script or notebook)")
        elif not _findable(module):
            problems.setdefault(name, f"{name} is defined in {module}, which is not importable")
        else:
            modules.add(module)

    for name, module in _objects(model):
        add(name, module)
    for name, module, registered in _saved(config):
        if not registered:
            problems.setdefault(name, f"{name} (in {module}) is not registered for loading")
        add(name, module)
    if problems:
        raise IsolationError(
            "`model` cannot be rebuilt in the fresh process of isolate=True: "
            + "; ".join(problems[k] for k in sorted(problems))
            + ". Move custom classes and functions into an importable module and "
            "register them with @keras.saving.register_keras_serializable(), "
            "or use isolate=False."
        )
    return sorted(modules)
