"""Parser for `ibnetdiscover -p` (infiniband-diags): the ports report, one line per port.

Shape from `dump_ports_report` in ibnetdiscover.c of rdma-core: `%2s %5d %2d 0x%016x %s %s`
(node type, LID, port, port GUID, width, speed), then either ` - <the same for the link
partner> ( '<local desc>' - '<remote desc>' )` or, for a port without a partner, 36 blanks and
`'<local desc>'`. A switch line carries the switch's LID (port 0's) on every port.

>>> r = parse_ibnetdiscover_ports(
...     "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 "
...     "( 'o0001 HCA-1' - 'ib-i1l1s01' )\\n")
>>> (r.lines[0].local.lid, r.lines[0].remote.port, r.lines[0].speed)
(134, 10, 'EDR')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_TOOL = "ibnetdiscover"
# A NodeDescription is 64 bytes; with two of them and the fixed fields a line stays < 300.
_MAX_LINE = 400
_END = (
    r"(?P<{p}kind>CA|SW|RT)\s+(?P<{p}lid>\d{{1,5}})\s+(?P<{p}port>\d{{1,3}})"
    r"\s+0x(?P<{p}guid>[0-9a-fA-F]{{16}})"
)
_LOCAL = _END.format(p="l")
_REMOTE = _END.format(p="r")
_LINE_RE = re.compile(
    rf"^\s*{_LOCAL}\s+(?P<width>1x|4x|8x|12x|2x|\?\?)\s+"
    r"(?P<speed>SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR|\?\?\?)"
    rf"(?:\s+-\s+{_REMOTE}\s+\( '(?P<descs>.*)' \)|\s+'(?P<desc>.*)')$"
)
_DESC_SEP = "' - '"
_WIDTH = {"??": None}  # what the tool prints for a value it cannot name
_SPEED = {"???": None}


@dataclass(frozen=True, slots=True)
class PortEnd:
    """One end of a link: node type ('CA', 'SW', 'RT'), LID, port number, port GUID, node desc."""

    kind: str
    lid: int
    port: int
    guid: str  # '0x' + 16 lowercase hex digits
    description: str


@dataclass(frozen=True, slots=True)
class PortLine:
    """One ports-report line; width '4x' and speed 'NDR' are None where the tool prints ??/???."""

    local: PortEnd
    width: str | None
    speed: str | None
    remote: PortEnd | None  # None: the port has no link partner


@dataclass(frozen=True, slots=True)
class PortsReport:
    """Every port line in printed order (nodes as discovered, each node's ports high to low)."""

    lines: tuple[PortLine, ...]


def _split_descs(descs: str, lineno: int) -> tuple[str, str]:
    """'a' - 'b' is split once; a description that itself holds "' - '" is ambiguous."""
    if descs.count(_DESC_SEP) != 1:
        raise ParseError(_TOOL, f"line {lineno}: node descriptions cannot be told apart")
    local, _, remote = descs.partition(_DESC_SEP)
    return local, remote


def parse_ibnetdiscover_ports(text: str) -> PortsReport:
    """Parse `ibnetdiscover -p`; any line that is not a port line raises ParseError."""
    lines: list[PortLine] = []
    # Each end of a link is printed twice (once per side): one PortEnd serves both lines.
    ends: dict[tuple[str, str, str, str, str], PortEnd] = {}

    def end(kind: str, lid: str, port: str, guid: str, desc: str) -> PortEnd:
        key = (kind, lid, port, guid, desc)
        e = ends.get(key)
        if e is None:
            e = ends[key] = PortEnd(kind, int(lid), int(port), "0x" + guid.lower(), desc)
        return e

    for lineno, raw in enumerate(clean_lines(text), 1):
        if not raw:
            continue
        if len(raw) > _MAX_LINE:
            raise ParseError(
                _TOOL, f"line {lineno}: {len(raw)} characters, longer than a port line"
            )
        m = _LINE_RE.match(raw)
        if m is None:
            if not raw.strip():
                continue
            raise ParseError(_TOOL, f"line {lineno}: not a ports-report line: {raw[:80]!r}")
        lk, llid, lport, lguid, width, speed, rk, rlid, rport, rguid, descs, desc = m.groups()
        remote: PortEnd | None = None
        if descs is not None:
            desc, remote_desc = _split_descs(descs, lineno)
            remote = end(rk, rlid, rport, rguid, remote_desc)
        local = end(lk, llid, lport, lguid, desc)
        lines.append(PortLine(local, _WIDTH.get(width, width), _SPEED.get(speed, speed), remote))
    if not lines:
        raise ParseError(_TOOL, "no port lines (empty output)")
    return PortsReport(lines=tuple(lines))
