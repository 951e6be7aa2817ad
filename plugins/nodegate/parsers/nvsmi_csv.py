"""Parse `nvidia-smi --query-gpu=<fields> --format=csv [-lms N]`: one header, one row per GPU
per sample (a looping query prints the header once and a row per GPU at each interval).

The header names each field as nvidia-smi spells it, with the unit in brackets for numeric
fields (`power.draw [W]`); cells carry the unit too (`631.95 W`, `1980 MHz`) unless
`nounits`; `[N/A]` and other bracketed texts are absent values (corpus:
nvidia-smi-query-gpu-csv__h100-80gb-hbm3-load-wide-..., ...tesla-p100-pcie-16gb-short).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

from nodegate.core.errors import ParseError

TOOL = "nvidia-smi --query-gpu"

_UNIT = re.compile(r"\s*\[[^\]]*\]$")
_NUMBER = re.compile(r"^(?P<n>-?\d+(?:\.\d+)?)(?:\s*(?:W|MHz|%|C|MiB))?$")
_STAMP = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?$")


@dataclass(frozen=True, slots=True)
class CsvSample:
    """One row: cells by field name (unit suffix dropped), None for `[N/A]`-like cells."""

    line_no: int
    cells: dict[str, str | None]

    def text(self, field: str) -> str | None:
        return self.cells.get(field)

    def number(self, field: str) -> float | None:
        """The cell as a number (`631.95 W` -> 631.95); None when absent; ParseError when it
        is neither."""
        raw = self.cells.get(field)
        if raw is None:
            return None
        m = _NUMBER.match(raw)
        if m is None:
            raise ParseError(TOOL, f"line {self.line_no}: {field} {raw[:30]!r} is not a number")
        return float(m["n"])

    def active(self, field: str) -> bool | None:
        """`Active` / `Not Active` cells (clocks_event_reasons.*)."""
        raw = self.cells.get(field)
        if raw is None:
            return None
        if raw in ("Active", "Not Active"):
            return raw == "Active"
        raise ParseError(
            TOOL, f"line {self.line_no}: {field} {raw[:30]!r} is not Active/Not Active"
        )


@dataclass(frozen=True, slots=True)
class CsvQuery:
    fields: tuple[str, ...]
    samples: tuple[CsvSample, ...]


def _cell(raw: str) -> str | None:
    raw = raw.strip()
    return None if not raw or (raw.startswith("[") and raw.endswith("]")) else raw


def parse_query_gpu_csv(text: str, required: Sequence[str] = ()) -> CsvQuery:
    """Header and rows; every field in `required` must be in the header. A row with another
    cell count (a line cut mid-write) is a ParseError, as is a timestamp cell that is not
    one."""
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise ParseError(TOOL, "no header line")
    header_line = lines[0]
    fields = tuple(_UNIT.sub("", f.strip()) for f in header_line.split(","))
    if len(fields) < 2 or not all(re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", f) for f in fields):
        raise ParseError(TOOL, f"not a --query-gpu CSV header: {header_line[:60]!r}")
    missing = [f for f in required if f not in fields]
    if missing:
        raise ParseError(TOOL, f"header lacks {', '.join(missing)}")
    samples: list[CsvSample] = []
    for no, line in enumerate(lines[1:], start=2):
        if not line.strip() or line == header_line:
            continue
        cells = next(csv.reader(io.StringIO(line), skipinitialspace=True))
        if len(cells) != len(fields):
            raise ParseError(TOOL, f"line {no}: {len(cells)} cells for {len(fields)} fields")
        row = {f: _cell(c) for f, c in zip(fields, cells, strict=True)}
        stamp = row.get("timestamp")
        if "timestamp" in fields and (stamp is None or not _STAMP.match(stamp)):
            raise ParseError(TOOL, f"line {no}: timestamp {str(stamp)[:30]!r} unreadable")
        samples.append(CsvSample(no, row))
    return CsvQuery(fields, tuple(samples))
