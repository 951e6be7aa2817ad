"""`lspci -vv | grep Lnk` fragment parser: the derived corpus fragments, `grep LnkSta` over many
devices, bad input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.lspci import parse_lspci
from nodegate.parsers.lspci_lnk import parse_lspci_lnk

from tests.parsers.conftest import CORPUS, check_expected, corpus_text, cut_corpus

FILES = sorted(p.name for p in (CORPUS / "gpu").glob("lspci-vv-grep-Lnk__*"))
GPU = "gpu/lspci-vv-grep-Lnk__h100-sxm5-gpu-19-00-0-gen5-x16-derived-from-hgx-h100-lspci-vvv.txt"
SWITCH = (
    "gpu/lspci-vv-grep-Lnk__"
    "pex890xx-upstream-port-17-00-0-16gts-downgraded-derived-from-hgx-h100-lspci-vvv.txt"
)
VVV = "gpu/lspci-vvv__hgx-h100-8gpu-dell-pex890xx-cx7-nvswitch.txt"


@pytest.mark.parametrize("name", FILES, ids=FILES)
def test_corpus_expected(name: str) -> None:
    check_expected("lspci_lnk", name, parse_lspci_lnk(corpus_text(f"gpu/{name}")))


def test_same_readings_as_the_whole_lspci() -> None:
    """The fragment reads what parse_lspci reads from the device's block of the full capture."""
    dev = next(d for d in parse_lspci(corpus_text(VVV)).devices if d.bdf.endswith("17:00.0"))
    (frag,) = parse_lspci_lnk(corpus_text(SWITCH))
    assert (frag.link_cap, frag.link_status) == (dev.link_cap, dev.link_status)
    assert frag.link_status is not None and frag.link_status.speed_status == "downgraded"
    assert (frag.aspm_control, frag.target_speed_gts) == ("Disabled", 32.0)


def test_grep_lnksta_over_many_devices() -> None:
    """`lspci -vvv | grep LnkSta` of the whole capture: one fragment per device with a link."""
    lines = [ln for ln in corpus_text(VVV).splitlines() if "LnkSta" in ln]
    frags = parse_lspci_lnk("\n".join(lines) + "\n")
    with_sta = [d for d in parse_lspci(corpus_text(VVV)).devices if d.link_status is not None]
    assert [f.link_status for f in frags] == [d.link_status for d in with_sta]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("", id="empty"),
        pytest.param("Lorem ipsum dolor sit amet\n", id="garbage"),
        pytest.param("\x00\xff\xfe", id="binary"),
        pytest.param(cut_corpus(GPU), id="truncated"),
        pytest.param(corpus_text(VVV)[:4000], id="whole-lspci-not-a-fragment"),
        pytest.param("\t\tLnkSta:\tSpeed 32GT/s (ok), Wid\n", id="cut-lnksta"),
    ],
)
def test_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_lspci_lnk(bad)
