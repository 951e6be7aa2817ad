"""lspci bridge parser: the bus ranges behind bridges and the ports above each device."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.lspci_bridges import LspciView, parse_lspci_view
from nodegate.parsers.lspci_select import gpus

from tests.parsers.conftest import check_expected, corpus_text

VVV = "gpu/lspci-vvv__hgx-h100-8gpu-dell-pex890xx-cx7-nvswitch.txt"
NN = "gpu/lspci-nn__azure-nd-a100-v4-8gpu-nvswitch-cx6-vf.txt"


def summary(view: LspciView) -> dict[str, object]:
    """What this parser adds to parse_lspci: bridges and every GPU's path (root port first)."""
    return {
        "bridges": [(b.device.bdf, b.domain, b.secondary, b.subordinate) for b in view.bridges],
        "gpu_paths": {
            g.bdf: [b.device.bdf for b in view.path_to(g.bdf)] for g in gpus(view.report)
        },
    }


def test_corpus_expected() -> None:
    check_expected("lspci_bridges", VVV, summary(parse_lspci_view(corpus_text(VVV))))


def test_gpu_sits_behind_root_port_and_both_switch_ports() -> None:
    view = parse_lspci_view(corpus_text(VVV))
    path = view.path_to("0000:19:00.0")
    assert [(b.device.bdf, b.device.express_type, b.secondary, b.subordinate) for b in path] == [
        ("0000:15:01.0", "Root Port", 0x16, 0x1C),
        ("0000:16:00.0", "Upstream Port", 0x17, 0x1C),
        ("0000:17:01.0", "Downstream Port", 0x19, 0x19),
    ]
    assert all(len(view.path_to(g.bdf)) == 3 for g in gpus(view.report))
    dev = view.device("0000:19:00.0")
    assert dev is not None and dev.device_id == "2330"
    assert view.device("0001:19:00.0") is None and view.path_to("0001:19:00.0") == ()


def test_listing_without_bus_lines_has_no_bridges() -> None:
    # lspci -nn prints no `Bus:` lines (nor does -vvv as non-root on some kernels).
    view = parse_lspci_view(corpus_text(NN))
    assert view.bridges == () and len(gpus(view.report)) == 8


def test_bus_line_of_the_block_it_belongs_to() -> None:
    text = (
        "0000:00:01.0 PCI bridge: Intel Corporation Device 352a (rev 04)\n"
        "\tBus: primary=00, secondary=05, subordinate=06, sec-latency=0\n\n"
        "0001:00:02.0 PCI bridge: Intel Corporation Device 352a (rev 04)\n"
        "\tBus: primary=00, secondary=05, subordinate=05, sec-latency=0\n\n"
        "0000:05:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n\n"
    )
    view = parse_lspci_view(text)
    assert [(b.device.bdf, b.secondary, b.subordinate) for b in view.bridges] == [
        ("0000:00:01.0", 5, 6),
        ("0001:00:02.0", 5, 5),
    ]
    # Same bus number in another PCI domain is not above it.
    assert [b.device.bdf for b in view.path_to("0000:05:00.0")] == ["0000:00:01.0"]


@pytest.mark.parametrize(
    "text",
    ["", "hello world\nthis is not lspci\n", "\x00\x01\x02garbage\xff\xfe"],
    ids=["empty", "garbage", "binary"],
)
def test_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_lspci_view(text)
    assert err.value.tool == "lspci"


def test_truncated_vvv_raises() -> None:
    text = corpus_text(VVV)
    with pytest.raises(ParseError, match="lspci"):
        parse_lspci_view(text[: int(len(text) * 0.4)])


def test_bus_ranges_read_from_the_parse_equal_a_line_by_line_reading() -> None:
    """The ranges come from lspci's one parse; text that str.splitlines() cuts otherwise (a
    vertical tab, escape codes) is read line by line as before, so the bridges stay the same."""
    text = corpus_text(VVV)
    plain = parse_lspci_view(text)
    assert len(plain.bridges) == 59
    # A vertical tab in the root port's header: splitlines() cuts the header there, so its
    # `Bus:` line is filed under no device and the root port is no bridge.
    odd = text.replace("\n15:01.0 PCI bridge", "\n15:01.0 PCI\x0bbridge", 1)
    view = parse_lspci_view(odd)
    assert {b.device.bdf for b in plain.bridges} - {b.device.bdf for b in view.bridges} == {
        "0000:15:01.0"
    }
    # An escape code before a header hides it from the line reading the same way.
    ansi = text.replace("\n16:00.0 ", "\n\x1b[1m16:00.0 ", 1)
    assert {b.device.bdf for b in plain.bridges} - {
        b.device.bdf for b in parse_lspci_view(ansi).bridges
    } == {"0000:16:00.0"}


def test_a_bus_range_that_is_not_hexadecimal_is_a_parse_error() -> None:
    text = (
        "0000:00:01.0 PCI bridge: Intel Corporation Device 352a (rev 04)\n"
        "\tBus: primary=00, secondary=zz, subordinate=06, sec-latency=0\n\n"
    )
    with pytest.raises(ParseError) as err:
        parse_lspci_view(text)
    assert (err.value.tool, err.value.reason) == (
        "lspci",
        "0000:00:01.0: bus range not hexadecimal (secondary=zz, subordinate=06)",
    )
