"""Read mlxlink's two layouts, `--json` and plain text, into the same named sections of values.

JSON nests sections under result.output and lists per-lane data as {"values": [..]} (with a
"mask" for Supported Info); plain text prints `Title` / `-----` / `Key   : value` lines.
"""

from __future__ import annotations

import json
import re
from typing import Any

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

TOOL = "mlxlink"
# A scalar as printed, per-lane values, or (capability mask, names) from JSON Supported Info.
Value = str | tuple[str, ...] | tuple[str | None, tuple[str, ...]]
Section = dict[str, Value]

_TEXT_KV_RE = re.compile(r"^(?P<key>\S.*?)\s+:\s?(?P<value>.*)$")


def _json_value(tool_key: str, value: Any) -> Value:
    if type(value) is str:  # the common case, skipping the checks below (str(value) is value)
        return value
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, dict) and isinstance(value.get("values"), list):
        values = tuple(map(str, value["values"]))
        return (str(value["mask"]), values) if "mask" in value else values
    raise ParseError(TOOL, f"unexpected JSON value for {tool_key!r}: {str(value)[:60]}")


def _json_sections(text: str) -> dict[str, Section]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(TOOL, f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise ParseError(TOOL, "JSON document is not an object")
    status = doc.get("status")
    if isinstance(status, dict) and status.get("code") not in (0, None):
        raise ParseError(TOOL, f"mlxlink failed: {status.get('message')!r}")
    output = doc.get("result", {}).get("output") if isinstance(doc.get("result"), dict) else None
    if not isinstance(output, dict):
        raise ParseError(TOOL, "no result.output object in the JSON")
    sections: dict[str, Section] = {}
    for name, body in output.items():
        if isinstance(body, dict):
            sections[name] = {k: _json_value(k, v) for k, v in body.items()}
    return sections


def _text_sections(text: str) -> dict[str, Section]:
    lines = clean_lines(text)
    sections: dict[str, Section] = {}
    current: Section | None = None
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.startswith("-E-"):
            raise ParseError(TOOL, f"mlxlink reported an error: {line}")
        if line and nxt and set(nxt) == {"-"}:
            current = sections.setdefault(line, {})
            i += 2
            continue
        i += 1
        if not line or line.startswith(("-W-", "-I-")):
            continue
        m = _TEXT_KV_RE.match(line)
        if m is None or current is None:
            raise ParseError(TOOL, f"unrecognised line {line[:60]!r}")
        current[m["key"].strip()] = m["value"].strip()
    return sections


def read_sections(text: str) -> dict[str, Section]:
    """Sections by title, from the JSON layout when the output starts with '{', else the text."""
    body = text.lstrip()
    return _json_sections(body) if body.startswith("{") else _text_sections(text)
