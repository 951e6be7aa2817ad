"""Kernel-log lines: time and source prefixes split off the message, wrapped NVRM lines joined.

>>> split_prefix("[ 12.5] NVRM: Xid (PCI:0000:52:00): 79")[0].seconds_since_boot
12.5
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from nodegate.core.errors import ParseError

TOOL = "kernel_log"

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MON = "(?P<mon>" + "|".join(_MONTHS) + ")"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# `dmesg --decode` (corpus: dmesg__xid-13-43...) puts `kern  :warn  : ` before the time.
_FACILITY = re.compile(r"^(?P<fac>[a-z]+)\s*:(?P<lvl>[a-z]+)\s*:\s")
_MONO = re.compile(r"^\[\s*(?P<sec>\d+\.\d+)\]\s?")
_CTIME = re.compile(
    r"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + _MON + r" +(?P<day>\d{1,2}) "
    r"(?P<hms>\d\d:\d\d:\d\d) (?P<year>\d{4})\]\s?"
)
_ISO = re.compile(
    r"^(?P<date>\d{4}-\d\d-\d\d)[T ](?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d+))?"
    r"(?P<tz>Z|[+-]\d\d:?\d\d)?\s+"
)
# A line that is nothing but the start of a timestamp was cut (corpus files cut at 40%).
_CUT_STAMP = re.compile(r"^(?:\[[^\]]*|\d{4}-\d\d-\d\d(?:[T ][\d:.,+-]*)?)$")
_SYSLOG = re.compile(r"^" + _MON + r" +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)\s+")
# After a syslog stamp comes `<host> <ident>[pid]: `; after an ISO stamp only journal/RFC 3339
# syslog lines have `<host> kernel: ` (dmesg --time-format iso goes straight to the text).
_SYSLOG_SOURCE = re.compile(r"^\S+\s+[\w./-]+(?:\[\d+\])?:\s?")
_ISO_SOURCE = re.compile(r"^(?:\S+\s+)?kernel:\s?")
_KERNEL = re.compile(r"^kernel:\s?")


@dataclass(frozen=True, slots=True)
class LogTimestamp:
    """A line's time as printed, plus what can be derived from it."""

    raw: str
    seconds_since_boot: float | None
    wallclock_iso: str | None


def _iso(
    year: int, mon: int, day: int, hms: str, frac: str | None = None, tz: str | None = None
) -> str | None:
    try:
        h, m, s = (int(x) for x in hms.split(":"))
        micro = int((frac or "0")[:6].ljust(6, "0"))
        tzinfo = None
        if tz == "Z":
            tzinfo = timezone.utc
        elif tz:
            sign = -1 if tz[0] == "-" else 1
            digits = tz[1:].replace(":", "")
            delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            tzinfo = timezone(sign * delta)
        return datetime(year, mon, day, h, m, s, micro, tzinfo).isoformat()
    except ValueError:
        return None


def split_prefix(line: str) -> tuple[LogTimestamp | None, str, bool]:
    """-> (timestamp, message, whether a kernel-log prefix was recognised)."""
    rest = line
    recognised = False
    fm = _FACILITY.match(rest)
    if fm:
        rest, recognised = rest[fm.end() :], True
    ts: LogTimestamp | None = None
    source: re.Pattern[str] = _KERNEL
    if m := _MONO.match(rest):
        ts = LogTimestamp(m[0].strip(), float(m["sec"]), None)
    elif m := _CTIME.match(rest):
        iso = _iso(int(m["year"]), _MONTHS.index(m["mon"]) + 1, int(m["day"]), m["hms"])
        ts = LogTimestamp(m[0].strip(), None, iso)
    elif m := _ISO.match(rest):
        y, mo, d = (int(x) for x in m["date"].split("-"))
        ts = LogTimestamp(m[0].strip(), None, _iso(y, mo, d, m["hms"], m["frac"], m["tz"]))
        source = _ISO_SOURCE
    elif m := _SYSLOG.match(rest):
        # Classic syslog has no year: the wall-clock time is not derivable, keep it raw.
        ts = LogTimestamp(m[0].strip(), None, None)
        source = _SYSLOG_SOURCE
    if m is not None:
        rest, recognised = rest[m.end() :], True
    # A bare `kernel: ` is a journal/syslog excerpt pasted without the time (corpus:
    # syslog__xid-45...).
    if sm := source.match(rest):
        rest, recognised = rest[sm.end() :], True
    if ts is not None and ts.seconds_since_boot is None and (mm := _MONO.match(rest)):
        # syslog `kernel: [12345.678901] ...` carries the boot-relative time too.
        ts = LogTimestamp(f"{ts.raw} {mm[0].strip()}", float(mm["sec"]), ts.wallclock_iso)
        rest = rest[mm.end() :]
    return ts, rest.strip(), recognised


def logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines (indented, no time) onto their line; keep first line numbers."""
    out: list[tuple[int, str]] = []
    for no, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        line = _ANSI.sub("", raw).rstrip()
        if not line.strip():
            continue
        if _CUT_STAMP.match(line):
            raise ParseError(TOOL, f"line {no}: line ends inside its timestamp (cut?): {line!r}")
        if line[0] in " \t" and out and not _MONO.match(line.strip()):
            # NVRM wraps long messages onto lines indented to the text column (corpus:
            # dmesg__fallen-off-bus..., 15 spaces, no timestamp).
            # Each wrapped piece repeats the `NVRM: ` tag; drop it so the message reads whole.
            prev_no, prev = out[-1]
            piece = line.strip()
            if "NVRM:" in prev:
                piece = piece.removeprefix("NVRM:").strip()
            out[-1] = (prev_no, f"{prev} {piece}")
            continue
        out.append((no, line))
    return out
