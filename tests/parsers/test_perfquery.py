"""perfquery parser: -x on HCA and switch, -E rcv error details, broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.perfquery import parse_perfquery, parse_perfquery_extended

from tests.parsers.conftest import CORPUS, check_expected, corpus_text

FILES = sorted(p.name for p in (CORPUS / "net").glob("perfquery__*"))
HCA = "perfquery__x-extended-edr-hca.txt"
SWITCH = "perfquery__x-extended-edr-switch-allports.txt"
RCV = "perfquery__E-rcverror-details-edr-switch.txt"


@pytest.mark.parametrize("name", FILES)
def test_corpus_expected(name: str) -> None:
    check_expected("perfquery", name, parse_perfquery(corpus_text(f"net/{name}")))


def test_corpus_count() -> None:
    assert len(FILES) == 3


def test_extended_hca() -> None:
    (port,) = parse_perfquery(corpus_text(f"net/{HCA}")).ports
    assert (port.kind, port.lid, port.port) == ("Port extended counters", 134, 1)
    assert (port.cap_mask, port.cap_mask2) == ("0x5A00", "0x0000000")
    assert port.counters["PortXmitData"] == 9049592493976
    assert port.counters["CounterSelect"] == 0  # 0x0000
    assert port.counters["SymbolErrorCounter"] == 0 and port.counters["QP1Dropped"] == 0


def test_switch_two_ports() -> None:
    ports = parse_perfquery(corpus_text(f"net/{SWITCH}")).ports
    assert [(p.lid, p.port) for p in ports] == [(1719, 1), (1719, 2)]
    assert [p.counters["PortXmitWait"] for p in ports] == [22730501, 36510964]


def test_rcv_error_details() -> None:
    (port,) = parse_perfquery(corpus_text(f"net/{RCV}")).ports
    assert port.kind == "PortRcvErrorDetails counters" and port.cap_mask is None
    assert port.counters["PortLoopingErrors"] == 0 and len(port.counters) == 8


def test_error_lines_are_quoted() -> None:
    text = "ibwarn: [1234] mad_rpc: _do_madrpc failed; dport (Lid 12)\n"
    text += "perfquery: iberror: failed: perfquery\n"
    with pytest.raises(ParseError, match="ibwarn"):
        parse_perfquery(text)


@pytest.mark.parametrize(
    "text",
    ["", "garbage words\n", "\x00\xff\xfe", "PortXmitData:.......1\n", "CA 'mlx5_0'\n"],
    ids=["empty", "garbage", "binary", "counter-without-header", "ibstat-output"],
)
def test_broken_input(text: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_perfquery(text)
    assert exc.value.tool == "perfquery"


@pytest.mark.parametrize("name", FILES)
def test_truncated(name: str) -> None:
    text = corpus_text(f"net/{name}")
    with pytest.raises(ParseError):
        parse_perfquery(text[: int(len(text) * 0.4)])


def test_truncated_at_line_boundary() -> None:
    text = corpus_text(f"net/{SWITCH}")
    with pytest.raises(ParseError, match="lacks .*QP1Dropped.*truncated"):
        parse_perfquery(text[: text.index("PortXmitWait", text.index("port 2"))])


def test_extended_switch_ports() -> None:
    ports = parse_perfquery_extended(corpus_text(f"net/{SWITCH}"))
    assert [(p.lid, p.port, p.counters["PortXmitWait"]) for p in ports] == [
        (1719, 1, 22730501),
        (1719, 2, 36510964),
    ]
    assert ports[0].counters["SymbolErrorCounter"] == 0
    assert ports[0].counters["PortXmitData"] == 36298026860928


def test_extended_of_several_lids_and_refusals() -> None:
    # a loop over switches prints one answer after the other
    two = parse_perfquery_extended(corpus_text(f"net/{HCA}") + corpus_text(f"net/{SWITCH}"))
    assert [(p.lid, p.port) for p in two] == [(134, 1), (1719, 1), (1719, 2)]
    with pytest.raises(ParseError, match="not per-port -x by LID"):
        parse_perfquery_extended(corpus_text(f"net/{RCV}"))
    text = corpus_text(f"net/{SWITCH}")
    with pytest.raises(ParseError, match="port 1 printed twice"):
        parse_perfquery_extended(text + text)


def test_extended_refuses_a_block_without_error_counters() -> None:
    text = corpus_text(f"net/{HCA}")
    cut = text[: text.index("CounterSelect2")]
    with pytest.raises(ParseError, match="lacks SymbolErrorCounter"):
        parse_perfquery_extended(cut)
