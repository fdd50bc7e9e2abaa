"""Maps TensorFlow op names to the Keras layers they belong to.

Keras runs each layer's ``call`` under a name scope named after the layer, and
``tf.function`` makes scopes unique by appending ``_1``, ``_2``...; gradient ops
are under ``gradient_tape/``. So ``gradient_tape/resnet50_1/conv1_conv_1/Conv2D``
belongs to layer ``conv1_conv`` of model ``resnet50``. ``model.fit``'s
training function calls the step as a function of its own, so the executed
ops carry the name of that call in front (``StatefulPartitionedCall/``, inside
a ``while`` loop's branches with ``steps_per_execution > 1``):
:func:`step_op_name` removes it. This module is plain Python: it works on a
tree of layer names, not on Keras objects.

Example:
    >>> from kswap.profiler.attribution import LayerTree, resolver, step_op_name
    >>> step_op_name("StatefulPartitionedCall/gradient_tape/resnet50_1/bn/mul")
    'gradient_tape/resnet50_1/bn/mul'
    >>> tree = LayerTree("resnet50", (LayerTree("conv1_conv"), LayerTree("bn")))
    >>> layer_of = resolver(tree)
    >>> layer_of("gradient_tape/resnet50_1/conv1_conv_1/Conv2D")
    'conv1_conv'
    >>> layer_of("adam/Mul_3") is None
    True
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

__all__ = ["LayerTree", "resolver", "layer_tree", "step_op_name"]

_SUFFIX = re.compile(r"_\d+$")
_PREFIXES = ("gradient_tape",)
# The call of the step function in fit's training function: at the start of the
# name, alone or inside the while loop (and its conditionals) of several steps.
_FIT_CALL = re.compile(
    r"^(?:(?:while|body|cond|then|else|_\d+)(?:_\d+)?/)*(?:Stateful)?PartitionedCall(?:_\d+)?/"
)


def step_op_name(op: str) -> str:
    """The name ``op`` has in the training step's own graph.

    Removes the name of the call that runs the step inside ``fit``'s training
    function; a name without it is returned as it is.

    Example:
        >>> loop = "while/body/_1/while/cond/then/_7/while/cond/"
        >>> step_op_name(loop + "StatefulPartitionedCall/adam/Mul")
        'adam/Mul'
        >>> step_op_name("model_1/dense_1/PartitionedCall/MatMul")  # a call inside a layer stays
        'model_1/dense_1/PartitionedCall/MatMul'
    """
    return _FIT_CALL.sub("", op, count=1)


@dataclasses.dataclass(frozen=True)
class LayerTree:
    """A layer's name and, for a nested model, its layers."""

    name: str
    layers: tuple[LayerTree, ...] = ()

    def child(self, scope: str) -> LayerTree | None:
        """The child layer a name-scope component refers to, if any."""
        by_name = {c.name: c for c in self.layers}
        if scope in by_name:
            return by_name[scope]
        return by_name.get(_SUFFIX.sub("", scope))


def _matches(name: str, scope: str) -> bool:
    return scope == name or _SUFFIX.sub("", scope) == name


def resolver(tree: LayerTree) -> Callable[[str], str | None]:
    """Returns ``op name -> layer path`` (``"outer/inner"`` when nested) or None."""
    cache: dict[str, str | None] = {}

    def layer_of(op: str) -> str | None:
        if op in cache:
            return cache[op]
        parts = step_op_name(op).split("/")
        while parts and parts[0] in _PREFIXES:
            parts = parts[1:]
        if parts and _matches(tree.name, parts[0]):
            parts = parts[1:]
        node, path = tree, []
        for scope in parts[:-1]:  # the last component is the op itself
            nxt = node.child(scope)
            if nxt is None:
                break
            path.append(nxt.name)
            node = nxt
        cache[op] = "/".join(path) or None
        return cache[op]

    return layer_of


def layer_tree(model) -> LayerTree:
    """Builds the :class:`LayerTree` of a Keras model (nested models included)."""
    children = tuple(
        layer_tree(layer) if hasattr(layer, "layers") else LayerTree(layer.name)
        for layer in getattr(model, "layers", ())
    )
    return LayerTree(model.name, children)
