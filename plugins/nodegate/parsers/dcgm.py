"""Parse the `dcgmi diag` text table (DCGM 3.x/4.x, `-v`) into the diag facts (also built from -j).

`dcgmi diag -j` is read by `dcgm_json`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from nodegate.core.errors import ParseError

TOOL = "dcgmi"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# The `+---+---+` border of every dcgmi table (diag and discovery).
TABLE_BORDER = re.compile(r"^\+[-=]+\+[-=]+\+$")
_SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][\w /]*?)\s+-+\+-+[|+]$")
_RESULT = re.compile(
    r"^(?P<res>Pass|Fail|Warn|Skip|Not Run)(?:\s*-\s*(?P<scope>All|GPUs?:\s*[\d,\s]+))?$",
    re.IGNORECASE,
)
# DCGM 4.x tables list each entity's result on its own row (corpus: dcgmi-diag__l40s...).
_ENTITY_ROW = re.compile(r"^(?P<grp>GPU|CPU|NvSwitch|Switch)(?P<id>\d+): (?P<res>[A-Za-z ]+)$")
_LEADING_GPU = re.compile(r"^GPU (?P<id>\d+) ")


class DiagResult(str, enum.Enum):
    """A test's or entity's outcome as DCGM names it."""

    PASS = "Pass"
    FAIL = "Fail"
    WARN = "Warn"
    SKIP = "Skip"
    NOT_RUN = "Not Run"


# Worst first: a test's overall outcome is the worst of its parts.
_SEVERITY = (DiagResult.FAIL, DiagResult.WARN, DiagResult.PASS, DiagResult.SKIP, DiagResult.NOT_RUN)


@dataclass(frozen=True, slots=True)
class EntityResult:
    """One entity's result for a test (`GPU0: Pass`, a JSON `results[]` entry, `GPU: 4`)."""

    entity_group: str
    entity_id: int
    result: DiagResult


@dataclass(frozen=True, slots=True)
class DiagMessage:
    """A Warning/Info text; the entity is known from JSON or a leading `GPU n ` in the text."""

    text: str
    entity_group: str | None
    entity_id: int | None
    error_id: int | None
    error_category: int | None
    error_severity: int | None


@dataclass(frozen=True, slots=True)
class DiagTest:
    """One test/plugin row; `all_entities` when DCGM 3 summarised it as `<Result> - All`."""

    name: str
    category: str | None
    result: DiagResult
    result_raw: str
    all_entities: bool
    entities: tuple[EntityResult, ...]
    warnings: tuple[DiagMessage, ...]
    info: tuple[DiagMessage, ...]


@dataclass(frozen=True, slots=True)
class DiagEntity:
    """An entity the JSON run covered (`entity_groups`)."""

    entity_group: str
    entity_id: int
    device_id: str | None
    serial: str | None


@dataclass(frozen=True, slots=True)
class DcgmDiag:
    """A diag run; `complete` is False only for a table whose closing border is missing."""

    dcgm_version: str | None
    driver_version: str | None
    gpu_device_ids: tuple[str, ...]
    categories: tuple[str, ...]
    tests: tuple[DiagTest, ...]
    entities: tuple[DiagEntity, ...]
    complete: bool


def diag_result(text: str, where: str) -> DiagResult:
    for res in DiagResult:
        if res.value.lower() == text.strip().lower():
            return res
    raise ParseError(TOOL, f"{where}: unknown result {text.strip()!r}")


def worst_result(results: list[DiagResult]) -> DiagResult:
    return min(results, key=_SEVERITY.index)


def diag_message(
    text: str,
    group: str | None = None,
    eid: int | None = None,
    codes: tuple[int | None, int | None, int | None] = (None, None, None),
) -> DiagMessage:
    """Table messages name their GPU only as a leading `GPU n ` (DCGM 3.x warnings)."""
    text = text.strip()
    if group is None and (gm := _LEADING_GPU.match(text)):
        group, eid = "GPU", int(gm["id"])
    return DiagMessage(text, group, eid, *codes)


@dataclass(slots=True)
class _TestRows:
    """Mutable collector for one test while reading table rows."""

    name: str
    category: str | None
    lines: list[str] = field(default_factory=list)
    results: list[DiagResult] = field(default_factory=list)
    entities: list[EntityResult] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)
    all_entities: bool = False

    def add_result_line(self, text: str, where: str) -> None:
        m = _RESULT.match(text.strip())
        if m is None:
            raise ParseError(TOOL, f"{where}: unreadable result {text.strip()!r}")
        self.lines.append(text.strip())
        res = diag_result(m["res"], where)
        self.results.append(res)
        scope = m["scope"] or ""
        if scope.lower() == "all":
            self.all_entities = True
        elif scope:
            for num in re.findall(r"\d+", scope):
                self.entities.append(EntityResult("GPU", int(num), res))

    def freeze(self) -> DiagTest:
        return DiagTest(
            name=self.name,
            category=self.category,
            result=worst_result(self.results),
            result_raw="; ".join(self.lines),
            all_entities=self.all_entities,
            entities=tuple(self.entities),
            warnings=tuple(diag_message(t) for k, t in self.messages if k == "Warning"),
            info=tuple(diag_message(t) for k, t in self.messages if k == "Info"),
        )


def dcgmi_lines(text: str) -> list[str]:
    """dcgmi output as lines without ANSI escapes or trailing blanks; NUL bytes are an error."""
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    return [_ANSI.sub("", ln).rstrip() for ln in text.replace("\r\n", "\n").split("\n")]


def parse_dcgmi_diag(text: str) -> DcgmDiag:
    """Parse the `dcgmi diag` text table (DCGM 3.x `Pass - All` and 4.x per-GPU rows)."""
    lines = dcgmi_lines(text)
    start = next((i for i, ln in enumerate(lines) if TABLE_BORDER.match(ln)), None)
    if start is None:
        first = next((ln.strip() for ln in lines if ln.strip()), "")
        raise ParseError(TOOL, f"no diag table ('+---+---+' border); output starts {first[:80]!r}")
    top = lines[start]
    a, b, c = (i for i, ch in enumerate(top) if ch == "+")
    width = c - b - 4  # cells are `| ` + text + `  |`; wrapped text is cut at this width
    meta: dict[str, str] = {}
    categories: list[str] = []
    tests: list[_TestRows] = []
    category: str | None = None
    last_key: str | None = None
    closed = False
    for no, line in enumerate(lines[start + 1 :], start + 2):
        if not line.strip():
            continue
        if sm := _SECTION.match(line):
            category, last_key = sm["name"], None
            if category != "Metadata":
                categories.append(category)
            continue
        if TABLE_BORDER.match(line):
            closed = category is not None and not line.startswith("+=")
            if closed:
                break
            continue
        if not (line.startswith("|") and line.endswith("|") and len(line) > c and line[b] == "|"):
            raise ParseError(TOOL, f"line {no}: malformed table row (cut?): {line[:80]!r}")
        key = line[a + 1 : b].strip()
        # dcgmi wraps long text at `width` (keep the wrapped piece's trailing spaces so pieces
        # rejoin exactly), but a value may fill the cell up to one space before the border.
        cell = line[b + 2 : c]
        chunk = cell[:width].ljust(width) + cell[width:].rstrip()
        where = f"line {no}"
        if category is None:
            continue  # the `| Diagnostic | Result |` header
        if category == "Metadata":
            last_key = key or last_key
            if last_key is None:
                raise ParseError(TOOL, f"{where}: metadata continuation without a key")
            meta[last_key] = meta.get(last_key, "") + chunk
        elif key in ("Info", "Warning"):
            if not tests:
                raise ParseError(TOOL, f"{where}: {key} row before any test")
            tests[-1].messages.append((key, chunk))
            last_key = key
        elif key:
            tests.append(_TestRows(key, category))
            tests[-1].add_result_line(chunk, where)
            last_key = None
        elif not tests:
            raise ParseError(TOOL, f"{where}: continuation row before any test")
        elif em := _ENTITY_ROW.match(chunk.strip()):
            res = diag_result(em["res"], where)
            tests[-1].entities.append(EntityResult(em["grp"], int(em["id"]), res))
            last_key = None
        elif last_key in ("Info", "Warning"):
            kind, prev = tests[-1].messages[-1]
            tests[-1].messages[-1] = (kind, prev + chunk)
        else:
            tests[-1].add_result_line(chunk, where)
    ids = tuple(x.strip() for x in meta.get("GPU Device IDs Detected", "").split(",") if x.strip())
    if not closed:
        # Real dcgmi always closes the table. The corpus L40S capture (DCGM 4.x) was published
        # without it; accept that only when the last test lists a result for every GPU.
        last = tests[-1] if tests else None
        if not ids or last is None or last_key is not None or len(last.entities) != len(ids):
            raise ParseError(TOOL, "diag table not closed by a border: output truncated")
    if not tests:
        raise ParseError(TOOL, "diag table lists no tests")
    version = meta.get("DCGM Version", "").strip() or None
    driver = meta.get("Driver Version Detected", "").strip() or None
    frozen = tuple(t.freeze() for t in tests)
    return DcgmDiag(version, driver, ids, tuple(categories), frozen, (), closed)
