"""Parser for `perfquery` (infiniband-diags): `-x` extended, basic, and `-E` rcv error details.

Each block starts with a `# <kind> counters: Lid <n> port <p> (CapMask: ...)` header and lists
`CounterName:......value` lines (the dots pad the name; values are decimal or 0x hex).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_TOOL = "perfquery"
# perfquery.c: `# Port extended counters: %s port %d (CapMask: 0x%02X CapMask2: 0x%07X)`;
# `%s` is portid2str (`Lid 134`, or a DR path/GUID form); port 255 is the -a aggregate.
_HEADER_RE = re.compile(
    r"^#\s*(?P<kind>.+?counters):\s*(?P<target>.+?)\s+port\s+(?P<port>\d+)"
    r"(?:\s*\(CapMask:\s*(?P<cap>0x[0-9A-Fa-f]+)(?:\s+CapMask2:\s*(?P<cap2>0x[0-9A-Fa-f]+))?\))?\s*$"
)
_COUNTER_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_]*):\.*(?P<value>\S+)$")
ALL_PORTS = 255  # perfquery -a sums all ports into one block numbered 255

# Counters each block kind always prints (mad_dump_perfcounters*); a block missing one was cut.
EXT_TRAFFIC = (
    "PortXmitData",
    "PortRcvData",
    "PortXmitPkts",
    "PortRcvPkts",
    "PortUnicastXmitPkts",
    "PortUnicastRcvPkts",
    "PortMulticastXmitPkts",
    "PortMulticastRcvPkts",
)
# With CounterSelect2 present, -x also prints the error counters, down to QP1Dropped.
EXT_ERRORS = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortRcvSwitchRelayErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "VL15Dropped",
    "PortXmitWait",
    "QP1Dropped",
)
_BASIC = (*EXT_ERRORS[:12], "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts")
_RCV_ERROR_DETAILS = (
    "PortLocalPhysicalErrors",
    "PortMalformedPktErrors",
    "PortBufferOverrunErrors",
    "PortDLIDMappingErrors",
    "PortVLMappingErrors",
    "PortLoopingErrors",
)


def _required(kind: str, counters: Mapping[str, int]) -> tuple[str, ...]:
    if kind == "Port extended counters":
        return EXT_TRAFFIC + (EXT_ERRORS if "CounterSelect2" in counters else ())
    if kind == "Port counters":
        return _BASIC
    if kind == "PortRcvErrorDetails counters":
        return _RCV_ERROR_DETAILS
    return ()


@dataclass(frozen=True, slots=True)
class PerfqueryPort:
    """One counters block: kind ('Port extended counters', 'PortRcvErrorDetails counters', ...)."""

    kind: str
    lid: int | None
    target: str  # as printed, e.g. 'Lid 1719'
    port: int
    cap_mask: str | None
    cap_mask2: str | None
    counters: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class PerfqueryCounters:
    """All blocks in printed order (one per port, or one per -x/-E query)."""

    ports: tuple[PerfqueryPort, ...]


def parse_perfquery(text: str) -> PerfqueryCounters:
    """Parse one or more perfquery blocks; a counter line before any header is an error."""
    blocks: list[tuple[re.Match[str], dict[str, int]]] = []
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = _HEADER_RE.match(line)
            if m is None:
                raise ParseError(_TOOL, f"line {lineno}: unrecognised header {line[:80]!r}")
            blocks.append((m, {}))
            continue
        c = _COUNTER_RE.match(line)
        if c is None or not blocks:
            # e.g. `ibwarn: ... perfquery: iberror: failed: ...` when the PMA query fails
            raise ParseError(_TOOL, f"line {lineno}: unexpected {line[:80]!r}")
        try:
            value = int(c["value"], 0)
        except ValueError:
            raise ParseError(_TOOL, f"line {lineno}: {c['name']} value {c['value']!r}") from None
        blocks[-1][1][c["name"]] = value
    if not blocks:
        raise ParseError(_TOOL, "no '# ... counters: Lid N port N' header found")
    ports: list[PerfqueryPort] = []
    for m, counters in blocks:
        missing = [c for c in _required(m["kind"], counters) if c not in counters]
        if not counters or missing:
            raise ParseError(
                _TOOL, f"block {m.group(0)!r} lacks {', '.join(missing) or 'counters'} (truncated?)"
            )
        lid = re.fullmatch(r"Lid\s+(\d+)", m["target"])
        ports.append(
            PerfqueryPort(
                kind=m["kind"],
                lid=int(lid.group(1)) if lid else None,
                target=m["target"],
                port=int(m["port"]),
                cap_mask=m["cap"],
                cap_mask2=m["cap2"],
                counters=counters,
            )
        )
    return PerfqueryCounters(ports=tuple(ports))


@dataclass(frozen=True, slots=True)
class PortCounters:
    """Extended counters of one port, keyed by perfquery's own names (SymbolErrorCounter, ...)."""

    lid: int
    port: int
    counters: Mapping[str, int]


_EXTENDED = "Port extended counters"
# Counters the stage compares; a block without them (no CounterSelect2: an old PMA) is refused.
_EXTENDED_REQUIRED = EXT_TRAFFIC + EXT_ERRORS


def parse_perfquery_extended(text: str) -> tuple[PortCounters, ...]:
    """Parse `perfquery -x -l <lid>`, or several of them concatenated (one per switch, as a
    loop over the switches prints them): per-port extended blocks, each with every counter."""
    seen: set[tuple[int, int]] = set()
    out: list[PortCounters] = []
    for b in parse_perfquery(text).ports:
        if b.kind != _EXTENDED or b.lid is None or b.port == ALL_PORTS:
            raise ParseError(_TOOL, f"block for {b.target} port {b.port} is not per-port -x by LID")
        missing = [c for c in _EXTENDED_REQUIRED if c not in b.counters]
        if missing:
            raise ParseError(_TOOL, f"{b.target} port {b.port} lacks {', '.join(missing)}")
        if (b.lid, b.port) in seen:
            raise ParseError(_TOOL, f"{b.target} port {b.port} printed twice")
        seen.add((b.lid, b.port))
        out.append(PortCounters(lid=b.lid, port=b.port, counters=b.counters))
    return tuple(out)
