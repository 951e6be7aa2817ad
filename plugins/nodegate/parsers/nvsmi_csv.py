"""Parse `nvidia-smi --query-gpu=... --format=csv` (also --query-retired-pages) and the
field catalogue printed by `nvidia-smi --help-query-gpu`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError

TOOL = "nvidia-smi --format=csv"
HELP_TOOL = "nvidia-smi --help-query-gpu"

# `memory.total [MiB]`: field name as queried, unit in brackets (kept even with `nounits`).
_HEADER_CELL = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_.]*)(?: \[(?P<unit>[^\]]+)\])?$")
# Bracketed cells are nvidia-smi's "no value" answers: [N/A], [Not Supported],
# [Requested functionality has been deprecated], [Unknown Error], [Insufficient Permissions].
_BRACKETED = re.compile(r"^\[(?P<reason>[^\]]*)\]$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_HELP_TITLE = re.compile(r'^List of valid properties to query for the switch "--query-(\w+)":$')
_HELP_NAMES = re.compile(r'^"[^"]+"(?: or "[^"]+")*$')
_HELP_SECTION = re.compile(r"^Section about (\S+) properties$")


@dataclass(frozen=True, slots=True)
class NvsmiCsv:
    """A `--format=csv` table.

    `columns` are the header names without units, `units` maps a column to its bracketed
    unit. Row values have that unit stripped (`81559 MiB` -> `81559`); cells that hold no
    value (`[N/A]`, `N/A`, `[Not Supported]`, deprecated, empty) are None, and `unavailable`
    keeps their text per row (`{"fan.speed": "[N/A]"}`).
    """

    columns: tuple[str, ...]
    units: dict[str, str]
    rows: tuple[dict[str, str | None], ...]
    unavailable: tuple[dict[str, str], ...]


@dataclass(frozen=True, slots=True)
class QueryField:
    """One `--help-query-gpu` entry: its names (first is canonical, others are aliases)."""

    names: tuple[str, ...]
    section: str | None
    description: str


@dataclass(frozen=True, slots=True)
class NvsmiQueryHelp:
    """The catalogue of `--query-<what>` fields a driver accepts."""

    query: str
    fields: tuple[QueryField, ...]


def parse_nvsmi_csv(text: str) -> NvsmiCsv:
    """Parse CSV from `nvidia-smi --query-*=... --format=csv[,nounits]`.

    >>> parse_nvsmi_csv("name, memory.total [MiB]\\nNVIDIA H200, 143771 MiB\\n").rows[0]
    {'name': 'NVIDIA H200', 'memory.total': '143771'}
    """
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    lines = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines or not lines[0].strip():
        raise ParseError(TOOL, "empty output")
    if len(lines) < 2:
        # The header line has no newline after it: the output stopped inside the header.
        raise ParseError(TOOL, "header line is not terminated: truncated")
    columns, units = _header(lines[0])
    rows: list[dict[str, str | None]] = []
    unavailable: list[dict[str, str]] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(columns):
            raise ParseError(
                TOOL, f"line {number} has {len(cells)} cells for {len(columns)} columns"
            )
        row: dict[str, str | None] = {}
        missing: dict[str, str] = {}
        for column, cell in zip(columns, cells, strict=True):
            value = _cell(cell, units.get(column))
            row[column] = value
            if value is None:
                missing[column] = cell
        rows.append(row)
        unavailable.append(missing)
    return NvsmiCsv(
        columns=tuple(columns), units=units, rows=tuple(rows), unavailable=tuple(unavailable)
    )


def _header(line: str) -> tuple[list[str], dict[str, str]]:
    columns: list[str] = []
    units: dict[str, str] = {}
    for cell in (c.strip() for c in line.split(",")):
        match = _HEADER_CELL.match(cell)
        if match is None:
            raise ParseError(TOOL, f"header cell {cell[:40]!r} is not a query field name")
        name = match.group("name")
        if name in columns:
            raise ParseError(TOOL, f"header names {name!r} twice")
        columns.append(name)
        if match.group("unit"):
            units[name] = match.group("unit")
    return columns, units


def _cell(cell: str, unit: str | None) -> str | None:
    if _BRACKETED.match(cell) or cell in ("", "N/A"):
        return None
    if unit and cell.endswith(" " + unit):
        return cell[: -len(unit) - 1].strip()
    return cell


def parse_nvsmi_help_query(text: str) -> NvsmiQueryHelp:
    """Parse `nvidia-smi --help-query-gpu` into its field entries (names, aliases, section)."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    title = _HELP_TITLE.match(lines[0].strip()) if lines else None
    if title is None:
        raise ParseError(HELP_TOOL, "no 'List of valid properties to query' title line")
    fields: list[QueryField] = []
    section: str | None = None
    names: tuple[str, ...] | None = None
    description: list[str] = []

    def close() -> None:
        if names is not None:
            fields.append(QueryField(names, section, " ".join(description).strip()))

    for line in lines[1:]:
        stripped = line.strip()
        section_match = _HELP_SECTION.match(stripped)
        if _HELP_NAMES.match(stripped) or section_match:
            close()
            names, description = None, []
            if section_match:
                section = section_match.group(1)
            else:
                names = tuple(re.findall(r'"([^"]+)"', stripped))
                # A top-level field outside the dotted family of the last section ends it.
                if section is not None and not names[0].startswith(section + "."):
                    section = None
        elif stripped and names is not None:
            description.append(stripped)
    close()
    if not fields:
        raise ParseError(HELP_TOOL, "no quoted field names found")
    return NvsmiQueryHelp(query=title.group(1), fields=tuple(fields))
