"""Parse `journalctl -u nvidia-fabricmanager` (short or short-iso output): the same journal
lines `systemctl status` appends under its unit header, here without that header, plus
journalctl's own `-- ... --` marker lines (`-- Logs begin at ...`, `-- Boot ... --`,
`-- No entries --`). NVSwitch errors in the lines are read as in fabricmanager.py.

Corpus: journalctl-fabricmanager__ubuntu24.04-... (a start script failing on a system without
NVSwitches). journalctl prints whole lines (it ellipsizes nothing without a terminal), so unlike
systemctl's tail a trailing `>` is part of the message, never a clip mark.

>>> j = parse_fabricmanager_journal("-- No entries --\\n")
>>> (j.lines, j.no_entries)
((), True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.fabricmanager import _JOURNAL, JournalLine, _nvswitch_error
from nodegate.parsers.text import clean_lines

TOOL = "journalctl -u nvidia-fabricmanager"
# `-o short-iso`: 2025-05-16T15:10:22+0000 host ident[pid]: message
_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d{2}:?\d{2}|Z)?) (?P<host>\S+) "
    r"(?P<ident>[^\s:\[]+)(?:\[(?P<pid>\d+)\])?: (?P<msg>.*)$"
)
_MARKER = re.compile(r"^-- .* --$")


@dataclass(frozen=True, slots=True)
class FabricManagerJournal:
    lines: tuple[JournalLine, ...]
    no_entries: bool  # journalctl said `-- No entries --`


def parse_fabricmanager_journal(text: str) -> FabricManagerJournal:
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    out: list[JournalLine] = []
    markers: list[str] = []
    for lineno, line in enumerate(clean_lines(text), 1):
        if not line.strip():
            continue
        if _MARKER.match(line):
            markers.append(line)
            continue
        m = _JOURNAL.match(line) or _ISO.match(line)
        if m is None:
            raise ParseError(TOOL, f"line {lineno}: not a journal line: {line[:80]!r}")
        where = f"journal line {m['ts']}"
        out.append(
            JournalLine(
                m["ts"], m["ident"], int(m["pid"]) if m["pid"] else None, m["msg"], False,
                _nvswitch_error(m["msg"], False, where, TOOL),
            )
        )  # fmt: skip
    no_entries = "-- No entries --" in markers
    if not out and not no_entries:
        raise ParseError(TOOL, "no journal line and no '-- No entries --'")
    if out and no_entries:
        raise ParseError(TOOL, "journal lines after '-- No entries --'")
    return FabricManagerJournal(tuple(out), no_entries)
