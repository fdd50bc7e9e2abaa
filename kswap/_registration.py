"""kswap's Keras classes are registered once Keras is imported, so ``import kswap`` loads models.

A model saved with kswap's wrappers (``kswap.OffloadingModel(model).save(...)``)
names them by their registered name (``kswap>Offload``). Keras finds a class by
that name only once the module that defines it has run, and ``import kswap``
imports no Keras code (it stays cheap, and works without TensorFlow). So
importing kswap arranges for :mod:`kswap.layers` to be imported right after
Keras itself has been, when Keras runs on TensorFlow, the backend kswap's
layers are written for; if Keras was imported first, it is imported at once.

Example:
    >>> import kswap, keras
    >>> keras.saving.get_registered_object("kswap>Offload").__name__  # doctest: +SKIP
    'Offload'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__all__ = ["register_when_keras_is_imported"]


def _register() -> None:
    keras = sys.modules.get("keras")
    try:
        if keras is None or keras.backend.backend() != "tensorflow":
            return
        importlib.import_module("kswap.layers")
    except ImportError:  # no TensorFlow: nothing of kswap's can be in such a model
        return


class _ThenRegister(importlib.abc.Loader):
    """Runs Keras's own loader, then registers kswap's classes."""

    def __init__(self, inner: importlib.abc.Loader):
        self._inner = inner

    def __getattr__(self, name: str):  # resources and the like: Keras's loader's
        return getattr(self._inner, name)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:
        self._inner.exec_module(module)
        _register()


class _KerasFinder(importlib.abc.MetaPathFinder):
    """Finds ``keras`` once, as the finders after it would, with :class:`_ThenRegister`."""

    def find_spec(self, name, path=None, target=None):
        if name != "keras":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenRegister(spec.loader)
        return spec


def register_when_keras_is_imported() -> None:
    """Registers kswap's Keras classes now if Keras is imported, else right after it is."""
    if "keras" in sys.modules:
        _register()
    elif not any(isinstance(f, _KerasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _KerasFinder())
