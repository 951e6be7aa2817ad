"""`journalctl -u nvidia-fabricmanager` parser: header-less journal lines, markers, bad input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.fabricmanager import JournalLine, parse_fabricmanager_status
from nodegate.parsers.fabricmanager_journal import parse_fabricmanager_journal

from tests.parsers.conftest import check_expected, corpus_text, cut_corpus

START = (
    "gpu/journalctl-fabricmanager__"
    "ubuntu24.04-2x-rtx4090-start-script-pre-nvl5-nothing-to-do-exit-1.txt"
)
STATUS = (
    "gpu/systemctl-status-nvidia-fabricmanager__"
    "hgx-8gpu-driver590.48.01-start-script-nvswitch-nonfatal-22013-journal.txt"
)


def test_start_script_failure_expected() -> None:
    got = parse_fabricmanager_journal(corpus_text(START))
    check_expected("fabricmanager_journal", START, got)
    assert [(ln.ident, ln.pid) for ln in got.lines][-2:] == [
        ("nvidia-fabricmanager-start.sh", 4753),
        ("systemd", 1),
    ]
    assert not got.no_entries and all(ln.nvswitch_error is None for ln in got.lines)


def test_same_lines_as_systemctl_tail() -> None:
    """The journal tail of a systemctl capture, its unit header removed, reads the same lines
    (an NVSwitch SXid included) as parse_fabricmanager_status does."""
    text = corpus_text(STATUS)
    tail = text.split("\n\n", 1)[1]
    got = parse_fabricmanager_journal(tail).lines
    want = parse_fabricmanager_status(text).journal

    def key(ln: JournalLine) -> tuple[object, ...]:
        return (ln.timestamp_raw, ln.ident, ln.pid, ln.nvswitch_error)

    assert [key(ln) for ln in got] == [key(ln) for ln in want]
    # systemctl clipped one line at the terminal width ('>'); journalctl clips nothing.
    assert [ln.cut for ln in want].count(True) == 1 and not any(ln.cut for ln in got)
    assert [ln.nvswitch_error.error_code for ln in got if ln.nvswitch_error] == [22013]


def test_markers_and_short_iso() -> None:
    text = (
        "-- Logs begin at Tue 2025-05-13 09:00:01 UTC, end at Fri 2025-05-16 15:20:00 UTC. --\n"
        + corpus_text(START).splitlines()[0].replace("Sep 18 03:19:01", "2025-09-18T03:19:01+0000")
        + "\n-- Reboot --\n"
    )
    (line,) = parse_fabricmanager_journal(text).lines
    assert (line.timestamp_raw, line.message) == (
        "2025-09-18T03:19:01+0000",
        "Detected Pre-NVL5 system",
    )
    empty = parse_fabricmanager_journal("-- No entries --\n")
    assert (empty.lines, empty.no_entries) == ((), True)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("", id="empty"),
        pytest.param("Lorem ipsum dolor sit amet\n", id="garbage"),
        pytest.param("\x00\xff\xfe", id="binary"),
        pytest.param(corpus_text(STATUS), id="systemctl-status-with-header"),
        # A cut inside a message reads as a shorter message (journalctl prints no end marker);
        # a cut in a line's prefix is not a journal line.
        pytest.param(corpus_text(START)[:30], id="truncated-in-prefix"),
        pytest.param(cut_corpus(START) + "\nSep 18 03:19", id="truncated-after-a-cut-line"),
        pytest.param("-- No entries --\n" + corpus_text(START), id="lines-after-no-entries"),
    ],
)
def test_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_fabricmanager_journal(bad)
