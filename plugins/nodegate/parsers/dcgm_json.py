"""Parse `dcgmi diag -j` (DCGM 4.x JSON) into the same DcgmDiag facts as the text table."""

from __future__ import annotations

import json

from nodegate.core.errors import ParseError
from nodegate.parsers.dcgm import (
    DcgmDiag,
    DiagEntity,
    DiagMessage,
    DiagTest,
    EntityResult,
    diag_message,
    diag_result,
    worst_result,
)

TOOL = "dcgmi"


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
            out.append(diag_message(item, group, eid))
        elif isinstance(item, dict) and isinstance(item.get("warning"), str):
            cat, err, sev = (_opt_int(item.get(k)) for k in _CODES)
            out.append(diag_message(item["warning"], group, eid, (err, cat, sev)))
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
        entities.append(EntityResult(grp, eid, diag_result(_str(res, "status", where), where)))
        warnings += _json_messages(res, "warnings", where, grp, eid)
        info += _json_messages(res, "info", where, grp, eid)
    summary = _field(obj, "test_summary", where) or {}
    warnings += _json_messages(summary, "warnings", where)
    info += _json_messages(summary, "info", where)
    status = _field(summary, "status", where)
    if isinstance(status, str):
        result = diag_result(status, where)
    elif entities:
        result = worst_result([e.result for e in entities])
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
