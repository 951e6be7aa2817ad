"""Parse `nvbandwidth -t <testcase> ...` plain-text output (NVIDIA/nvbandwidth v0.4-v0.8).

Per testcase the tool prints `Running <testcase>.`, a description line (`memcpy CE CPU(row) ->
GPU(column) bandwidth (GB/s)`), a matrix (a header of column labels, one line per row label,
`N/A` where a pair was not measured), a blank line and `SUM <testcase> <value>` (source:
`output.cpp` `addTestcaseResults`, `inline_common.h` `operator<<(PeerValueMatrix)`; corpus:
nvbandwidth__h100-80gb-hbm3-8gpu-v0.4-...). A testcase that cannot run says `Waived: ` (before
any `Running` line, without its name) or `Error: <why>` after its `Running` line; an unknown
name is `ERROR: <why>`. The unnamed lines are matched, in order, to the requested testcases
the output did not name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from nodegate.core.errors import ParseError

TOOL = "nvbandwidth"

_VERSION = re.compile(r"^nvbandwidth Version: (?P<v>\S+)$")
_DRIVER = re.compile(r"^Driver Version: (?P<v>\S+)$")
# v0.4: `Device 0: NVIDIA H100 80GB HBM3`; v0.5+: `... (00000000:19:00)` (getDeviceDisplayInfo)
_DEVICE = re.compile(r"^Device (?P<i>\d+): (?P<name>.+?)(?: \((?P<pci>[0-9a-fA-F:]+)\))?$")
_RUNNING = re.compile(r"^Running (?P<t>[a-z0-9_]+)\.$")
_SUM = re.compile(r"^SUM (?P<t>[a-z0-9_]+) (?P<v>-?\d+(?:\.\d+)?)$")
_STATUS = re.compile(r"^(?P<s>Waived|Error|ERROR|Not Found):\s?(?P<msg>.*)$")
_NUM = re.compile(r"^-?\d+(?:\.\d+)?$")


@dataclass(frozen=True, slots=True)
class NvbDevice:
    index: int
    name: str
    pci: str | None  # `00000000:19:00` (v0.5+), None in v0.4


@dataclass(frozen=True, slots=True)
class NvbMatrix:
    """One result matrix: `values[row][column]` in GB/s, None for `N/A`."""

    description: str
    columns: tuple[str, ...]
    rows: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]

    def cell(self, row: str, column: str) -> float | None:
        return self.values[self.rows.index(row)][self.columns.index(column)]


@dataclass(frozen=True, slots=True)
class NvbTestcase:
    """One testcase: `status` ran | waived | error; `matrix` when it ran."""

    name: str
    status: str
    message: str
    matrix: NvbMatrix | None
    sum_gbps: float | None


@dataclass(frozen=True, slots=True)
class NvbRun:
    version: str | None
    driver_version: str | None
    devices: tuple[NvbDevice, ...]
    testcases: tuple[NvbTestcase, ...]

    def testcase(self, name: str) -> NvbTestcase | None:
        return next((t for t in self.testcases if t.name == name), None)


def _matrix(lines: list[str], i: int, name: str) -> tuple[NvbMatrix, int]:
    """The description at `lines[i]`, then header and rows up to the blank line."""
    desc = lines[i].strip()
    if "bandwidth" not in desc and "latency" not in desc:
        raise ParseError(TOOL, f"{name}: expected the matrix description, got {desc[:60]!r}")
    if i + 1 >= len(lines) or not lines[i + 1].strip():
        raise ParseError(TOOL, f"{name}: matrix header missing")
    columns = tuple(lines[i + 1].split())
    rows: list[str] = []
    values: list[tuple[float | None, ...]] = []
    j = i + 2
    while j < len(lines) and lines[j].strip():
        cells = lines[j].split()
        if len(cells) != len(columns) + 1:
            raise ParseError(
                TOOL, f"{name}: row {cells[0]!r} has {len(cells) - 1} cells for {len(columns)}"
            )
        row: list[float | None] = []
        for c in cells[1:]:
            if c == "N/A":
                row.append(None)
            elif _NUM.match(c):
                row.append(float(c))
            else:
                raise ParseError(TOOL, f"{name}: unreadable cell {c[:20]!r}")
        rows.append(cells[0])
        values.append(tuple(row))
        j += 1
    if not rows:
        raise ParseError(TOOL, f"{name}: matrix has no rows")
    return NvbMatrix(desc, columns, tuple(rows), tuple(values)), j


def parse_nvbandwidth(text: str, requested: Sequence[str] = ()) -> NvbRun:
    """Parse nvbandwidth's text output; `requested`: the `-t` testcases, in order (names the
    unnamed `Waived:`/`ERROR:` lines). A testcase that ran without its `SUM` line (cut off) is
    a ParseError."""
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    lines = text.splitlines()
    version = driver = None
    devices: list[NvbDevice] = []
    found: list[NvbTestcase] = []
    unnamed: list[tuple[str, str]] = []  # (status, message) of lines without a testcase
    current: str | None = None
    matrix: NvbMatrix | None = None
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if m := _VERSION.match(line):
            version = m["v"]
        elif m := _DRIVER.match(line):
            driver = m["v"]
        elif (m := _DEVICE.match(line)) and current is None:
            devices.append(NvbDevice(int(m["i"]), m["name"], m["pci"]))
        elif m := _RUNNING.match(line):
            if current is not None:
                raise ParseError(TOOL, f"{current}: no result before the next testcase")
            current, matrix = m["t"], None
        elif m := _SUM.match(line):
            if current is None or m["t"] != current or matrix is None:
                raise ParseError(TOOL, f"line {i + 1}: SUM {m['t']} outside its testcase")
            found.append(NvbTestcase(current, "ran", "", matrix, float(m["v"])))
            current = None
        elif m := _STATUS.match(line):
            status = "waived" if m["s"] == "Waived" else "error"
            if current is not None and m["s"] == "Error":
                found.append(NvbTestcase(current, status, m["msg"].strip(), None, None))
                current = None
            else:
                unnamed.append((status, m["msg"].strip()))
        elif current is not None and matrix is None and line:
            matrix, i = _matrix(lines, i, current)
            continue
        i += 1
    if current is not None:
        raise ParseError(TOOL, f"{current}: output ends before its SUM line (cut off?)")
    names = {t.name for t in found}
    rest = [r for r in requested if r not in names]
    for (status, msg), name in zip(unnamed, rest, strict=False):
        found.append(NvbTestcase(name, status, msg, None, None))
    if not found:
        raise ParseError(TOOL, "no testcase result (no 'Running <testcase>.' block)")
    return NvbRun(version, driver, tuple(devices), tuple(found))
