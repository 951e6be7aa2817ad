"""PCI attributes of RDMA devices from the /sys/class/infiniband grep listing."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.ib_pci import parse_ib_pci

from tests.parsers.conftest import corpus_text

LISTING = """\
/sys/class/infiniband/mlx5_10/device/vendor:0x15b3
/sys/class/infiniband/mlx5_10/device/device:0x1021
/sys/class/infiniband/mlx5_10/device/numa_node:1
/sys/class/infiniband/mlx5_10/device/current_link_speed:32.0 GT/s PCIe
/sys/class/infiniband/mlx5_10/device/current_link_width:8
/sys/class/infiniband/mlx5_10/device/max_link_speed:32.0 GT/s PCIe
/sys/class/infiniband/mlx5_10/device/max_link_width:16
/sys/class/infiniband/mlx5_2/fw_ver:28.41.1000
mlx5_2/device/vendor:0x15B3
mlx5_2/device/device:0x101d
mlx5_2/device/numa_node:-1
mlx5_2/device/current_link_speed:8 GT/s
mlx5_2/device/max_link_speed:Unknown
"""


def test_listing_kernel_formats() -> None:
    facts = parse_ib_pci(LISTING)
    assert list(facts) == ["mlx5_2", "mlx5_10"]  # natural order
    cx7 = facts["mlx5_10"]
    assert (cx7.pci_id, cx7.numa_node, cx7.gen, cx7.width_lanes) == ("15b3:1021", 1, 5, 8)
    assert (cx7.max_gen, cx7.max_width_lanes, cx7.speed_gts) == (5, 16, 32.0)
    old = facts["mlx5_2"]  # pre-5.5 speed wording, -1 NUMA, link speed Unknown, no widths
    assert (old.pci_id, old.numa_node, old.gen, old.max_gen) == ("15b3:101d", None, 3, None)
    assert old.width_lanes is None and old.max_width_lanes is None


def test_corpus_listing_without_device_lines_gives_nothing() -> None:
    text = corpus_text("net/sysfs__infiniband-h100-cx7-ndr400-bf3-bond-gpud-fixture-grep.txt")
    assert parse_ib_pci(text) == {}


@pytest.mark.parametrize(
    "line",
    [
        "mlx5_0/device/current_link_speed:fast",
        "mlx5_0/device/current_link_width:x16",
        "mlx5_0/device/vendor:15b3",
    ],
)
def test_bad_values_raise(line: str) -> None:
    with pytest.raises(ParseError):
        parse_ib_pci(line + "\n")
