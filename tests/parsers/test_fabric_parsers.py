"""Fabric parsers: ibnetdiscover -p, sminfo, saquery SMIR, sysfs pkeys (captures, formats)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.ib_pkeys import PkeyEntry, parse_pkeys
from nodegate.parsers.ibnetdiscover import PortEnd, PortLine, parse_ibnetdiscover_ports
from nodegate.parsers.saquery import parse_saquery_smir
from nodegate.parsers.sminfo import SmInfo, parse_sminfo

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

FORMATS = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
IBND = sorted(p.name for p in (CORPUS / "net").glob("ibnetdiscover__*"))
EDR = "ibnetdiscover__edr-ports-excerpt-osc.txt"
HDR = "ibnetdiscover__hdr-ports-excerpt-sharp-aggnode.txt"
SMINFO = "sminfo__master-prio14-mellanox-edr-era-notes.txt"
SMIR = "saquery-SMIR__master-and-standby-written-from-saquery-c.txt"
PKEYS = "pkeys__grep-H-two-ports-full-limited-written-from-kernel-sysfs-c.txt"


def _format(name: str) -> str:
    return (FORMATS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", IBND)
def test_ibnetdiscover_corpus_expected(name: str) -> None:
    check_expected("ibnetdiscover", name, parse_ibnetdiscover_ports(corpus_text(f"net/{name}")))


def test_corpus_counts() -> None:
    assert len(IBND) == 2


def test_ibnetdiscover_linked_and_unlinked_ports() -> None:
    lines = parse_ibnetdiscover_ports(corpus_text(f"net/{EDR}")).lines
    assert lines[0] == PortLine(
        local=PortEnd("CA", 134, 1, "0x7cfe9003003b4bde", "o0001 HCA-1"),
        width="4x",
        speed="EDR",
        remote=PortEnd("SW", 1719, 10, "0x7cfe9003009ce5b0", "ib-i1l1s01"),
    )
    # `SW 2052 37 ... 4x ???` then 36 blanks and the description: no partner, speed unknown
    assert lines[7] == PortLine(
        PortEnd("SW", 2052, 37, "0x506b4b03005c2740", "ib-i4l1s01"), "4x", None, None
    )
    assert (lines[8].speed, lines[8].remote) == ("SDR", None)


def test_ibnetdiscover_descriptions_keep_their_blanks() -> None:
    lines = parse_ibnetdiscover_ports(corpus_text(f"net/{HDR}")).lines
    assert lines[0].remote is not None and lines[0].remote.description == "5FB0405-leaf-IB01 "
    assert lines[3].local.description == " 5FB0406-spine-IB02 "
    assert (lines[2].local.lid, lines[2].local.port) == (24, 1)  # 'SW    24 1' (narrow port)


def test_ibnetdiscover_ambiguous_descriptions() -> None:
    line = "CA 5 1 0x0000000000000005 4x NDR - SW 7 3 0x0000000000000007 ( 'a' - 'b' - 'c' )\n"
    with pytest.raises(ParseError, match="cannot be told apart"):
        parse_ibnetdiscover_ports(line)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage words\n",
        "\x00\xff\xfe",
        corpus_text("net/iblinkinfo__hdr-mqm8700-edr-hcas-sharp-aggnode-excerpt.txt"),
        "CA 5 1 0x05 4x NDR                                    'short guid'\n",
        "CA 5 1 0x0000000000000005 3x NDR                                    'odd width'\n",
        "SW 5 1 0x0000000000000005 4x NDR - SW 7 3 0x0000000000000007 ( 'x' - 'y' ) \x1b\n",
        "CA 5 1 0x0000000000000005 4x NDR " + "'" + "x" * 400 + "'\n",
    ],
    ids=["empty", "garbage", "binary", "iblinkinfo", "short-guid", "width", "trailer", "long"],
)
def test_ibnetdiscover_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ibnetdiscover_ports(text)
    assert exc.value.tool == "ibnetdiscover"


def test_ibnetdiscover_truncated_mid_line() -> None:
    text = corpus_text(f"net/{EDR}")
    with pytest.raises(ParseError, match="line 1"):
        parse_ibnetdiscover_ports(text[:60])


def test_sminfo_capture() -> None:
    facts = parse_sminfo(corpus_text(f"net/{SMINFO}"))
    check_expected("sminfo", SMINFO, facts)
    assert facts == SmInfo(37, "0x7cfe90030016aef1", 4484381, 14, "MASTER")


def test_sminfo_short_guid_is_padded_and_states_named() -> None:
    text = "sminfo: sm lid 1 sm guid 0x100001, activity count 506 priority 12 state 2 "
    text += "SMINFO_STANDBY"
    assert parse_sminfo(text) == SmInfo(1, "0x0000000000100001", 506, 12, "STANDBY")
    text = "sminfo: sm lid 1 sm guid 0x1, activity count 0 priority 0 state 1 SMINFO_DISCOVER\n"
    assert parse_sminfo(text).state == "DISCOVERING"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\n",
        "ibwarn: [3104] mad_rpc: _do_madrpc failed; dport (Lid 1)\n"
        "sminfo: iberror: failed: query\n",
        "sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 14 state 3 SMINFO_STANDBY\n",
        "sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 99 state 3 SMINFO_MASTER\n",
        "sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 1 state 7 ???\n",
        "sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 1 state 3 SMINFO_MASTER\n" * 2,
        corpus_text(f"net/{SMINFO}")[:50],
    ],
    ids=["empty", "garbage", "iberror", "name-mismatch", "priority", "state", "twice", "cut"],
)
def test_sminfo_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_sminfo(text)
    assert exc.value.tool == "sminfo"


def test_saquery_smir_format() -> None:
    facts = parse_saquery_smir(_format(SMIR))
    check_expected("saquery_smir", SMIR, facts)
    assert facts == (
        SmInfo(1, "0x0c42a10300a40001", 58213, 14, "MASTER"),
        SmInfo(2, "0x0c42a10300a40101", 58190, 12, "STANDBY"),
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\n",
        "\x00\xff\xfe",
        "\t\tLID...................1\n",
        _format(SMIR).replace("SMState...............2", "SMState...............9"),
        _format(SMIR).replace("\t\tPriority..............12\n", ""),
        _format(SMIR)[: len(_format(SMIR)) * 2 // 5],
        corpus_text(f"net/{SMINFO}"),
    ],
    ids=["empty", "garbage", "binary", "no-record", "state", "missing", "truncated", "sminfo"],
)
def test_saquery_smir_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_saquery_smir(text)
    assert exc.value.tool == "saquery SMIR"


def test_pkeys_format() -> None:
    facts = parse_pkeys(_format(PKEYS))
    check_expected("pkeys", PKEYS, facts)
    assert facts == (
        PkeyEntry("mlx5_0", 1, 0, 0x7FFF, True),
        PkeyEntry("mlx5_0", 1, 1, 0x0001, True),
        PkeyEntry("mlx5_1", 1, 0, 0x7FFF, True),
        PkeyEntry("mlx5_1", 1, 1, 0x0001, False),
    )


def test_pkeys_sorted_naturally() -> None:
    text = "/sys/class/infiniband/mlx5_10/ports/1/pkeys/0:0xffff\n"
    text += "/sys/class/infiniband/mlx5_2/ports/1/pkeys/10:0x8002\n"
    text += "mlx5_2/ports/1/pkeys/2:0x8001\n"  # grep -r from /sys/class/infiniband
    assert [(e.device, e.index) for e in parse_pkeys(text)] == [
        ("mlx5_2", 2),
        ("mlx5_2", 10),
        ("mlx5_10", 0),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\n",
        "\x00\xff\xfe",
        "/sys/class/infiniband/mlx5_0/ports/1/pkeys/0:ffff\n",
        "/sys/class/infiniband/mlx5_0/ports/1/pkeys/0:0xfffff\n",
        "/sys/class/infiniband/mlx5_0/ports/1/pkeys/0:0xffff\n" * 2,
        "/sys/class/infiniband/mlx5_0/ports/1/gids/0:fe80:0000:0000:0000\n",
        "/sys/class/infiniband/mlx5_0/ports/1/pkeys/0:0xff",
    ],
    ids=["empty", "garbage", "binary", "no-0x", "wide", "twice", "gids", "cut"],
)
def test_pkeys_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_pkeys(text)
    assert exc.value.tool == "pkeys"
