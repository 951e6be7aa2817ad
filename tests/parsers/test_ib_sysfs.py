"""/sys/class/infiniband parser: grep listing and ttar trees from the corpus, quirks, bad input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.ib_sysfs import SYSFS_GATHER_COMMAND, parse_ib_sysfs

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

FILES = sorted(p.name for p in (CORPUS / "net").glob("sysfs__*"))
GREP = "sysfs__infiniband-h100-cx7-ndr400-bf3-bond-gpud-fixture-grep.txt"
NODE_EXPORTER = "sysfs__infiniband-node-exporter-fixture-i40iw-mlx4.ttar.txt"
PROCFS = "sysfs__infiniband-procfs-fixture-hfi1-mlx4-mlx5.ttar.txt"


@pytest.mark.parametrize("name", FILES)
def test_corpus_expected(name: str) -> None:
    check_expected("ib_sysfs", name, parse_ib_sysfs(corpus_text(f"net/{name}")))


def test_corpus_count() -> None:
    assert len(FILES) == 3


def test_grep_listing_h100() -> None:
    facts = parse_ib_sysfs(corpus_text(f"net/{GREP}"))
    assert [d.name for d in facts.devices] == [
        "mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9",
        "mlx5_bond_0",
    ]  # fmt: skip
    cx7 = facts.devices[0]
    assert (cx7.hca_type, cx7.fw_ver, cx7.board_id) == ("MT4129", "28.41.1000", "MT_0000000838")
    port = cx7.ports[0]
    assert (port.state, port.state_code, port.phys_state, port.phys_state_code) == (
        "ACTIVE", 4, "LinkUp", 5,
    )  # fmt: skip
    assert (port.rate.rate_gbps, port.rate.width_lanes, port.rate.speed) == (400, 4, "NDR")
    assert port.counters["excessive_buffer_overrun_errors"] == 15
    assert port.counters["port_rcv_data"] == 230539874932483  # raw, in 4-octet words
    assert port.hw_counters["roce_adp_retrans"] == 3
    assert len(port.counters) == 21 and len(port.hw_counters) == 26
    assert facts.devices[1].ports[0].counters["link_downed"] == 255
    bond = facts.devices[-1]
    assert bond.ports[0].link_layer == "Ethernet"
    # an Ethernet (RoCE) port reports an IB-style rate string: link layer stays Ethernet
    assert (bond.ports[0].rate.rate_gbps, bond.ports[0].rate.width_lanes) == (200, 2)
    assert bond.ports[0].rate.speed == "NDR"


def test_no_pma_counters_are_none_and_flagged() -> None:
    facts = parse_ib_sysfs(corpus_text(f"net/{NODE_EXPORTER}"))
    i40iw = facts.devices[0]
    assert i40iw.name == "i40iw0"
    port = i40iw.ports[0]
    assert port.counters_no_pma is True
    assert set(port.counters.values()) == {None}
    assert port.rate.speed is None and port.rate.lane_gbps == 2.5  # '10 Gb/sec (4X)'
    mlx4 = facts.devices[1]
    assert [p.port for p in mlx4.ports] == [1, 2]
    assert mlx4.ports[0].counters_no_pma is False
    assert mlx4.ports[0].counters["port_xmit_wait"] == 4294967295
    assert mlx4.ports[0].counters_ext["port_rcv_data_64"] == 4631917  # pre-4.5 counters_ext


def test_procfs_ttar_quirks() -> None:
    facts = parse_ib_sysfs(corpus_text(f"net/{PROCFS}"))
    by_name = {d.name: d for d in facts.devices}
    assert by_name["hfi1_0"].hca_type is None  # hfi1 exposes no hca_type
    assert by_name["hfi1_0"].board_id.startswith("HPE 100Gb 1-port OP101")  # type: ignore[union-attr]
    # `Lines: 2` record (value plus an empty line) reads as the value
    assert by_name["mlx4_0"].ports[1].link_layer == "InfiniBand"
    # `...d23bEOF`: ttar marks a file without trailing newline
    assert by_name["mlx5_0"].node_guid == "0a7fbc1245efd23b"
    # edited fixture: phys_state reads '4: ACTIVE'; the printed code is kept, so a check
    # expecting LinkUp (5) fails instead of passing on a made-up value
    port = by_name["mlx5_0"].ports[0]
    assert (port.phys_state, port.phys_state_code) == ("ACTIVE", 4)
    assert (port.rate.rate_gbps, port.rate.width_lanes, port.rate.speed) == (25, 1, "EDR")


def test_absolute_paths_and_crlf() -> None:
    text = "\r\n".join(
        "/sys/class/infiniband/" + line for line in corpus_text(f"net/{GREP}").splitlines()
    )
    assert parse_ib_sysfs(text) == parse_ib_sysfs(corpus_text(f"net/{GREP}"))


def test_gather_command_names_every_file_read() -> None:
    for part in ("fw_ver", "board_id", "hca_type", "ports/*/state", "ports/*/rate",
                 "ports/*/counters", "ports/*/hw_counters", "grep -H -r ."):  # fmt: skip
        assert part in SYSFS_GATHER_COMMAND


def test_bad_counter_value() -> None:
    text = "mlx5_0/ports/1/state:4: ACTIVE\nmlx5_0/ports/1/phys_state:5: LinkUp\n"
    text += "mlx5_0/ports/1/rate:400 Gb/sec (4X NDR)\nmlx5_0/ports/1/counters/symbol_error:lots\n"
    with pytest.raises(ParseError, match="symbol_error"):
        parse_ib_sysfs(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "random words\nwith no structure\n",
        "\x00\x01\x02\xff\xfe",
        "CA 'mlx5_0'\n\tCA type: MT4129\n",
        "a/b:c\n",
    ],
    ids=["empty", "garbage", "binary", "ibstat-output", "unknown-paths-only"],
)
def test_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ib_sysfs(text)
    assert exc.value.tool == "ib_sysfs"


def test_truncated_at_line_boundary() -> None:
    text = corpus_text(f"net/{GREP}")
    with pytest.raises(ParseError, match=r"mlx5_5 port 1: no state, phys_state, rate file"):
        parse_ib_sysfs(text[: text.index("mlx5_5/ports/1/link_layer")])


@pytest.mark.parametrize("name", FILES)
def test_truncated(name: str) -> None:
    text = corpus_text(f"net/{name}")
    with pytest.raises(ParseError) as exc:
        parse_ib_sysfs(text[: int(len(text) * 0.4)])
    assert exc.value.tool == "ib_sysfs"


def test_a_port_named_by_a_non_ascii_digit_is_not_a_port() -> None:
    # "²".isdigit() is True, int("²") raises: such a directory is not a port, never a traceback.
    text = corpus_text(f"net/{GREP}") + "mlx5_0/ports/\u00b2/state:4: ACTIVE\n"
    assert parse_ib_sysfs(text) == parse_ib_sysfs(corpus_text(f"net/{GREP}"))
