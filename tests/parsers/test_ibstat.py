"""ibstat / ibstatus parsers: every capture in the corpus, its quirks, and broken input."""

from __future__ import annotations

from typing import Any

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.ibstat import parse_ibstat, parse_ibstatus

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

IBSTAT = sorted(p.name for p in (CORPUS / "net").glob("ibstat__*"))
IBSTATUS = sorted(p.name for p in (CORPUS / "net").glob("ibstatus__*"))
PANIC = "ibstat__a100-azure-cx6vf-mt4124-hdr200-ibpanic-exit255.txt"
B300 = "ibstat__b300-dell-xe9780-cx8-mt4131-down-cx7-mt4129-100g.txt"
BROADCOM = "ibstat__broadcom-bnxt-re-roce-100g-excerpt.txt"
ROCE400 = "ibstat__h100-cx7-roce400-plus-cx6dx-100g-ethernet.txt"
DOWN = "ibstat__h100-cx7-ndr400-ib-cx6dx-ports-down.txt"
BOND = "ibstat__h100-cx7-ndr400-ib-plus-bluefield3-bond-roce200.txt"
STATUS = "ibstatus__a100-azure-cx6vf-hdr200-8port.txt"


def _facts_or_error(fn: Any, text: str) -> Any:
    """Facts, or the ParseError as data, so error outcomes are reviewed specs too."""
    try:
        return fn(text)
    except ParseError as exc:
        return {"parse_error": {"tool": exc.tool, "reason": exc.reason}}


@pytest.mark.parametrize("name", IBSTAT)
def test_ibstat_corpus_expected(name: str) -> None:
    check_expected("ibstat", name, _facts_or_error(parse_ibstat, corpus_text(f"net/{name}")))


@pytest.mark.parametrize("name", IBSTATUS)
def test_ibstatus_corpus_expected(name: str) -> None:
    check_expected("ibstatus", name, parse_ibstatus(corpus_text(f"net/{name}")))


def test_corpus_counts() -> None:
    assert len(IBSTAT) == 7 and len(IBSTATUS) == 1


def test_ibpanic_is_an_error_quoting_the_message() -> None:
    with pytest.raises(ParseError) as exc:
        parse_ibstat(corpus_text(f"net/{PANIC}"))
    assert exc.value.tool == "ibstat"
    assert "stat of IB device 'mlx5_8' failed: No such file or directory" in exc.value.reason


def test_down_ports_keep_rate_10_and_lid_65535() -> None:
    report = parse_ibstat(corpus_text(f"net/{B300}"))
    down = [c for c in report.cas if c.ca_type == "MT4131"]
    assert len(down) == 7
    for ca in down:
        port = ca.ports[0]
        assert (port.state, port.state_code) == ("Down", 1)
        assert (port.phys_state, port.phys_state_code) == ("Disabled", 3)
        assert port.rate_gbps == 10 and port.base_lid == 65535
    active = [c for c in report.cas if c.ca_type == "MT4129"]
    assert {c.system_image_guid for c in active} == {"7425540300353de9"}
    assert all(c.ports[0].rate_gbps == 100 for c in active)


def test_cas_sorted_naturally() -> None:
    names = [c.name for c in parse_ibstat(corpus_text(f"net/{ROCE400}")).cas]
    assert names == [f"mlx5_{i}" for i in range(12)]


def test_roce_ports_have_base_lid_0_and_ethernet_link_layer() -> None:
    report = parse_ibstat(corpus_text(f"net/{ROCE400}"))
    for ca in report.cas:
        assert ca.ports[0].link_layer == "Ethernet"
        assert ca.ports[0].base_lid == 0
    assert {c.ports[0].rate_gbps for c in report.cas} == {400, 100}


def test_mixed_ib_and_down_ethernet() -> None:
    report = parse_ibstat(corpus_text(f"net/{DOWN}"))  # no trailing newline in this file
    by_name = {c.name: c for c in report.cas}
    assert by_name["mlx5_0"].ports[0].link_layer == "InfiniBand"
    assert by_name["mlx5_0"].ports[0].sm_lid == 334
    assert by_name["mlx5_2"].ports[0].state == "Down"
    assert by_name["mlx5_2"].ports[0].rate_gbps == 40
    assert by_name["mlx5_9"].ports[0].link_layer == "InfiniBand"


def test_space_indented_bond_device() -> None:
    bond = {c.name: c for c in parse_ibstat(corpus_text(f"net/{BOND}")).cas}["mlx5_bond_0"]
    assert bond.ca_type == "MT41692" and bond.hw_version == "1"
    assert bond.ports[0].link_layer == "Ethernet" and bond.ports[0].rate_gbps == 200


def test_broadcom_free_text_ca_type_and_cut_port() -> None:
    ca = parse_ibstat(corpus_text(f"net/{BROADCOM}")).cas[0]
    assert ca.ca_type == "Broadcom NetXtreme-C/E RoCE Driver HCA"
    assert ca.hw_version == "0x14e4"
    assert ca.ports[0].port_guid is None and ca.ports[0].link_layer is None


def test_sdr_and_fdr10_rate_spellings() -> None:
    text = corpus_text(f"net/{BROADCOM}")
    assert parse_ibstat(text.replace("Rate: 100", "Rate: 2.5")).cas[0].ports[0].rate_gbps == 2.5
    port = parse_ibstat(text.replace("Rate: 100", "Rate: 40 (FDR10)")).cas[0].ports[0]
    assert (port.rate_gbps, port.rate_note) == (40, "FDR10")


def test_crlf_and_ansi_tolerated() -> None:
    text = corpus_text(f"net/{BROADCOM}").replace("\n", "\r\n")
    text = text.replace("Active", "\x1b[32mActive\x1b[0m")
    assert parse_ibstat(text) == parse_ibstat(corpus_text(f"net/{BROADCOM}"))


def test_ibstatus_ethernet_vf_unknown_gid() -> None:
    ports = {p.device: p for p in parse_ibstatus(corpus_text(f"net/{STATUS}")).ports}
    eth = ports["mlx5_8"]
    assert eth.default_gid is None and eth.link_layer == "Ethernet"
    assert (eth.rate.rate_gbps, eth.rate.width_lanes, eth.rate.speed) == (40, 4, "QDR")
    ib = ports["mlx5_0"]
    assert ib.base_lid == 0x33BF and ib.sm_lid == 1
    assert (ib.state_code, ib.phys_state_code) == (4, 5)
    assert (ib.rate.rate_gbps, ib.rate.width_lanes, ib.rate.speed, ib.rate.lane_gbps) == (
        200,
        4,
        "HDR",
        50,
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n",
        "hello world\nthis is not ibstat\n",
        "\x00\x01\x02garbage\xff\xfe",
        "Infiniband device 'mlx5_0' port 1 status:\n\tstate:\t4: ACTIVE\n",
    ],
    ids=["empty", "blank", "garbage", "binary", "ibstatus-output"],
)
def test_ibstat_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ibstat(text)
    assert exc.value.tool == "ibstat"


@pytest.mark.parametrize("name", [ROCE400, DOWN, B300])
def test_ibstat_truncated(name: str) -> None:
    text = corpus_text(f"net/{name}")
    with pytest.raises(ParseError) as exc:
        parse_ibstat(text[: int(len(text) * 0.4)])
    assert exc.value.tool == "ibstat"


def test_ibstat_truncated_before_first_port() -> None:
    text = corpus_text(f"net/{ROCE400}")
    with pytest.raises(ParseError, match="truncated"):
        parse_ibstat(text[: text.index("Port 1:")])


@pytest.mark.parametrize(
    "text",
    ["", "garbage\n", "\x00\xff", corpus_text(f"net/{BROADCOM}")],
    ids=["empty", "garbage", "binary", "ibstat-output"],
)
def test_ibstatus_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ibstatus(text)
    assert exc.value.tool == "ibstatus"


def test_ibstatus_truncated() -> None:
    text = corpus_text(f"net/{STATUS}")
    with pytest.raises(ParseError, match="truncated"):
        parse_ibstatus(text[: int(len(text) * 0.4)])
