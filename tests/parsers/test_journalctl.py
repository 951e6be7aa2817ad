"""journalctl kernel-window parser: an empty window is no events; anything else is a kernel log."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.journalctl import NO_ENTRIES, parse_kernel_window
from nodegate.parsers.kernel_log import TOOL, KernelLogEvents, parse_kernel_log

from tests.parsers.conftest import check_expected, corpus_text

ISO = "gpu/dmesg__xid-13-43-sm-warp-exception-decode-iso.txt"
EMPTY = KernelLogEvents((), (), (), (), (), (), 0)


@pytest.mark.parametrize("text", [NO_ENTRIES + "\n", "", "  \n\n", f"\n{NO_ENTRIES}  \n"])
def test_empty_window_is_no_events(text: str) -> None:
    assert parse_kernel_window(text) == EMPTY


def test_corpus_window_is_the_kernel_log() -> None:
    events = parse_kernel_window(corpus_text(ISO))
    # Same facts as the kernel-log parser's expected file for this capture.
    check_expected("kernel_log", ISO, events)
    assert [x.xid for x in events.xids] == [x.xid for x in parse_kernel_log(corpus_text(ISO)).xids]
    assert events.xids


@pytest.mark.parametrize(
    "text",
    [
        "hello world\nthis is not a kernel log\n",
        "\x00\x01\x02garbage\xff\xfe",
        NO_ENTRIES + "\nhello world\n",
    ],
    ids=["garbage", "binary", "marker-then-garbage"],
)
def test_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_kernel_window(text)
    assert err.value.tool == TOOL


def test_truncated_raises() -> None:
    text = corpus_text(ISO)
    with pytest.raises(ParseError, match="cut"):
        parse_kernel_window(text[: int(len(text) * 0.4)])
