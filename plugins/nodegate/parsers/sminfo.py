"""Parser for `sminfo` (infiniband-diags): the subnet manager a port sees as master.

sminfo.c prints one line: `sminfo: sm lid %d sm guid 0x%x, activity count %u priority %d
state %d %s`, the name being SMINFO_NOTACT, SMINFO_DISCOVER, SMINFO_STANDBY or SMINFO_MASTER.

>>> parse_sminfo("sminfo: sm lid 37 sm guid 0x7cfe90030016aef1, activity count 4484381 "
...              "priority 14 state 3 SMINFO_MASTER\\n").state
'MASTER'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_TOOL = "sminfo"
# SMInfo.SMState (IBA 14.2.5.13): the number sminfo and saquery print, and our names for it.
SM_STATES = {0: "NOTACTIVE", 1: "DISCOVERING", 2: "STANDBY", 3: "MASTER"}
_SMINFO_NAMES = {0: "SMINFO_NOTACT", 1: "SMINFO_DISCOVER", 2: "SMINFO_STANDBY", 3: "SMINFO_MASTER"}
_LINE_RE = re.compile(
    r"^sminfo: sm lid (?P<lid>\d{1,5}) sm guid 0x(?P<guid>[0-9a-fA-F]{1,16}), "
    r"activity count (?P<act>\d{1,10}) priority (?P<prio>\d{1,2}) "
    r"state (?P<state>\d) (?P<name>SMINFO_[A-Z]+|\?\?\?)$"
)


@dataclass(frozen=True, slots=True)
class SmInfo:
    """One subnet manager: its LID, port GUID, activity count, priority (0-15) and state."""

    lid: int
    guid: str  # '0x' + 16 lowercase hex digits
    activity: int
    priority: int
    state: str  # "MASTER" | "STANDBY" | "DISCOVERING" | "NOTACTIVE"


def sm_info(tool: str, lid: int, guid_hex: str, activity: int, priority: int, state: int) -> SmInfo:
    """An SmInfo from the printed numbers; a priority or state IBA does not define is refused."""
    if priority > 15:
        raise ParseError(tool, f"priority {priority} is not 0-15")
    if state not in SM_STATES:
        raise ParseError(tool, f"SM state {state} is not one IBA defines")
    return SmInfo(
        lid=lid,
        guid="0x" + guid_hex.lower().rjust(16, "0"),
        activity=activity,
        priority=priority,
        state=SM_STATES[state],
    )


def parse_sminfo(text: str) -> SmInfo:
    """Parse sminfo's one line; ibwarn/iberror lines (no SM answered) raise ParseError."""
    lines = [line.strip() for line in clean_lines(text) if line.strip()]
    if len(lines) != 1:
        raise ParseError(_TOOL, f"expected one 'sminfo: sm lid' line, got {len(lines)} lines")
    m = _LINE_RE.match(lines[0])
    if m is None:
        raise ParseError(_TOOL, f"not an sminfo line: {lines[0][:80]!r}")
    state = int(m["state"])
    if _SMINFO_NAMES.get(state) != m["name"]:
        raise ParseError(_TOOL, f"state {state} printed as {m['name']}")
    return sm_info(_TOOL, int(m["lid"]), m["guid"], int(m["act"]), int(m["prio"]), state)
