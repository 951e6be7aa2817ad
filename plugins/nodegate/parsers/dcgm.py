"""Parse `dcgmi diag` (DCGM 3.x/4.x tables, `-v`, `-j` JSON) and `dcgmi discovery -l`."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field

from nodegate.errors import ParseError
from nodegate.parsers.pci import normalize_bdf

TOOL = "dcgmi"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_BORDER = re.compile(r"^\+[-=]+\+[-=]+\+$")
_SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][\w /]*?)\s+-+\+-+[|+]$")
_RESULT = re.compile(
    r"^(?P<res>Pass|Fail|Warn|Skip|Not Run)(?:\s*-\s*(?P<scope>All|GPUs?:\s*[\d,\s]+))?$",
    re.IGNORECASE,
)
# DCGM 4.x tables list each entity's result on its own row (corpus: dcgmi-diag__l40s...).
_ENTITY_ROW = re.compile(r"^(?P<grp>GPU|CPU|NvSwitch|Switch)(?P<id>\d+): (?P<res>[A-Za-z ]+)$")
_LEADING_GPU = re.compile(r"^GPU (?P<id>\d+) ")
_FOUND = re.compile(r"^(?P<n>\d+) (?P<kind>[A-Za-z]+?)(?:es|s)? found\.$")


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


@dataclass(frozen=True, slots=True)
class DcgmGpu:
    """One GPU row of `dcgmi discovery -l`."""

    gpu_id: int
    name: str | None
    bdf: str | None
    bdf_raw: str | None
    uuid: str | None


@dataclass(frozen=True, slots=True)
class DcgmDiscovery:
    """Entities DCGM sees; ids only for NVSwitches and CPUs."""

    gpus: tuple[DcgmGpu, ...]
    nvswitch_ids: tuple[int, ...]
    cpu_ids: tuple[int, ...]


def _result(text: str, where: str) -> DiagResult:
    for res in DiagResult:
        if res.value.lower() == text.strip().lower():
            return res
    raise ParseError(TOOL, f"{where}: unknown result {text.strip()!r}")


def _worst(results: list[DiagResult]) -> DiagResult:
    return min(results, key=_SEVERITY.index)


def _message(
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
        res = _result(m["res"], where)
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
            result=_worst(self.results),
            result_raw="; ".join(self.lines),
            all_entities=self.all_entities,
            entities=tuple(self.entities),
            warnings=tuple(_message(t) for k, t in self.messages if k == "Warning"),
            info=tuple(_message(t) for k, t in self.messages if k == "Info"),
        )


def _clean(text: str) -> list[str]:
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    return [_ANSI.sub("", ln).rstrip() for ln in text.replace("\r\n", "\n").split("\n")]


def parse_dcgmi_diag(text: str) -> DcgmDiag:
    """Parse the `dcgmi diag` text table (DCGM 3.x `Pass - All` and 4.x per-GPU rows)."""
    lines = _clean(text)
    start = next((i for i, ln in enumerate(lines) if _BORDER.match(ln)), None)
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
        if _BORDER.match(line):
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
            res = _result(em["res"], where)
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


def _field(obj: object, key: str, where: str) -> object:
    if not isinstance(obj, dict):
        raise ParseError(TOOL, f"{where}: expected an object, got {type(obj).__name__}")
    return obj.get(key)


def _str(obj: object, key: str, where: str) -> str:
    value = _field(obj, key, where)
    if not isinstance(value, str):
        raise ParseError(TOOL, f"{where}: '{key}' missing or not a string")
    return value


def _int(obj: object, key: str, where: str) -> int:
    value = _field(obj, key, where)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ParseError(TOOL, f"{where}: '{key}' missing or not an integer")
    return value


def _list(obj: object, key: str, where: str, required: bool = True) -> list[object]:
    value = _field(obj, key, where)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise ParseError(TOOL, f"{where}: '{key}' missing or not a list")
    return value


_CODES = ("error_category", "error_id", "error_severity")


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json_messages(
    obj: object, kind: str, where: str, group: str | None = None, eid: int | None = None
) -> list[DiagMessage]:
    out: list[DiagMessage] = []
    for item in _list(obj, kind, where, required=False):
        if isinstance(item, str):
            out.append(_message(item, group, eid))
        elif isinstance(item, dict) and isinstance(item.get("warning"), str):
            cat, err, sev = (_opt_int(item.get(k)) for k in _CODES)
            out.append(_message(item["warning"], group, eid, (err, cat, sev)))
        else:
            raise ParseError(TOOL, f"{where}: unreadable {kind} entry {str(item)[:60]!r}")
    return out


def diag_test_from_json(obj: object, category: str | None) -> DiagTest:
    """One DCGM 4.x `tests[]` object -> DiagTest (also used on the corpus fragment)."""
    name = _str(obj, "name", "test")
    where = f"test {name!r}"
    entities: list[EntityResult] = []
    warnings: list[DiagMessage] = []
    info: list[DiagMessage] = []
    for res in _list(obj, "results", where):
        grp, eid = _str(res, "entity_group", where), _int(res, "entity_id", where)
        entities.append(EntityResult(grp, eid, _result(_str(res, "status", where), where)))
        warnings += _json_messages(res, "warnings", where, grp, eid)
        info += _json_messages(res, "info", where, grp, eid)
    summary = _field(obj, "test_summary", where) or {}
    warnings += _json_messages(summary, "warnings", where)
    info += _json_messages(summary, "info", where)
    status = _field(summary, "status", where)
    if isinstance(status, str):
        result = _result(status, where)
    elif entities:
        result = _worst([e.result for e in entities])
    else:
        raise ParseError(TOOL, f"{where}: neither test_summary.status nor entity results")
    return DiagTest(
        name=name,
        category=category,
        result=result,
        result_raw=status if isinstance(status, str) else result.value,
        all_entities=False,
        entities=tuple(entities),
        warnings=tuple(warnings),
        info=tuple(info),
    )


def _json_entities(doc: object) -> list[DiagEntity]:
    entities: list[DiagEntity] = []
    for group in _list(doc, "entity_groups", "document", required=False):
        gname = _str(group, "entity_group", "entity_groups")
        for ent in _list(group, "entities", "entity_groups"):
            dev, serial = (
                _field(ent, "device_id", "entities"),
                _field(ent, "serial_num", "entities"),
            )
            entities.append(
                DiagEntity(
                    gname,
                    _int(ent, "entity_id", "entities"),
                    dev if isinstance(dev, str) else None,
                    # `<<<NOT_SUPPORTED>>>` (corpus: GB10 run) is DCGM's sentinel for absent.
                    serial if isinstance(serial, str) and not serial.startswith("<<<") else None,
                )
            )
    return entities


def parse_dcgmi_diag_json(text: str) -> DcgmDiag:
    """Parse `dcgmi diag -j` (DCGM 4.x); a bare test object (a fragment) is a ParseError."""
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        try:
            part = json.loads(text.strip().rstrip(","))
        except json.JSONDecodeError:
            part = None
        if isinstance(part, dict) and "results" in part:
            # Corpus: dcgmi-diag-j__...-capped-fragment. One test without its document says
            # nothing of the other tests or the run's metadata: admitting on it would pass
            # by omission.
            raise ParseError(TOOL, "JSON fragment: one test object, not a diag document") from None
        raise ParseError(TOOL, f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
    root = _field(doc, "DCGM Diagnostic", "document")
    if isinstance(root, dict) and "runtime_error" in root:
        raise ParseError(TOOL, f"diag did not run: {str(root['runtime_error'])[:120]}")
    tests: list[DiagTest] = []
    categories: list[str] = []
    for cat in _list(root, "test_categories", "'DCGM Diagnostic'"):
        name = _str(cat, "category", "test_categories")
        categories.append(name)
        tests += [diag_test_from_json(t, name) for t in _list(cat, "tests", f"category {name!r}")]
    if not tests:
        raise ParseError(TOOL, "diag document lists no tests")
    entities = _json_entities(doc)
    meta = _field(doc, "metadata", "document")
    version = _field(meta, "version", "metadata") if isinstance(meta, dict) else None
    driver = _field(meta, "Driver Version Detected", "metadata") if isinstance(meta, dict) else None
    gpu_ids = tuple(e.device_id for e in entities if e.entity_group == "GPU" and e.device_id)
    return DcgmDiag(
        dcgm_version=version if isinstance(version, str) else None,
        driver_version=driver if isinstance(driver, str) else None,
        gpu_device_ids=gpu_ids,
        categories=tuple(categories),
        tests=tuple(tests),
        entities=tuple(entities),
        complete=True,
    )


def parse_dcgmi_discovery(text: str) -> DcgmDiscovery:
    """Parse `dcgmi discovery -l`; each `N <kind> found.` count must match its table."""
    rows: dict[str, list[dict[str, str]]] = {}
    counts: dict[str, int] = {}
    kind: str | None = None
    for no, line in enumerate(_clean(text), 1):
        if not line.strip() or _BORDER.match(line) or re.fullmatch(r"\+-+\+", line):
            continue
        if fm := _FOUND.match(line.strip()):
            kind = fm["kind"].lower()
            counts[kind], rows[kind] = int(fm["n"]), []
            continue
        if kind is None or not (line.startswith("|") and line.endswith("|")):
            raise ParseError(TOOL, f"line {no}: not part of a discovery table: {line[:80]!r}")
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].isdigit():
            rows[kind].append({"id": cells[0]})
        elif cells[0] and not rows[kind]:
            continue  # column header (`GPU ID | Device Information`)
        elif not rows[kind]:
            raise ParseError(TOOL, f"line {no}: detail row before any entry")
        if len(cells) > 1 and ":" in cells[1]:
            key, _, value = cells[1].partition(":")
            rows[kind][-1][key.strip()] = value.strip()
    if "gpu" not in counts:
        raise ParseError(TOOL, "no 'N GPUs found.' line")
    for k, n in counts.items():
        if len(rows[k]) != n:
            raise ParseError(TOOL, f"{n} {k}(s) announced but {len(rows[k])} listed (truncated?)")
    gpus = tuple(
        DcgmGpu(
            int(r["id"]),
            r.get("Name"),
            normalize_bdf(r["PCI Bus ID"]) if "PCI Bus ID" in r else None,
            r.get("PCI Bus ID"),
            r.get("Device UUID"),
        )
        for r in rows["gpu"]
    )
    ids = {k: tuple(int(r["id"]) for r in v) for k, v in rows.items()}
    return DcgmDiscovery(gpus, ids.get("nvswitch", ()), ids.get("cpu", ()))
