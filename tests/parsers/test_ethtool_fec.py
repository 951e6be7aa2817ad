"""`ethtool --show-fec` parser: the ice capture, the older label, per-lane lines, bad input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.ethtool_fec import parse_ethtool_fec

from tests.parsers.conftest import check_expected, corpus_text, cut_corpus

ICE = (
    "net/ethtool_show-fec__intel-ice-I-statistics-supported-configured-auto-rs-baser-active-rs.txt"
)


def test_ice_expected() -> None:
    fec = parse_ethtool_fec(corpus_text(ICE))
    check_expected("ethtool_show_fec", ICE, fec)
    assert (fec.ifname, fec.configured, fec.active) == (
        "ens21f0np0",
        ("Auto", "RS", "BaseR"),
        ("RS",),
    )
    assert dict(fec.statistics or ()) == {"corrected_blocks": 0, "uncorrectable_blocks": 0}


def test_without_statistics_is_none_and_older_label() -> None:
    # The ice capture's first three lines are what `--show-fec` without -I prints; the label of
    # older ethtool ("Configured FEC encodings:") is the only other one the source has.
    head = corpus_text(ICE).splitlines()[:3]
    old = "\n".join([head[0], head[1].replace("Supported/Configured", "Configured"), head[2]])
    fec = parse_ethtool_fec(old + "\n")
    assert (fec.configured_label, fec.statistics) == ("Configured", None)


def test_per_lane_lines_do_not_count_as_totals() -> None:
    lanes = corpus_text(ICE).replace(
        "corrected_blocks: 0\n", "corrected_blocks: 3\n    Lane 0: 2\n    Lane 1: 1\n"
    )
    assert dict(parse_ethtool_fec(lanes).statistics or ())["corrected_blocks"] == 3


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("", id="empty"),
        pytest.param("Lorem ipsum dolor sit amet\n", id="garbage"),
        pytest.param("\x00\xff\xfe", id="binary"),
        pytest.param("netlink error: Operation not supported\n", id="netlink-error"),
        pytest.param(cut_corpus(ICE), id="truncated"),
        pytest.param(cut_corpus(ICE, at_line_end=True), id="truncated-line-end"),
        pytest.param(corpus_text(ICE).split("  corrected")[0], id="statistics-without-counter"),
        pytest.param(corpus_text(ICE) + "  corrected_blocks: 1\n", id="counter-twice"),
    ],
)
def test_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_ethtool_fec(bad)
