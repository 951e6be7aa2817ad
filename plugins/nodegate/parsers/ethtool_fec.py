"""Parse `ethtool --show-fec <if>` (optionally `-I`/`--include-statistics`): the FEC modes a port
is configured for, the one active, and the FEC block counters when the driver reports them.

Layout (ethtool netlink/fec.c): `FEC parameters for <if>:`, `Supported/Configured FEC
encodings: ...` (`Configured FEC encodings:` in older ethtool), `Active FEC encoding: ...`, then
with `-I` `Statistics:` and two-space-indented `<counter>: <n>` lines, each optionally followed by
deeper `Lane <n>: <n>` lines or a `[ per_lane: ... ]` list on the same line. Corpus:
ethtool_show-fec__intel-ice-... . `None` is a mode name here (FEC off), kept as printed.

>>> parse_ethtool_fec("FEC parameters for eth0:\\nConfigured FEC encodings: Auto RS\\n"
...     "Active FEC encoding: RS\\n").active
('RS',)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

TOOL = "ethtool --show-fec"
_HEAD = re.compile(r"^FEC parameters for (?P<ifname>\S+):$")
_CONFIGURED = re.compile(r"^(?P<label>Supported/Configured|Configured) FEC encodings:(?P<v>.*)$")
_ACTIVE = re.compile(r"^Active FEC encoding:(?P<v>.*)$")
_STAT = re.compile(r"^ {1,3}(?P<name>[a-z][\w]*): (?P<total>\d+)(?: \[ per_lane: [\d, ]+\])?$")
_LANE = re.compile(r"^ {4,}Lane \d+: \d+$")


@dataclass(frozen=True, slots=True)
class EthtoolFec:
    """One port's FEC: configured and active modes; statistics None when not printed."""

    ifname: str
    configured_label: str  # "Supported/Configured" (ethtool 5.x+) or "Configured"
    configured: tuple[str, ...]
    active: tuple[str, ...]
    # (counter, port total) in output order: corrected_blocks, uncorrectable_blocks, ...
    statistics: tuple[tuple[str, int], ...] | None


def parse_ethtool_fec(text: str) -> EthtoolFec:
    lines = [ln for ln in clean_lines(text) if ln.strip()]
    if not lines or (head := _HEAD.match(lines[0].strip())) is None:
        first = lines[0][:60] if lines else ""
        raise ParseError(TOOL, f"no 'FEC parameters for <if>:' line (got {first!r})")
    if len(lines) < 3:
        raise ParseError(TOOL, "output ends before the configured and active encodings")
    conf, act = _CONFIGURED.match(lines[1].strip()), _ACTIVE.match(lines[2].strip())
    if conf is None or act is None:
        raise ParseError(TOOL, "expected the configured then the active FEC encoding lines")
    configured, active = tuple(conf["v"].split()), tuple(act["v"].split())
    if not configured or not active:
        raise ParseError(TOOL, "an encoding line without a mode (cut?)")
    return EthtoolFec(head["ifname"], conf["label"], configured, active, _statistics(lines[3:]))


def _statistics(lines: list[str]) -> tuple[tuple[str, int], ...] | None:
    if not lines:
        return None
    if lines[0].strip() != "Statistics:":
        raise ParseError(TOOL, f"unrecognised line {lines[0].strip()[:60]!r}")
    stats: dict[str, int] = {}
    for line in lines[1:]:
        if _LANE.match(line):
            continue
        m = _STAT.match(line)
        if m is None or m["name"] in stats:
            raise ParseError(TOOL, f"unrecognised statistics line {line.strip()[:60]!r}")
        stats[m["name"]] = int(m["total"])
    if not stats:
        raise ParseError(TOOL, "'Statistics:' without a counter (cut?)")
    return tuple(stats.items())
