"""Parsers of the roce stage: mlnx_qos, show_gids, ethtool, ethtool -S, rdma statistic, iproute2
JSON and grep'd kernel files, on corpus captures and written formats, plus broken input."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.ethtool import parse_ethtool, parse_ethtool_stats
from nodegate.parsers.file_values import parse_file_values
from nodegate.parsers.iproute_json import parse_ip_addr, parse_ip_routes, parse_ip_rules
from nodegate.parsers.mlnx_qos import parse_mlnx_qos
from nodegate.parsers.rdma_stat import parse_rdma_statistic
from nodegate.parsers.show_gids import parse_show_gids

from tests.parsers.conftest import CORPUS, check_expected, corpus_text, cut_corpus

FORMATS = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
QOS_CX5 = "mlnx_qos__cx5-100gbe-dcbx-firmware-trust-dscp-rx-buffer-pfc-buffer-row-ets-vendor.txt"
QOS_TRACE = "mlnx_qos__dscp-trust-pfc-prio3-tsa-vendor-with-set-x-trace.txt"
GIDS = sorted(p.name for p in (CORPUS / "net").glob("show_gids__*") if "excerpt" not in p.name)
GIDS_EXCERPT = "show_gids__macvlan-pod-gid-index-4-7-excerpt.txt"
ETHTOOL_S = sorted(p.name for p in (CORPUS / "net").glob("ethtool_S__*"))
ETHTOOL_E1000E = "ethtool__e1000e-1g-unprivileged-netlink-error-fixture.txt"
ETHTOOL_400G = "ethtool__mlx5-400gbe-link-up-written-from-ethtool-6.1-netlink-settings.txt"
RDMA_STAT = "rdma-statistic-show-link__mlx5-written-from-iproute2-rdma-stat-c.txt"
IP_ADDR = "ip-j-addr__iproute2-6.1.0-netns-veth-two-rails-mtu9000.json"
IP_ROUTE = "ip-j-route-table-all__iproute2-6.1.0-netns-two-rails-policy-tables.json"
IP_RULE = "ip-j-rule__iproute2-6.1.0-netns-two-rails-from-src-rules.json"


def fmt(name: str) -> str:
    return (FORMATS / name).read_text(encoding="utf-8")


def test_mlnx_qos_cx5_expected() -> None:
    q = parse_mlnx_qos(corpus_text(f"net/{QOS_CX5}"))
    check_expected("mlnx_qos", QOS_CX5, q)
    assert (q.trust, q.pfc_enabled, q.pfc_buffer) == ("dscp", (3,), (0, 0, 0, 1, 0, 0, 0, 0))
    assert q.dscp_to_prio[26] == 3 and q.dscp_to_prio[48] == 6 and len(q.dscp_to_prio) == 64
    tc3 = q.tc_of(3)
    assert tc3 is not None and (tc3.tc, tc3.tsa, tc3.bw_percent) == (3, "ets", 50)
    assert q.tc_of(6) is not None and q.tc_of(6).tsa == "vendor"  # type: ignore[union-attr]


def test_mlnx_qos_trace_block() -> None:
    """The capture is a `set -x` script run: the whole text is not one mlnx_qos output (an
    ERROR), its first mlnx_qos block is."""
    text = corpus_text(f"net/{QOS_TRACE}")
    with pytest.raises(ParseError, match="unrecognised line"):
        parse_mlnx_qos(text)
    lines = text.splitlines()
    start = lines.index("+ mlnx_qos -i eth4 --trust dscp") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("+ sudo"))
    q = parse_mlnx_qos("\n".join(lines[start:end]) + "\n")
    check_expected("mlnx_qos", QOS_TRACE, q)
    assert (q.dcbx_mode, q.pfc_enabled, q.pfc_buffer) == ("OS controlled", (3,), None)
    assert [(c.tc, c.priorities) for c in q.classes][:2] == [(0, (1,)), (1, (0,))]


def test_mlnx_qos_trust_pcp_without_dscp_map() -> None:
    text = corpus_text(f"net/{QOS_CX5}").replace("trust state: dscp", "trust state: pcp")
    text = "\n".join(ln for ln in text.splitlines() if "dscp" not in ln) + "\n"
    q = parse_mlnx_qos(text)
    assert (q.trust, dict(q.dscp_to_prio)) == ("pcp", {})


@pytest.mark.parametrize("bad", ["", "garbage\n\x00\n", cut_corpus(f"net/{QOS_CX5}", True)])
def test_mlnx_qos_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_mlnx_qos(bad)


@pytest.mark.parametrize("name", GIDS)
def test_show_gids_expected(name: str) -> None:
    check_expected("show_gids", name, parse_show_gids(corpus_text(f"net/{name}")))


def test_show_gids_corpus_count() -> None:
    assert len(GIDS) == 5


def test_show_gids_values() -> None:
    t = parse_show_gids(
        corpus_text("net/show_gids__cx5-100gbe-roce-v1-v2-ipv4-gid3-space-separated.txt")
    )
    e = t.at("mlx5_0", 1, 3)
    assert e is not None and (e.ipv4, e.roce_version, e.netdev) == ("192.168.6.132", 2, "mce0")
    last = t.entries[-1]
    assert (last.device, last.netdev, last.ipv4) == ("mlx5_1", None, None)
    empty = parse_show_gids(corpus_text("net/show_gids__empty-table-in-k8s-pod.txt"))
    assert empty.entries == ()


def test_show_gids_excerpt_is_cut() -> None:
    with pytest.raises(ParseError, match="truncated"):
        parse_show_gids(corpus_text(f"net/{GIDS_EXCERPT}"))


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "garbage\n",
        "DEV\tPORT\tINDEX\tGID\tIPv4\tVER\tDEV\nmlx5_0\t1\t0\tfe80::1\tv2\teth0\nn_gids_found=1\n",
        "DEV\tPORT\tINDEX\tGID\tIPv4\tVER\tDEV\nn_gids_found=3\n",
    ],
)
def test_show_gids_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_show_gids(bad)


def test_ethtool_e1000e_expected() -> None:
    s = parse_ethtool(corpus_text(f"net/{ETHTOOL_E1000E}"))
    check_expected("ethtool", ETHTOOL_E1000E, s)
    assert (s.interface, s.speed_mbps, s.link_detected) == ("eth0", 1000, True)
    assert s.warnings == ("netlink error: Operation not permitted",)
    assert s.fields["Current message level"] == "0x00000007 (7) drv probe link"


def test_ethtool_400g_format() -> None:
    s = parse_ethtool(fmt(ETHTOOL_400G))
    check_expected("ethtool", ETHTOOL_400G, s)
    assert (s.speed_mbps, s.link_detected, s.fields["Lanes"]) == (400000, True, "4")


@pytest.mark.parametrize(
    "bad",
    ["", "garbage\n", "Settings for x:\n\tSpeed: fast\n", "Settings for x:\n\tDuplex: Full\n"],
)
def test_ethtool_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_ethtool(bad)


def test_ethtool_unknown_speed() -> None:
    s = parse_ethtool("Settings for x:\n\tSpeed: Unknown!\n\tLink detected: no\n")
    assert (s.speed_mbps, s.link_detected) == (None, False)


@pytest.mark.parametrize("name", ETHTOOL_S)
def test_ethtool_stats_expected(name: str) -> None:
    check_expected("ethtool_S", name, parse_ethtool_stats(corpus_text(f"net/{name}")))


def test_ethtool_stats_values() -> None:
    s = parse_ethtool_stats(corpus_text(f"net/{ETHTOOL_S[1]}"))
    assert (s["rx_prio0_packets"], s["tx_prio3_bytes"], len(s)) == (419873392068, 0, 32)


@pytest.mark.parametrize("bad", ["", "NIC statistics:\n", "NIC statistics:\n  rx: many\n"])
def test_ethtool_stats_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_ethtool_stats(bad)


def test_rdma_statistic_format() -> None:
    got = parse_rdma_statistic(fmt(RDMA_STAT))
    check_expected("rdma_statistic", RDMA_STAT, got)
    assert list(got) == [("mlx5_0", 1)] and got[("mlx5_0", 1)]["np_cnp_sent"] == 0


@pytest.mark.parametrize(
    "bad",
    ["", "garbage\n", "link mlx5_0/1\n", "link mlx5_0/1 a 1 b\n", "link x/1 a 1\nlink x/1 a 2\n"],
)
def test_rdma_statistic_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_rdma_statistic(bad)


def test_ip_addr_capture() -> None:
    links = parse_ip_addr(fmt(IP_ADDR))
    check_expected("ip_addr", IP_ADDR, links)
    rail = {lk.ifname: lk for lk in links}["enp24s0np0"]
    assert (rail.mtu, rail.operstate, [str(a.interface) for a in rail.ipv4()]) == (
        9000,
        "UP",
        ["10.100.0.1/16"],
    )


def test_ip_routes_capture() -> None:
    routes = parse_ip_routes(fmt(IP_ROUTE))
    check_expected("ip_route", IP_ROUTE, routes)
    assert [(r.dst, r.dev, r.table) for r in routes[:3]] == [
        ("10.100.0.0/16", "enp24s0np0", "100"),
        ("10.101.0.0/16", "enp58s0np0", "101"),
        ("10.100.0.0/16", "enp24s0np0", "main"),
    ]


def test_ip_rules_capture() -> None:
    rules = parse_ip_rules(fmt(IP_RULE))
    check_expected("ip_rule", IP_RULE, rules)
    assert [(r.priority, r.src, r.table) for r in rules] == [
        (0, "all", "local"),
        (100, "10.100.0.1", "100"),
        (101, "10.101.0.1", "101"),
        (32766, "all", "main"),
        (32767, "all", "default"),
    ]


@pytest.mark.parametrize("bad", ["", "[{", "{}", "[1]", '[{"ifname": "x"}]'])
def test_iproute_json_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_ip_addr(bad)
    with pytest.raises(ParseError):
        parse_ip_rules(bad if bad != '[{"ifname": "x"}]' else '[{"src": "all"}]')


def test_file_values() -> None:
    text = (
        "/sys/class/net/e/ecn/roce_np/enable/3:1\n"
        "/sys/kernel/config/rdma_cm/m/ports/1/default_roce_mode:RoCE v2\n"
    )
    assert parse_file_values(text) == {
        "/sys/class/net/e/ecn/roce_np/enable/3": "1",
        "/sys/kernel/config/rdma_cm/m/ports/1/default_roce_mode": "RoCE v2",
    }
    for bad in ("garbage\n", "relative:1\n", "/a:1\n/a:2\n"):
        with pytest.raises(ParseError):
            parse_file_values(bad)


MANA = "net/rdma_statistic_p__azure-mana-vf-mana_0-26-port-counters-requester-timeout.txt"


def test_rdma_statistic_pretty_mana_expected() -> None:
    """The pretty layout (`-p`, and every run from iproute2 6.8) with MANA's own counter names:
    kept as printed, nothing mapped to mlx5 names, nothing made up as 0."""
    got = parse_rdma_statistic(corpus_text(MANA))
    check_expected("rdma_statistic", MANA, got)
    port = got[("mana_0", 1)]
    assert (len(port), port["requester_timeout"], port["current_rate"]) == (26, 45, 100000)
    assert "np_cnp_sent" not in port and "out_of_sequence" not in port


def test_rdma_statistic_both_layouts_read_the_same() -> None:
    one_line = fmt(RDMA_STAT)
    head, *pairs = one_line.split("\n")[0].split(" ")
    pretty = (
        " ".join([head, pairs[0]])
        + "\n"
        + "".join(f"    {pairs[i]} {pairs[i + 1]} \n" for i in range(1, len(pairs) - 1, 2))
    )
    assert parse_rdma_statistic(pretty) == parse_rdma_statistic(one_line)
    two = corpus_text(MANA) + corpus_text(MANA).replace("mana_0/1", "mana_1/1")
    assert list(parse_rdma_statistic(two)) == [("mana_0", 1), ("mana_1", 1)]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(cut_corpus(MANA), id="truncated"),
        pytest.param("    requester_timeout 45\n", id="counter-before-link"),
        pytest.param("link mana_0/1\nlink mana_1/1\n    a 1\n", id="link-without-counters"),
        pytest.param(corpus_text(MANA) + "    current_rate 1\n", id="counter-twice"),
    ],
)
def test_rdma_statistic_pretty_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_rdma_statistic(bad)
