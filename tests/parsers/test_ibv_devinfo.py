"""ibv_devinfo / ibv_devices parsers: every capture in the corpus, -v extras, broken input."""

from __future__ import annotations

from typing import Any

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.ibv_devinfo import parse_ibv_devices, parse_ibv_devinfo

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

DEVINFO = sorted(p.name for p in (CORPUS / "net").glob("ibv_devinfo__*"))
DEVICES = sorted(p.name for p in (CORPUS / "net").glob("ibv_devices__*"))
CX4LX = "ibv_devinfo__cx4lx-4dev-fw14-roce-ethernet-one-port-down-complete.txt"
CX7 = "ibv_devinfo__cx7-ndr-port-down-mt0000000838-excerpt.txt"
VERBOSE = "ibv_devinfo__v-cx4-fw12-device-cap-flags-excerpt.txt"

# Port block of a real `ibv_devinfo -v` (rdma-core, tab layout; a ConnectX RoCE port as posted
# in a public RoCE write-up), used to complete the -v excerpt, which the stored copy cut inside
# the device_cap_flags list before any port block.
VERBOSE_TAIL = (
    "\tnum_comp_vectors:\t\t63\n"
    "\tcompletion_timestamp_mask not supported\n"
    "\trss_caps:\n"
    "\t\tmax_rwq_indirection_tables:\t\t\t524288\n"
    "\t\tsupported_qp:\n"
    "\t\t\t\t\tSUPPORT_RAW_PACKET\n"
    "\t\tport:\t1\n"
    "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
    "\t\t\tmax_mtu:\t\t4096 (5)\n"
    "\t\t\tactive_mtu:\t\t4096 (5)\n"
    "\t\t\tsm_lid:\t\t\t0\n"
    "\t\t\tport_lid:\t\t0\n"
    "\t\t\tport_lmc:\t\t0x00\n"
    "\t\t\tlink_layer:\t\tEthernet\n"
    "\t\t\tmax_vl_num:\t\tinvalid value (0)\n"
    "\t\t\tactive_width:\t\t2X (16)\n"
    "\t\t\tactive_speed:\t\t50.0 Gbps (64)\n"
    "\t\t\tphys_state:\t\tLINK_UP (5)\n"
    "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0ac0:ebff:fef0:28b2, RoCE v1\n"
    "\t\t\tGID[  3]:\t\t::ffff:27.105.179.3, RoCE v2\n"
)


def _facts_or_error(fn: Any, text: str) -> Any:
    """Facts, or the ParseError as data, so error outcomes are reviewed specs too."""
    try:
        return fn(text)
    except ParseError as exc:
        return {"parse_error": {"tool": exc.tool, "reason": exc.reason}}


@pytest.mark.parametrize("name", DEVINFO)
def test_ibv_devinfo_corpus_expected(name: str) -> None:
    facts = _facts_or_error(parse_ibv_devinfo, corpus_text(f"net/{name}"))
    check_expected("ibv_devinfo", name, facts)


@pytest.mark.parametrize("name", DEVICES)
def test_ibv_devices_corpus_expected(name: str) -> None:
    check_expected("ibv_devices", name, parse_ibv_devices(corpus_text(f"net/{name}")))


def test_corpus_counts() -> None:
    assert len(DEVINFO) == 3 and len(DEVICES) == 1


def test_tab_layout_four_devices_one_down() -> None:
    report = parse_ibv_devinfo(corpus_text(f"net/{CX4LX}"))
    assert [d.hca_id for d in report.devices] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    states = {d.hca_id: d.ports[0].state_code for d in report.devices}
    assert states == {"mlx5_0": 4, "mlx5_1": 1, "mlx5_2": 4, "mlx5_3": 4}
    dev = report.devices[0]
    assert (dev.board_id, dev.vendor_part_id) == ("MT_2420110034", 4117)
    assert dev.transport == "InfiniBand"
    assert dev.node_guid == "0c42a103004029a0"
    port = dev.ports[0]
    assert (port.max_mtu_bytes, port.active_mtu_bytes, port.link_layer) == (4096, 1024, "Ethernet")
    assert port.rate is None  # plain ibv_devinfo prints no active_width/active_speed
    assert {d.fw_ver for d in report.devices} == {"14.28.2006", "14.32.1010"}


def test_space_layout_port_down_lid_65535() -> None:
    dev = parse_ibv_devinfo(corpus_text(f"net/{CX7}")).devices[0]
    assert dev.board_id == "MT_0000000838" and dev.vendor_part_id == 4129
    assert (dev.ports[0].state, dev.ports[0].state_code) == ("PORT_DOWN", 1)
    assert dev.ports[0].port_lid == 65535 and dev.ports[0].link_layer == "InfiniBand"


def test_verbose_excerpt_without_ports_is_truncated() -> None:
    with pytest.raises(ParseError, match="phys_port_cnt is 1 but 0 port blocks"):
        parse_ibv_devinfo(corpus_text(f"net/{VERBOSE}"))


def test_verbose_device_cap_flags_and_port_rate() -> None:
    dev = parse_ibv_devinfo(corpus_text(f"net/{VERBOSE}") + VERBOSE_TAIL).devices[0]
    assert dev.device_cap_flags_mask == "0xed721c36"
    assert dev.device_cap_flags == (
        "BAD_PKEY_CNTR",
        "BAD_QKEY_CNTR",
        "AUTO_PATH_MIG",
        "CHANGE_PHY_PORT",
        "PORT_ACTIVE_EVENT",
        "SYS_IMAGE_GUID",
        "RC_RNR_NAK_GEN",
        "MEM_WINDOW",
        "XRC",
        "MEM_MGT_EXTENSIONS",
    )
    assert dev.extra["max_qp"] == "262144" and dev.extra["num_comp_vectors"] == "63"
    assert dev.extra["rss_caps.max_rwq_indirection_tables"] == "524288"
    assert dev.flag_lists == {"rss_caps.supported_qp": ("SUPPORT_RAW_PACKET",)}
    assert dev.notes == ("completion_timestamp_mask not supported",)
    port = dev.ports[0]
    assert (port.phys_state, port.phys_state_code) == ("LINK_UP", 5)
    assert port.rate is not None
    assert (port.rate.width_lanes, port.rate.speed, port.rate.lane_gbps) == (2, "HDR", 50)
    assert port.rate.rate_gbps == 100
    assert [(g.index, g.gid_type) for g in port.gids] == [(0, "RoCE v1"), (3, "RoCE v2")]
    assert port.gids[1].gid == "::ffff:27.105.179.3"
    assert port.extra == {"max_vl_num": "invalid value (0)"}


def test_verbose_port_missing_phys_state_is_truncated() -> None:
    text = corpus_text(f"net/{VERBOSE}") + VERBOSE_TAIL.split("\t\t\tactive_width")[0]
    with pytest.raises(ParseError, match="missing phys_state"):
        parse_ibv_devinfo(text)


def test_ibv_devices_tabs() -> None:
    rows = parse_ibv_devices(corpus_text(f"net/{DEVICES[0]}")).devices
    assert [(r.device, r.node_guid) for r in rows][:2] == [
        ("mlx5_0", "0c42a103004029a0"),
        ("mlx5_1", "0c42a103004029a1"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage text\nmore garbage\n",
        "\x00\x01\xff\xfe",
        "No IB devices found\n",
        "CA 'mlx5_0'\n\tCA type: MT4129\n",
    ],
    ids=["empty", "garbage", "binary", "no-devices-message", "ibstat-output"],
)
def test_ibv_devinfo_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ibv_devinfo(text)
    assert exc.value.tool == "ibv_devinfo"


def test_ibv_devinfo_truncated() -> None:
    text = corpus_text(f"net/{CX4LX}")
    with pytest.raises(ParseError) as exc:
        parse_ibv_devinfo(text[: int(len(text) * 0.4)])  # cut inside mlx5_1's phys_port_cnt
    assert exc.value.tool == "ibv_devinfo"
    with pytest.raises(ParseError, match="truncated"):
        parse_ibv_devinfo(text[: text.index("\t\tport:\t1", text.index("mlx5_3"))])


@pytest.mark.parametrize(
    "text",
    ["", "garbage\n", "\x00\xff", corpus_text(f"net/{CX7}"), "    device  \t   node GUID\n"],
    ids=["empty", "garbage", "binary", "ibv_devinfo-output", "header-only-no-dashes"],
)
def test_ibv_devices_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ibv_devices(text)
    assert exc.value.tool == "ibv_devices"


def test_ibv_devices_truncated_row() -> None:
    text = corpus_text(f"net/{DEVICES[0]}")
    with pytest.raises(ParseError):
        parse_ibv_devices(text[: int(len(text) * 0.4)])
