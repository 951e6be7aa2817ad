"""Parser for `mlnx_qos -i <netdev>` (mlnx-tools / MLNX_OFED, DOCA-OFED): the port's QoS state.

The layout of the corpus captures (mlnx_qos__cx5-100gbe-dcbx-...-ets-vendor, mlnx_qos__dscp-
trust-pfc-prio3-...): `DCBX mode:`, `Priority trust state:`, a `dscp2prio mapping:` block
(`prio:3 dscp:31,30,...,24,`), optional `Receive buffer size` / `Cable len` lines, the `PFC
configuration:` table (`priority`, `enabled`, optional `buffer` rows), then one `tc: N
ratelimit: R, tsa: T[, bw: B%]` line per traffic class followed by its `priority:  p` lines.

>>> q = parse_mlnx_qos("Priority trust state: dscp\\nPFC configuration:\\n"
...     "        priority    0   1   2   3   4   5   6   7\\n"
...     "        enabled     0   0   0   1   0   0   0   0\\n")
>>> q.trust, q.pfc_enabled
('dscp', (3,))
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_TOOL = "mlnx_qos"
_DSCP_ROW = re.compile(r"^prio:(?P<prio>[0-7])\s+dscp:(?P<dscps>[0-9,]*)$")
_TC = re.compile(
    r"^tc:\s*(?P<tc>\d+)\s+ratelimit:\s*(?P<rate>[^,]+),\s*tsa:\s*(?P<tsa>[a-z]+)"
    r"(?:,\s*bw:\s*(?P<bw>\d+)%)?$"
)
_TC_PRIO = re.compile(r"^priority:\s*(?P<prio>[0-7])$")
_PFC_ROW = re.compile(r"^(?P<name>priority|enabled|buffer)\s+(?P<vals>[0-9 ]+)$")


@dataclass(frozen=True, slots=True)
class EtsClass:
    """One traffic class: its scheduler (`ets`, `strict`, `vendor`), ETS share and priorities."""

    tc: int
    ratelimit: str
    tsa: str
    bw_percent: int | None  # only `tsa: ets` classes print `bw:`
    priorities: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MlnxQos:
    """The QoS state of one port; `dscp_to_prio` is empty when the tool printed no DSCP map
    (trust pcp)."""

    dcbx_mode: str | None
    trust: str
    dscp_to_prio: Mapping[int, int]
    pfc_enabled: tuple[int, ...]  # priorities with PFC on
    pfc_buffer: tuple[int, ...] | None  # receive buffer of each priority 0..7, when printed
    classes: tuple[EtsClass, ...]
    extra: Mapping[str, str]  # other `key: value` lines (Cable len, Receive buffer size)

    def tc_of(self, priority: int) -> EtsClass | None:
        return next((c for c in self.classes if priority in c.priorities), None)


def _row(lineno: int, vals: str) -> tuple[int, ...]:
    out = tuple(int(v) for v in vals.split())
    if len(out) != 8:
        raise ParseError(_TOOL, f"line {lineno}: PFC row of {len(out)} values, not 8")
    return out


def parse_mlnx_qos(text: str) -> MlnxQos:
    """Parse one `mlnx_qos -i <if>` output (nothing else in the text)."""
    dcbx: str | None = None
    trust: str | None = None
    dscp: dict[int, int] = {}
    pfc: dict[str, tuple[int, ...]] = {}
    classes: list[tuple[int, str, str, int | None, list[int]]] = []
    extra: dict[str, str] = {}
    block = ""
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if m := _DSCP_ROW.match(line):
            if block != "dscp":
                raise ParseError(_TOOL, f"line {lineno}: DSCP row outside the dscp2prio block")
            for d in filter(None, m["dscps"].split(",")):
                if int(d) > 63 or int(d) in dscp:
                    raise ParseError(_TOOL, f"line {lineno}: bad or repeated DSCP {d}")
                dscp[int(d)] = int(m["prio"])
        elif m := _PFC_ROW.match(line):
            if block != "pfc" or m["name"] in pfc:
                raise ParseError(_TOOL, f"line {lineno}: PFC row outside the PFC table")
            pfc[m["name"]] = _row(lineno, m["vals"])
        elif m := _TC.match(line):
            block = "tc"
            bw = None if m["bw"] is None else int(m["bw"])
            classes.append((int(m["tc"]), m["rate"].strip(), m["tsa"], bw, []))
        elif m := _TC_PRIO.match(line):
            if block != "tc" or not classes:
                raise ParseError(_TOOL, f"line {lineno}: priority line outside a tc block")
            classes[-1][4].append(int(m["prio"]))
        elif line == "dscp2prio mapping:":
            block = "dscp"
        elif line == "PFC configuration:":
            block = "pfc"
        elif ":" in line and not raw[:1].isspace():
            key, _, value = line.partition(":")
            block = ""
            if key == "DCBX mode":
                dcbx = value.strip()
            elif key == "Priority trust state":
                trust = value.strip()
            else:
                extra[key] = value.strip()
        else:
            raise ParseError(_TOOL, f"line {lineno}: unrecognised line {line[:60]!r}")
    if trust is None:
        raise ParseError(_TOOL, "no 'Priority trust state:' line")
    if "enabled" not in pfc or pfc.get("priority") != tuple(range(8)):
        raise ParseError(_TOOL, "no complete 'PFC configuration:' table (truncated?)")
    return MlnxQos(
        dcbx_mode=dcbx,
        trust=trust,
        dscp_to_prio=dict(sorted(dscp.items())),
        pfc_enabled=tuple(p for p, on in enumerate(pfc["enabled"]) if on),
        pfc_buffer=pfc.get("buffer"),
        classes=tuple(EtsClass(tc, r, t, bw, tuple(ps)) for tc, r, t, bw, ps in classes),
        extra=extra,
    )
