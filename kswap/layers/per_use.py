"""One gradient per use of a block input, for the tape to sum as without kswap.

TensorFlow's tape sums all the gradients of a tensor in one ``AddN``, in the
order they arrive. A block input that several of the block's ops read gets
one gradient per use; summed inside the block and then once more outside it,
they would round differently from the plain model's one sum. So an offloaded
block (:mod:`kswap.layers.offload`) takes each input once more per further
use (:func:`per_use_inputs`), and its backward (:mod:`kswap.layers.backward`)
returns one gradient per use (:func:`split_uses`); :class:`Slots` says how
many.

Example:
    >>> from kswap.layers.per_use import Slots, split_uses
    >>> class T:  # a stand-in for a tensor: ``ref()`` is what counts
    ...     def ref(self):
    ...         return id(self)
    >>> x = T()
    >>> split_uses(Slots([1]), [x], [["dx1", "dx2"]])
    (['dx1'], ['dx2'])
"""

from __future__ import annotations

from kswap.layers import replay

__all__ = ["Slots", "per_use_inputs", "recorded", "split_uses", "unique"]


def unique(xs) -> list[bool]:
    """Per tensor of ``xs``, whether it is its first place (a tensor may be passed twice)."""
    seen, first = set(), []
    for x in xs:
        first.append(x.ref() not in seen)
        seen.add(x.ref())
    return first


class Slots:
    """How many more times each block input is passed, one per further use.

    TensorFlow's tape sums all the gradients of a tensor in one ``AddN``, in
    the order they arrive. A block input that several of the block's ops read
    (BatchNormalization reads its input three times) gets one gradient per
    use. Summed inside the block and then once more with the input's
    gradients from outside it, they round differently from the plain model's
    one sum: in ResNet V2, the residual's gradient and the next
    BatchNormalization's three. So the block takes the input once more per
    further use, and its backward returns one gradient per use, for the tape
    to sum with the others.

    Attributes:
        extra: Per block input, how many more times it is passed.
        recorded: Whether ``tf.custom_gradient`` took the further inputs (it
            flattens its arguments after the forward ran); if not, the
            backward sums each input's gradients itself.
    """

    def __init__(self, extra: list[int]):
        self.extra = extra
        self.recorded = False


def per_use_inputs(plan: replay.ReplayPlan, xs, uses: list) -> Slots:
    """Appends to ``uses`` each of ``xs`` once per further use in the block's backward."""
    extra = []
    for x, first, n in zip(xs, unique(xs), replay.source_uses(plan.ops, xs), strict=True):
        extra.append(max(n - 1, 0) if first else 0)
        uses.extend([x] * extra[-1])
    return Slots(extra)


def recorded(out: list, n_inputs: int, uses: list) -> bool:
    """Whether the op ``tf.custom_gradient`` recorded takes ``uses`` after the block's inputs."""
    if not uses or not out or out[0].op.type != "IdentityN":
        return False
    start = len(out) + n_inputs
    taken = list(out[0].op.inputs)[start : start + len(uses)]
    return [t.name for t in taken] == [t.name for t in uses]


def split_uses(slots: Slots, xs, per_use: list) -> tuple[list, list]:
    """Each input's first gradient at its place, its others in its further slots."""
    places, further = [], []
    for grads, first, k in zip(per_use, unique(xs), slots.extra, strict=True):
        if not first:
            places.append(None)  # a tensor passed twice gets its gradients at its first place
            continue
        if len(grads) > k + 1:  # more than source_uses counted: sum the rest
            grads = grads[:k] + [replay.aggregate(grads[k:])]
        grads = grads + [None] * (k + 1 - len(grads))
        places.append(grads[0])
        further += grads[1:]
    return places, further
