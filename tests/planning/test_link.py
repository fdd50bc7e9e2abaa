"""Link and device presets."""

import pytest

from kswap.planning import DEVICES, LINKS, Device, Link
from kswap.planning.link import as_link


def test_presets_are_per_direction_speeds():
    assert LINKS["pcie3"].h2d_bytes_per_s == 12e9 == LINKS["pcie3"].d2h_bytes_per_s
    assert LINKS["pcie4"].h2d_bytes_per_s == 25e9
    assert LINKS["pcie5"].h2d_bytes_per_s == 50e9
    assert LINKS["nvlink-c2c"].h2d_bytes_per_s + LINKS["nvlink-c2c"].d2h_bytes_per_s == 900e9
    assert Link.preset("cpu").name == "cpu"
    for name, link in LINKS.items():
        assert link.name == name and link is Link.preset(name)


def test_copy_time_is_latency_plus_bytes_over_bandwidth():
    link = Link(100.0, 50.0, latency_s=0.5)
    assert link.seconds(100, "h2d") == 1.5
    assert link.seconds(100, "d2h") == 2.5
    assert link.seconds(0, "h2d") == 0.0
    with pytest.raises(
        ValueError, match="`direction` must be 'h2d' or 'd2h'. Received: direction='up'"
    ):
        link.seconds(1, "up")


def test_unknown_preset_and_bad_values():
    with pytest.raises(
        ValueError, match="Unknown `link`. Expected one of 'cpu', .*Received: link='x'"
    ):
        Link.preset("x")
    with pytest.raises(ValueError, match="Unknown `link`"):
        as_link("pcie9")
    with pytest.raises(ValueError, match="`link` must be a Link or a preset's name"):
        as_link(12)
    with pytest.raises(ValueError, match="`h2d_bytes_per_s` must be a number > 0. Received: h2d"):
        Link(0, 1)
    with pytest.raises(ValueError, match="`latency_s` must be a number >= 0"):
        Link(1, 1, -1)


def test_dict_round_trip():
    link = Link(1e9, 2e9, 1e-6, "measured")
    assert Link.from_dict(link.to_dict()) == link
    with pytest.raises(ValueError, match="Not a link: missing field\\(s\\) d2h_bytes_per_s"):
        Link.from_dict({"h2d_bytes_per_s": 1})
    with pytest.raises(ValueError, match="Not a link: expected a JSON object"):
        Link.from_dict("pcie3")


def test_device_presets():
    assert set(DEVICES) == {"k40", "v100", "a100", "h100", "h200", "cpu"}
    assert Device.preset("h200").memory_bytes == 141 * 2**30
    assert Device.preset("k40").link == "pcie3" and Device.preset("h100").link == "pcie5"
    assert Device.preset("cpu").memory_bytes is None
    for device in DEVICES.values():
        assert device.link in LINKS and device.fp32_flops > 0 and device.memory_bytes_per_s > 0
    with pytest.raises(ValueError, match="Unknown `device`. Expected one of 'k40'.*device='p100'"):
        Device.preset("p100")
