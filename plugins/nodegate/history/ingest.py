"""Writing a run into the history: its decision, every verdict and number, its actions and
infrastructure findings, streamed in batches (no second copy of the run in memory).

A run is keyed by its run id: writing it again (an import of a directory already recorded)
replaces its rows in the same transaction, so `nodegate history import` is idempotent.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from nodegate.admission.gate import Reason, causes
from nodegate.admission.remediation import UNJUDGED_CLASS
from nodegate.core.errors import ConfigError
from nodegate.core.results import (
    ACTIONS_FILE,
    ADMISSION_FILE,
    VERDICTS_FILE,
    read_verdicts,
    verdicts_path,
)
from nodegate.core.values import Status, Verdict, component_key, is_number
from nodegate.history import schema as t
from nodegate.history.store import Store

BATCH = 20_000  # verdict rows per INSERT batch
STATUS_TEXT = {s: s.value for s in Status}


@dataclass(frozen=True, slots=True)
class Written:
    """What one write stored."""

    run_id: str
    state: str
    verdicts: int
    measurements: int
    replaced: bool  # the run was there already (an import run again)


def nodegate_version() -> str:
    try:
        return importlib.metadata.version("nodegate")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def run_state(doc: Mapping[str, Any]) -> str:
    if doc.get("interrupted"):
        return t.INTERRUPTED
    return t.COMPLETE if doc.get("complete") else t.INCOMPLETE


def parse_time(text: Any) -> dt.datetime | None:
    """An ISO time as naive UTC (what both backends store alike)."""
    if not text:
        return None
    try:
        when = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when


class Names:
    """Interned names (nodes, checks, components) -> ids, inserted when first seen."""

    def __init__(self, conn: Connection, table: sa.Table) -> None:
        self.conn, self.table, self.ids = conn, table, dict[str, int]()

    def ids_of(self, names: Iterable[str]) -> dict[str, int]:
        missing = sorted({n for n in names if n not in self.ids})
        for i in range(0, len(missing), 500):
            chunk = missing[i : i + 500]
            self._load(chunk)
            new = [n for n in chunk if n not in self.ids]
            if new:
                # Another controller may add the same name at once: theirs is as good as ours.
                ins = _insert(self.conn, self.table).on_conflict_do_nothing(index_elements=["name"])
                self.conn.execute(ins, [{"name": n} for n in new])
                self._load(new)
        return self.ids

    def _load(self, names: list[str]) -> None:
        rows = self.conn.execute(
            sa.select(self.table.c.name, self.table.c.id).where(self.table.c.name.in_(names))
        )
        self.ids.update({name: i for name, i in rows})


def _insert(conn: Connection, table: sa.Table) -> Any:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def write_run(
    store: Store,
    doc: Mapping[str, Any],
    verdicts: Iterable[Verdict],
    *,
    actions: Mapping[str, Any] | None = None,
    flags: Iterable[Mapping[str, Any]] = (),
    exit_code: int | None = None,
    source: str = "run",
) -> Written:
    """Record one run (its admission document, verdicts, actions) in one transaction;
    HistoryError saying why when the database refuses it (nothing of the run is left)."""
    try:
        with store.writing() as conn:
            return _write(conn, doc, verdicts, actions, list(flags), exit_code, source)
    except SQLAlchemyError as exc:
        raise store.fail(f"writing run {doc['run_id']}", exc) from None


def _write(
    conn: Connection,
    doc: Mapping[str, Any],
    verdicts: Iterable[Verdict],
    actions: Mapping[str, Any] | None,
    flags: list[Mapping[str, Any]],
    exit_code: int | None,
    source: str,
) -> Written:
    run_id = str(doc["run_id"])
    old = conn.execute(sa.select(t.runs.c.id).where(t.runs.c.run_id == run_id)).scalar()
    if old is not None:
        for child in t.CHILDREN:
            conn.execute(sa.delete(child).where(child.c.run == old))
        conn.execute(sa.delete(t.runs).where(t.runs.c.id == old))
    node_docs: Mapping[str, Mapping[str, Any]] = doc["nodes"]
    summary = doc["summary"]
    state = run_state(doc)
    run = conn.execute(
        sa.insert(t.runs).returning(t.runs.c.id),
        {
            "run_id": run_id,
            "started_at": parse_time(doc.get("started_at")),
            "finished_at": parse_time(doc.get("finished_at")),
            "inventory": doc.get("inventory"),
            "profiles": ",".join(sorted({str(d["profile"]) for d in node_docs.values()
                                         if d.get("profile")})),
            "nodegate_version": nodegate_version(),
            "transport": doc.get("transport"),
            "state": state,
            "interrupted_during": doc.get("interrupted"),
            "exit_code": exit_code,
            "stages": ",".join(doc.get("stages", ())),
            "checks": json.dumps(list(doc.get("checks", ()))),
            "nodes": int(summary["nodes"]),
            "admitted": int(summary["admitted"]),
            "rejected": int(summary["rejected"]),
            "not_qualified": int(summary["not_qualified"]),
            "source": source,
        },
    ).scalar_one()  # fmt: skip
    nodes = Names(conn, t.nodes)
    node_ids = nodes.ids_of(node_docs)
    conn.execute(sa.insert(t.decisions), [_decision(run, node_ids[n], d)
                                          for n, d in node_docs.items()])  # fmt: skip
    checks, comps = Names(conn, t.checks), Names(conn, t.components)
    n_verdicts = n_measured = 0
    encoded: dict[Any, str] = {}  # observed values repeat (16 lanes, a firmware version)
    keys: dict[str, str] = {}  # component -> its key (a GPU's serial left out)
    for batch in _batches(verdicts):
        node_ids = nodes.ids_of(v.node for v in batch)
        check_ids = checks.ids_of(v.check for v in batch)
        here = {v.component for v in batch}
        for c in here - keys.keys():
            keys[c] = component_key(c)
        comp_ids = comps.ids_of({*here, *(keys[c] for c in here)})
        rows, measured = [], []
        for v in batch:
            node, check, status, obs = (
                node_ids[v.node],
                check_ids[v.check],
                v.status.value,
                v.observed,
            )
            if obs is None:
                text = None
            else:
                try:
                    text = encoded.get(obs) or encoded.setdefault(obs, encode(obs))
                except TypeError:  # a list or mapping: not a key
                    text = encode(obs)
            rows.append((run, node, check, comp_ids[v.component], status, text, v.unit,
                         v.remediation_class, None if status == "pass" else v.message,
                         v.job))  # fmt: skip
            if type(obs) in (int, float):  # is_number, inlined: a bool is not a number
                ref = v.reference
                numeric = ref is not None and ref.direction != "one_of" and is_number(ref.value)
                measured.append((run, node, check, comp_ids[keys[v.component]], float(obs),
                                 v.unit, status, ref.direction if numeric and ref else None,
                                 float(ref.value) if numeric and ref else None))  # fmt: skip
        _bulk(conn, t.verdicts, VERDICT_COLUMNS, rows)
        measured.sort(key=lambda r: r[1:4])  # in the series index's order: fewer page splits
        _bulk(conn, t.measurements, MEASUREMENT_COLUMNS, measured)
        n_verdicts += len(rows)
        n_measured += len(measured)
    _actions(conn, run, nodes, actions)
    _infrastructure(conn, run, doc.get("infrastructure"))
    if flags:
        ids = nodes.ids_of(str(f["node"]) for f in flags)
        conn.execute(sa.insert(t.flags), [{
            "run": run, "node": ids[str(f["node"])], "rule": f["rule"], "check": f.get("check"),
            "component": f.get("component"), "blocks_admission": bool(f["blocks_admission"]),
            "message": f["message"], "based_on": json.dumps(list(f["based_on"])),
        } for f in flags])  # fmt: skip
    return Written(run_id, state, n_verdicts, n_measured, old is not None)


encode = json.JSONEncoder(separators=(",", ":"), default=str).encode
VERDICT_COLUMNS = ("run", "node", "check", "component", "status", "observed", "unit",
                   "remediation_class", "message", "job")  # fmt: skip
MEASUREMENT_COLUMNS = ("run", "node", "check", "component", "value", "unit", "status",
                       "ref_direction", "ref_value")  # fmt: skip


def _bulk(conn: Connection, table: sa.Table, columns: tuple[str, ...], rows: list[Any]) -> None:
    """Many rows at once on the transaction's own connection: PostgreSQL's COPY, SQLite's
    executemany (through SQLAlchemy, a 5,000-node run's 1.4 million verdicts took a minute)."""
    if not rows:
        return
    raw: Any = conn.connection.dbapi_connection
    names = ", ".join(f'"{c}"' for c in columns)
    if conn.dialect.name == "postgresql":
        with raw.cursor() as cur, cur.copy(f'COPY "{table.name}" ({names}) FROM STDIN') as copy:
            for r in rows:
                copy.write_row(r)
        return
    cur = raw.cursor()
    try:
        marks = ", ".join("?" * len(columns))
        cur.executemany(f'INSERT INTO "{table.name}" ({names}) VALUES ({marks})', rows)
    finally:
        cur.close()


def _batches(verdicts: Iterable[Verdict]) -> Iterator[list[Verdict]]:
    it = iter(verdicts)
    while batch := list(islice(it, BATCH)):
        yield batch


def _decision(run: int, node: int, d: Mapping[str, Any]) -> dict[str, Any]:
    reasons = [_reason(r) for r in d.get("reasons", ())]
    first = causes(reasons)[0] if reasons and d["state"] == "rejected" else None
    classes = dict.fromkeys(r.remediation_class or UNJUDGED_CLASS for r in causes(reasons))
    line = None
    if first is not None:
        comp = f" [{first.component}]" if first.component else ""
        line = f"{first.check}{comp} {first.status.upper()}: {first.message}"
    return {
        "run": run,
        "node": node,
        "state": d["state"],
        "profile": d.get("profile"),
        "remediation": ",".join(classes) if first is not None else None,
        "reason_check": first.check if first is not None else None,
        "reason": line,
        "reasons": len(reasons),
        "waived": len(d.get("waived", ())),
        "checks_passed": int(d.get("checks_passed", 0)),
        "checks_total": int(d.get("checks_total", 0)),
    }


def _reason(r: Mapping[str, Any]) -> Reason:
    return Reason(
        str(r["check"]), str(r["status"]), str(r.get("component") or ""), r.get("observed"),
        r.get("expected"), str(r.get("message") or ""), r.get("unit"), r.get("remediation"),
        tuple(r.get("evidence", ())), r.get("remediation_class"),
    )  # fmt: skip


def _actions(conn: Connection, run: int, nodes: Names, doc: Mapping[str, Any] | None) -> None:
    if not doc:
        return
    rows = []
    for target, section in sorted(doc.get("targets", {}).items()):
        acts = section.get("actions", ())
        ids = nodes.ids_of(str(a["node"]) for a in acts)
        rows += [{
            "run": run, "node": ids[str(a["node"])], "target": target,
            "mode": section.get("mode", "dry-run"), "decision": a.get("decision"),
            "action": a.get("action"), "result": a.get("result"), "reason": a.get("reason"),
            "error": a.get("error"),
        } for a in acts]  # fmt: skip
    if rows:
        conn.execute(sa.insert(t.actions), rows)


def _infrastructure(conn: Connection, run: int, section: Any) -> None:
    """admission.json's `infrastructure` (the fabric stage's findings), as far as it is a
    list of findings (a mapping holding one under `findings` too); absent: nothing."""
    if isinstance(section, Mapping):
        section = section.get("findings", ())
    if not isinstance(section, list):
        return
    rows = []
    for f in section:
        if not isinstance(f, Mapping):
            continue
        comp = f.get("component")
        if isinstance(comp, (list, tuple)):  # named by both ends
            comp = " <-> ".join(map(str, comp))
        rows.append({
            "run": run, "component": str(comp or ""), "check": f.get("check"),
            "status": f.get("status"), "observed": _text(f.get("observed")),
            "expected": _text(f.get("expected")), "remediation": _text(f.get("remediation")),
            "doc": json.dumps(f, sort_keys=True, default=str),
        })  # fmt: skip
    if rows:
        conn.execute(sa.insert(t.infrastructure), rows)


def _text(v: Any) -> str | None:
    return None if v is None else v if isinstance(v, str) else json.dumps(v, default=str)


@dataclass(frozen=True, slots=True)
class RunFiles:
    """A run directory's documents the history reads."""

    admission: dict[str, Any]
    verdicts: Path
    actions: dict[str, Any] | None


def run_files(run_dir: Path) -> RunFiles:
    """A run directory's admission.json, verdicts file and actions.json (when there), checked;
    ConfigError naming the directory and the file that is wrong."""

    if not run_dir.is_dir():
        raise ConfigError(f"history import {run_dir}: not a directory")
    docs: dict[str, Any] = {}
    for name in (ADMISSION_FILE, ACTIONS_FILE):
        p = run_dir / name
        if not p.is_file():
            if name == ADMISSION_FILE:
                raise ConfigError(f"history import {run_dir}: no {name} (not a run directory?)")
            continue
        try:
            docs[name] = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, OSError) as exc:
            raise ConfigError(f"history import {p}: not readable JSON ({exc})") from None
    adm = docs[ADMISSION_FILE]
    needed = ("run_id", "nodes", "summary")
    if not isinstance(adm, dict) or any(k not in adm for k in needed):
        raise ConfigError(
            f"history import {run_dir / ADMISSION_FILE}: not an admission document "
            f"(needs {', '.join(needed)})"
        )
    verdicts = verdicts_path(run_dir)
    if verdicts is None:
        raise ConfigError(f"history import {run_dir}: no {VERDICTS_FILE}")
    return RunFiles(adm, verdicts, docs.get(ACTIONS_FILE))


def import_run(store: Store, run_dir: Path) -> Written:
    """Back-fill one run directory (idempotent: its run id's rows are replaced)."""

    files = run_files(run_dir)
    flags = (files.admission.get("history") or {}).get("flags", ())
    try:  # a verdict that cannot be read rolls the whole run back
        _, verdicts = read_verdicts(files.verdicts.parent)
        return write_run(store, files.admission, verdicts,
                         actions=files.actions, flags=flags, source="import")  # fmt: skip
    except ConfigError as exc:
        raise ConfigError(f"history import {exc}") from None
