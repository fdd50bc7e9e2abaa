"""Budgets: fractions, byte counts and sizes with units."""

import pytest

from kswap.planning import Budget, parse_budget
from kswap.planning.budget import format_bytes


@pytest.mark.parametrize(
    "budget, fraction, nbytes",
    [
        (0.5, 0.5, None),
        (1, 1.0, None),
        (1.0, 1.0, None),
        ("1", 1.0, None),
        ("0.25", 0.25, None),
        ("50%", 0.5, None),
        (" 100 % ", 1.0, None),
        (2, None, 2),
        (12 * 2**30, None, 12 * 2**30),
        ("1024", None, 1024),
        ("1e9", None, 10**9),
        ("12GiB", None, 12 * 2**30),
        ("12 gib", None, 12 * 2**30),
        ("500MB", None, 500 * 10**6),
        ("1.5 GB", None, 1_500_000_000),
        ("64KiB", None, 65536),
        ("2048B", None, 2048),
    ],
)
def test_parse(budget, fraction, nbytes):
    assert parse_budget(budget) == Budget(fraction=fraction, bytes=nbytes)


def test_resolve_and_text():
    assert parse_budget(0.5).resolve(1001) == 500
    assert parse_budget("1KiB").resolve(10) == 1024
    assert str(parse_budget(0.5)) == "0.5 of the baseline peak"
    assert str(parse_budget(2048)) == "2,048 bytes"
    assert parse_budget(parse_budget(0.5)) == Budget(fraction=0.5)
    with pytest.raises(ValueError, match="exactly one of"):
        Budget()


@pytest.mark.parametrize("budget", [-2, 0, 0.0, -0.5, 1.5, "1.5", "0", "-1GiB", "150%", "0.5B"])
def test_out_of_range(budget):
    with pytest.raises(ValueError) as info:
        parse_budget(budget)
    assert (
        str(info.value)
        == f"`budget` must be in (0, 1] or a byte count. Received: budget={budget!r}"
    )


@pytest.mark.parametrize("budget", ["abc", "12XB", "", "1 2 GiB", True, None, [0.5], float("nan")])
def test_unparseable(budget):
    with pytest.raises(ValueError, match="`budget` must be .*Received: budget="):
        parse_budget(budget)


def test_the_error_names_the_argument_and_what_was_received():
    with pytest.raises(ValueError) as info:
        parse_budget(-2)
    assert str(info.value) == "`budget` must be in (0, 1] or a byte count. Received: budget=-2"


def test_format_bytes_rounds_up():
    assert format_bytes(50) == "50 B"
    assert format_bytes(1024) == "1 KiB"
    assert format_bytes(12 * 2**30) == "12 GiB"
    assert format_bytes(int(6.231 * 2**30)) == "6.24 GiB"
    assert format_bytes(int(123.01 * 2**20)) == "124 MiB"
