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
    >>> phase_of = phase_resolver(tree, transfer_scopes=("kswap_host_tier",))
    >>> phase_of("gradient_tape/resnet50_1/conv1_conv_1/Conv2D")
    'backward'
    >>> phase_of("resnet50_1/conv1_conv_1/kswap_host_tier/DeepCopy")
    'transfer'
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from kswap.trace.build import in_scope
from kswap.trace.replicas import first_replica_name

__all__ = [
    "LayerTree",
    "copies_one_tensor",
    "layer_from_inputs",
    "layer_tree",
    "phase_resolver",
    "resolver",
    "step_op_name",
]

_SUFFIX = re.compile(r"_\d+$")
_PREFIXES = ("gradient_tape",)
# the tape's zeros for an output that gets no gradient
_ZEROS_LIKE = re.compile(r"(^|/)zeros_like(_\d+)?$")
# the tape's sum of the gradients of a tensor read more than once, at the root
_TAPE_SUM = re.compile(r"^AddN(_\d+)?$")
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


def _replica_name(op: str) -> str:
    """``step_op_name(op)`` as the first replica names it (MirroredStrategy's scopes removed)."""
    return first_replica_name(step_op_name(op))


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
        parts = _replica_name(op).split("/")
        # a swap-in is named after the tensor it copies, then the backward that reads it
        inner = [i for i, p in enumerate(parts) if i and p in _PREFIXES]
        if inner:
            parts = parts[inner[-1] :]
        while parts and parts[0] in _PREFIXES:
            parts = parts[1:]
        node, path = tree, []
        if parts and _matches(tree.name, parts[0]):
            parts = parts[1:]
        elif len(parts) > 1 and tree.child(parts[0]) is None:
            # a nested model's layer called outside the model (recomputed in backward)
            found = _descendant(tree, parts[0])
            if found is not None:
                node, path = found
                parts = parts[1:]
        for scope in parts[:-1]:  # the last component is the op itself
            nxt = node.child(scope)
            if nxt is None:
                break
            path.append(nxt.name)
            node = nxt
        cache[op] = "/".join(path) or None
        return cache[op]

    return layer_of


def _descendant(tree: LayerTree, scope: str) -> tuple[LayerTree, list[str]] | None:
    """The one layer at any depth that scope component ``scope`` names, and its path."""
    exact, loose = [], []

    def walk(node: LayerTree, path: list[str]) -> None:
        for c in node.layers:
            here = [*path, c.name]
            if c.name == scope:
                exact.append((c, here))
            elif _SUFFIX.sub("", scope) == c.name:
                loose.append((c, here))
            walk(c, here)

    walk(tree, [])
    for matches in (exact, loose):
        if matches:
            return matches[0] if len(matches) == 1 else None
    return None


def phase_resolver(
    tree: LayerTree, transfer_scopes: Iterable[str] = (), update_scopes: Iterable[str] = ()
) -> Callable[[str], str]:
    """Returns ``op name -> phase``: ``"forward"``, ``"backward"``, ``"transfer"`` or ``"update"``.

    Args:
        tree: The model's layers.
        transfer_scopes: Name scopes of the ops that copy tensors between the
            tiers (kswap's host copies and swap-ins), anywhere in the name.
        update_scopes: Name scopes, at the start of the name, of the
            optimizer's update (the optimizer's name).

    Ops under ``gradient_tape/`` are backward, and so are the zeros the tape
    makes at the root (``zeros_like_3``) for outputs that get no gradient and
    its sums (``AddN_7``) of the gradients of a tensor read more than once.
    So are ops of a layer that run outside the model's own scope
    (``lstm_1/while`` in a model whose forward runs under ``model_1/``):
    only a recomputation in backward calls a layer there. Everything else is
    forward: the layers, the loss, the input pipeline.

    Example:
        >>> tree = LayerTree("m", (LayerTree("lstm"),))
        >>> phase_of = phase_resolver(tree, ("kswap_device_tier",), ("adam",))
        >>> [phase_of(op) for op in ("m_1/lstm_1/while", "lstm_1/while", "zeros_like_2",
        ...     "AddN_3", "kswap_device_tier/DeepCopy", "adam/Mul", "compile_loss/Sum")]
        ['forward', 'backward', 'backward', 'backward', 'transfer', 'update', 'forward']
    """
    transfers = tuple(transfer_scopes)
    updates = tuple(update_scopes)

    def phase_of(op: str) -> str:
        name = _replica_name(op)
        if any(name.startswith(scope + "/") for scope in updates):
            return "update"
        if any(in_scope(name, scope) for scope in transfers):
            return "transfer"
        parts = name.split("/")
        if parts[0] in _PREFIXES or (
            len(parts) == 1 and (_ZEROS_LIKE.search(name) or _TAPE_SUM.match(name))
        ):
            return "backward"  # the tape's own ops (its zeros, its sums) are at the root
        if len(parts) > 1 and not _matches(tree.name, parts[0]):
            if tree.child(parts[0]) is not None or _descendant(tree, parts[0]) is not None:
                return "backward"
        return "forward"

    return phase_of


def copies_one_tensor(op: str, transfer_scopes: Iterable[str] = ()) -> bool:
    """Whether ``op`` copies or mirrors one tensor: kswap's transfers, the tape's zeros.

    Such an op belongs to the layer of the tensor it copies; when its name
    has no layer, :func:`layer_from_inputs` finds it.
    """
    name = step_op_name(op)
    return bool(_ZEROS_LIKE.search(name)) or any(in_scope(name, s) for s in transfer_scopes)


def layer_from_inputs(
    op: str,
    graphs: Sequence[Mapping[str, Sequence[str]]],
    layer_of: Callable[[str], str | None],
    depth: int = 4,
) -> str | None:
    """The one layer whose tensors ``op`` reads, in every graph that holds ``op``.

    Args:
        op: An op name (in the step's graph).
        graphs: Per graph (traces of the same step), each op name's data
            inputs (op names, not control inputs).
        layer_of: Op name -> layer, or None.
        depth: How many ops of no layer to look through (a swap-in of a
            copy...).

    Returns:
        The layer, or None when no graph holds ``op``, when its inputs
        reach no layer or more than one, or when the graphs disagree.

    Example:
        >>> graph = {"kswap_device_tier/DeepCopy": ["m_1/d_1/kswap_host_tier/DeepCopy"]}
        >>> layer_of = {"m_1/d_1/kswap_host_tier/DeepCopy": "d"}.get
        >>> layer_from_inputs("kswap_device_tier/DeepCopy", [graph], layer_of)
        'd'
    """
    found: set[str] = set()
    seen_any = False
    for graph in graphs:
        if op not in graph:
            continue
        seen_any = True
        found |= _input_layers(op, graph, layer_of, depth, set())
        if len(found) > 1:
            return None
    return next(iter(found)) if seen_any and len(found) == 1 else None


def _input_layers(op, graph, layer_of, depth, visited) -> set[str]:
    layers: set[str] = set()
    for name in graph.get(op, ()):
        if name in visited:
            continue
        visited.add(name)
        layer = layer_of(name)
        if layer is not None:
            layers.add(layer)
        elif depth > 0:
            layers |= _input_layers(name, graph, layer_of, depth - 1, visited)
    return layers


def layer_tree(model) -> LayerTree:
    """Builds the :class:`LayerTree` of a Keras model (nested models included)."""
    children = tuple(
        layer_tree(layer) if hasattr(layer, "layers") else LayerTree(layer.name)
        for layer in getattr(model, "layers", ())
    )
    return LayerTree(model.name, children)
