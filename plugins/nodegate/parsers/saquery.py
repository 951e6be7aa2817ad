"""Parser for `saquery SMIR` (infiniband-diags): every SMInfoRecord the subnet administrator holds.

`dump_sm_info_record` in saquery.c prints per record `SMInfoRecord dump:`, then tab-indented
`RID`, `LID...................%u`, `SMInfo dump:`, `GUID..................0x%016x`,
`SM_Key................0x%016x`, `ActCount..............%u`, `Priority..............%u` and
`SMState...............%u`.
"""

from __future__ import annotations

import re

from nodegate.core.errors import ParseError
from nodegate.parsers.sminfo import SmInfo, sm_info
from nodegate.parsers.text import clean_lines

_TOOL = "saquery SMIR"
_RECORD = "SMInfoRecord dump:"
_FIELD_RE = re.compile(r"^(?P<name>[A-Za-z_]+)\.+(?P<value>\S+)$")
_FIELDS = ("LID", "GUID", "SM_Key", "ActCount", "Priority", "SMState")
_VALUE_RE = {
    "LID": re.compile(r"\d{1,5}"),
    "GUID": re.compile(r"0x[0-9a-fA-F]{16}"),
    "SM_Key": re.compile(r"0x[0-9a-fA-F]{16}"),
    "ActCount": re.compile(r"\d{1,10}"),
    "Priority": re.compile(r"\d{1,3}"),
    "SMState": re.compile(r"\d{1,3}"),
}
_MAX_RECORDS = 64  # a subnet has a handful of SMs; more is not an SA answering


def _record(fields: dict[str, str], n: int) -> SmInfo:
    missing = [f for f in _FIELDS if f not in fields]
    if missing:
        raise ParseError(_TOOL, f"record {n} lacks {', '.join(missing)} (truncated?)")
    return sm_info(
        _TOOL,
        int(fields["LID"]),
        fields["GUID"][2:],
        int(fields["ActCount"]),
        int(fields["Priority"]),
        int(fields["SMState"]),
    )


def parse_saquery_smir(text: str) -> tuple[SmInfo, ...]:
    """Parse `saquery SMIR` into one SmInfo per record, in printed order."""
    records: list[dict[str, str]] = []
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line or line in ("RID", "SMInfo dump:"):
            continue
        if line == _RECORD:
            if len(records) == _MAX_RECORDS:
                raise ParseError(_TOOL, f"more than {_MAX_RECORDS} SMInfoRecords")
            records.append({})
            continue
        m = _FIELD_RE.match(line)
        if m is None or not records or m["name"] not in _VALUE_RE:
            raise ParseError(_TOOL, f"line {lineno}: unexpected {line[:80]!r}")
        if m["name"] in records[-1] or not _VALUE_RE[m["name"]].fullmatch(m["value"]):
            raise ParseError(_TOOL, f"line {lineno}: bad or repeated {m['name']} {m['value']!r}")
        records[-1][m["name"]] = m["value"]
    if not records:
        # The master SM always holds its own record: none at all is not an SA's answer.
        raise ParseError(_TOOL, "no 'SMInfoRecord dump:' record")
    return tuple(_record(fields, n) for n, fields in enumerate(records, 1))
