"""mst status -v parser: corpus captures, blank-line rows, empty cells, broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.mst import parse_mst_status

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

FILES = sorted(p.name for p in (CORPUS / "net").glob("mst_status__*"))
TEN = "mst_status__v-cx7-ib-10dev-blank-lines-excerpt.txt"
SIX = "mst_status__v-cx7-ib-h100-6dev.txt"

# Real `mst status -v` rows from a BlueField-3 DPU (public tutorial): multi-function device,
# several netdevs in one NET cell, NUMA -1. The second row's RDMA and NET cells are blanked
# to exercise column-offset splitting.
_WIDTHS = (24, 30, 10, 16, 40)  # mst's column widths, as in the corpus captures


def _row(*cells: str) -> str:
    return "".join(c.ljust(w) for c, w in zip(cells, _WIDTHS, strict=False)) + cells[-1]


BF3 = "\n".join(
    [
        "MST modules:",
        "------------",
        "    MST PCI module is not loaded",
        "    MST PCI configuration module loaded",
        "PCI devices:",
        "------------",
        _row("DEVICE_TYPE", "MST", "PCI", "RDMA", "NET", "NUMA"),
        _row(
            "BlueField3(rev:1)",
            "/dev/mst/mt41692_pciconf0.1",
            "03:00.1",
            "mlx5_1",
            "net-p1,net-pf1hpf,net-en3f1pf1sf0",
            "-1",
        ),  # fmt: skip
        "",
        _row("BlueField3(rev:1)", "/dev/mst/mt41692_pciconf0", "03:00.0", "", "", "-1"),
    ]
)


@pytest.mark.parametrize("name", FILES)
def test_corpus_expected(name: str) -> None:
    check_expected("mst_status", name, parse_mst_status(corpus_text(f"net/{name}")))


def test_corpus_count() -> None:
    assert len(FILES) == 2


def test_blank_lines_between_rows_and_renamed_netdevs() -> None:
    status = parse_mst_status(corpus_text(f"net/{TEN}"))
    assert len(status.devices) == 6
    by_rdma = {d.rdma_device: d for d in status.devices}
    dev = by_rdma["mlx5_10"]  # RDMA names are not in pciconf order on this host
    assert dev.mst_device == "/dev/mst/mt4129_pciconf8"
    assert (dev.pci_address, dev.netdevs, dev.numa_node) == ("0000:e3:00.0", ("ib7",), 3)
    assert [d.pci_address for d in status.devices] == sorted(d.pci_address for d in status.devices)


def test_six_devices_trailing_spaces_and_modules() -> None:
    status = parse_mst_status(corpus_text(f"net/{SIX}"))
    assert status.pci_module_loaded is False and status.pciconf_module_loaded is True
    assert [d.rdma_device for d in status.devices] == [f"mlx5_{i}" for i in range(6)]
    assert {d.device_type for d in status.devices} == {"ConnectX7(rev:0)"}
    assert status.devices[0].netdevs == ("ibp65s0",)


def test_multi_netdev_and_empty_cells() -> None:
    status = parse_mst_status(BF3)
    first, second = status.devices
    assert (first.pci_address, first.rdma_device, first.netdevs) == ("0000:03:00.0", None, ())
    assert second.netdevs == ("p1", "pf1hpf", "en3f1pf1sf0")
    assert second.numa_node == -1


def test_plain_mst_status_is_refused() -> None:
    text = "MST modules:\n------------\n    MST PCI module is not loaded\n"
    text += "    MST PCI configuration module loaded\n\nMST devices:\n------------\n"
    text += "/dev/mst/mt4129_pciconf0         - PCI configuration cycles access.\n"
    with pytest.raises(ParseError, match="without -v"):
        parse_mst_status(text)


@pytest.mark.parametrize(
    "text",
    ["", "garbage\nwords\n", "\x00\xff\xfe", "CA 'mlx5_0'\n\tCA type: MT4129\n"],
    ids=["empty", "garbage", "binary", "ibstat-output"],
)
def test_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_mst_status(text)
    assert exc.value.tool == "mst status"


@pytest.mark.parametrize("name", FILES)
def test_truncated(name: str) -> None:
    text = corpus_text(f"net/{name}")
    with pytest.raises(ParseError):
        parse_mst_status(text[: int(len(text) * 0.4)])


def test_row_without_numa_is_truncated() -> None:
    text = corpus_text(f"net/{SIX}")
    with pytest.raises(ParseError, match="NUMA"):
        parse_mst_status(text[: text.index("net-ibp65s0") + len("net-ibp65s0")])
