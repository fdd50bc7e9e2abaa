"""Per-block actions and their short forms."""

import pytest

from kswap.planning import Action
from kswap.planning.actions import KEEP, RECOMPUTE, SWAP, as_action


@pytest.mark.parametrize(
    "text, action",
    [
        ("keep", Action("keep")),
        ("swap", Action("swap", 1)),
        ("swap:0", Action("swap", 0)),
        ("swap:3", Action("swap", 3)),
        ("recompute", Action("recompute")),
        ("recompute:device", Action("recompute")),
        ("recompute:host", Action("recompute", 1, "host")),
        ("recompute:host:0", Action("recompute", 0, "host")),
    ],
)
def test_short_forms(text, action):
    assert Action.parse(text) == action == as_action(action)
    assert Action.parse(str(action)) == action


def test_fields_that_do_not_apply_are_normalized():
    assert Action("keep", prefetch=4) == KEEP
    assert Action("recompute", prefetch=0) == RECOMPUTE
    assert Action("swap", checkpoint="host") == SWAP
    assert Action("swap", 2).copies and Action("recompute", checkpoint="host").copies
    assert not RECOMPUTE.copies and not KEEP.copies


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kind": "offload"}, "`kind` must be one of \\('keep', 'swap', 'recompute'\\)"),
        (
            {"kind": "swap", "prefetch": -1},
            "`prefetch` must be an integer >= 0. Received: prefetch=-1",
        ),
        ({"kind": "swap", "prefetch": True}, "`prefetch` must be an integer >= 0"),
        ({"kind": "recompute", "checkpoint": "disk"}, "`checkpoint` must be 'device' or 'host'"),
    ],
)
def test_bad_actions(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Action(**kwargs)


@pytest.mark.parametrize(
    "text", ["offload", "swap:-1", "swap:x", "keep:1", "recompute:host:1:2", 3]
)
def test_bad_short_forms(text):
    with pytest.raises(ValueError, match="`action` must be 'keep', 'swap\\[:PREFETCH\\]'"):
        Action.parse(text)
