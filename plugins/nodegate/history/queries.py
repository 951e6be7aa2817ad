"""The questions asked of the history, each a function returning JSON-ready rows.

Runs are ordered by their start time (then by when they were recorded), so a back-filled
older run takes its place in a node's timeline.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from nodegate.core.values import Status, Verdict, component_key, is_number
from nodegate.history import schema as t

REJECTED = "rejected"


def _iso(when: dt.datetime | None) -> str | None:
    return None if when is None else when.replace(tzinfo=dt.timezone.utc).isoformat()


def _run_order() -> tuple[Any, ...]:
    return (sa.func.coalesce(t.runs.c.started_at, t.runs.c.finished_at), t.runs.c.id)


def runs(conn: Connection, limit: int | None = None) -> list[dict[str, Any]]:
    """Every run, newest last (the `limit` newest)."""
    q = sa.select(t.runs).order_by(*(c.desc() for c in _run_order()))
    if limit:
        q = q.limit(limit)
    out = [dict(r._mapping) for r in conn.execute(q)]
    out.reverse()
    for r in out:
        r["started_at"], r["finished_at"] = _iso(r["started_at"]), _iso(r["finished_at"])
        r.pop("id")
    return out


def resolve_run(conn: Connection, ref: str) -> str | None:
    """`last`, `last-complete` or a run id -> the run id (None: no such run)."""
    q = sa.select(t.runs.c.run_id)
    if ref in ("last", "last-complete"):
        if ref == "last-complete":
            q = q.where(t.runs.c.state == t.COMPLETE)
        return conn.execute(q.order_by(*(c.desc() for c in _run_order())).limit(1)).scalar()
    return conn.execute(q.where(t.runs.c.run_id == ref)).scalar()


def _decisions(conn: Connection, node: str | None = None) -> Iterable[Any]:
    q = (
        sa.select(
            t.nodes.c.name.label("node"), t.runs.c.run_id, t.runs.c.started_at,
            t.runs.c.finished_at, t.runs.c.state.label("run_state"), t.decisions.c.state,
            t.decisions.c.profile, t.decisions.c.remediation, t.decisions.c.reason_check,
            t.decisions.c.reason, t.decisions.c.waived,
        )
        .join(t.runs, t.runs.c.id == t.decisions.c.run)
        .join(t.nodes, t.nodes.c.id == t.decisions.c.node)
        .order_by(t.nodes.c.name, *_run_order())
    )  # fmt: skip
    if node is not None:
        q = q.where(t.nodes.c.name == node)
    return conn.execute(q)


def _when(r: Any) -> dt.datetime | None:
    w: dt.datetime | None = r.started_at or r.finished_at
    return w


def node_states(
    conn: Connection, window_days: float = 30.0, now: dt.datetime | None = None
) -> list[dict[str, Any]]:
    """Per node: its last decision, how often it was rejected in the window, the last reason."""
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    since = now - dt.timedelta(days=window_days)
    out: dict[str, dict[str, Any]] = {}
    for r in _decisions(conn):
        e = out.setdefault(r.node, {"node": r.node, "rejections": 0, "last_reason": None,
                                    "last_rejected_run": None})  # fmt: skip
        e.update(last_run=r.run_id, last_at=_iso(_when(r)), state=r.state, profile=r.profile)
        if r.state == REJECTED:
            when = _when(r)
            if when is not None and when >= since:
                e["rejections"] += 1
            e["last_reason"], e["last_rejected_run"] = r.reason, r.run_id
    return [out[n] for n in sorted(out)]


def timeline(conn: Connection, node: str) -> list[dict[str, Any]]:
    """One node's decisions, oldest first."""
    return [
        {"run_id": r.run_id, "at": _iso(_when(r)), "run_state": r.run_state, "state": r.state,
         "remediation": r.remediation, "reason": r.reason, "waived": r.waived}
        for r in _decisions(conn, node)
    ]  # fmt: skip


def series(
    conn: Connection, node: str, metric: str, component: str | None = None
) -> list[dict[str, Any]]:
    """One metric (a check id's number) of one node, per component, oldest first; `component`
    is the part's key (a GPU's serial left out), or its start (`mlx5_3`)."""
    comp = t.components
    q = (
        sa.select(
            t.runs.c.run_id, t.runs.c.started_at, t.runs.c.finished_at, t.runs.c.state,
            comp.c.name.label("component"), t.measurements.c.value, t.measurements.c.unit,
            t.measurements.c.status, t.measurements.c.ref_direction, t.measurements.c.ref_value,
        )
        .select_from(t.measurements)
        .join(t.runs, t.runs.c.id == t.measurements.c.run)
        .join(comp, comp.c.id == t.measurements.c.component)
        .where(
            t.measurements.c.node == sa.select(t.nodes.c.id).where(t.nodes.c.name == node)
            .scalar_subquery(),
            t.measurements.c.check == sa.select(t.checks.c.id).where(t.checks.c.name == metric)
            .scalar_subquery(),
        )
        .order_by(comp.c.name, *_run_order())
    )  # fmt: skip
    if component:
        q = q.where(sa.or_(comp.c.name == component, comp.c.name.startswith(component + " ")))
    return [
        {"run_id": r.run_id, "at": _iso(r.started_at or r.finished_at), "run_state": r.state,
         "component": r.component, "value": r.value, "unit": r.unit, "status": r.status,
         "threshold": None if r.ref_direction is None
         else {"direction": r.ref_direction, "value": r.ref_value}}
        for r in conn.execute(q)
    ]  # fmt: skip


def yields(conn: Connection, limit: int | None = None, top: int = 3) -> list[dict[str, Any]]:
    """Per run: admitted share of its nodes and of those judged (admitted + rejected), the top
    failing checks, rejected nodes by remediation class, and the change from the run before."""
    rows = runs(conn, limit)
    ids = dict(conn.execute(sa.select(t.runs.c.run_id, t.runs.c.id)).all())
    run_ids = [ids[r["run_id"]] for r in rows]
    failing: dict[int, dict[str, int]] = {}
    classes: dict[int, dict[str, int]] = {}
    if run_ids:
        q = sa.select(t.decisions.c.run, t.decisions.c.reason_check, t.decisions.c.remediation)
        q = q.where(t.decisions.c.run.in_(run_ids), t.decisions.c.state == REJECTED)
        for run, check, remediation in conn.execute(q):
            f = failing.setdefault(run, {})
            f[check] = f.get(check, 0) + 1
            c = classes.setdefault(run, {})
            for cls in (remediation or "").split(","):
                if cls:
                    c[cls] = c.get(cls, 0) + 1
    out, before = [], None
    for r in rows:
        rid = ids[r["run_id"]]
        judged = r["admitted"] + r["rejected"]
        share = round(r["admitted"] / judged, 4) if judged else None
        f = failing.get(rid, {})
        out.append({
            "run_id": r["run_id"], "at": r["started_at"], "state": r["state"],
            "nodes": r["nodes"], "admitted": r["admitted"], "rejected": r["rejected"],
            "not_qualified": r["not_qualified"],
            "admitted_share": round(r["admitted"] / r["nodes"], 4) if r["nodes"] else None,
            "yield": share,
            "change": None if share is None or before is None else round(share - before, 4),
            "top_failing": [{"check": c, "nodes": n} for c, n in
                            sorted(f.items(), key=lambda kv: (-kv[1], kv[0]))[:top]],
            "by_remediation": dict(sorted(classes.get(rid, {}).items())),
        })  # fmt: skip
        if share is not None and r["state"] == t.COMPLETE:
            before = share
    return out


def between_rejections(conn: Connection) -> list[dict[str, Any]]:
    """Per node ever rejected: its rejections, its incidents (a rejection after a run that did
    not reject it, or its first run), and the mean time between incident starts."""
    per: dict[str, list[Any]] = {}
    for r in _decisions(conn):
        per.setdefault(r.node, []).append(r)
    out = []
    for node in sorted(per):
        ds = per[node]
        starts: list[dt.datetime] = []
        prev = None
        for d in ds:
            when = _when(d)
            if d.state == REJECTED and prev != REJECTED and when is not None:
                starts.append(when)
            prev = d.state
        rejections = sum(1 for d in ds if d.state == REJECTED)
        if not rejections:
            continue
        gaps = [(b - a).total_seconds() / 3600 for a, b in zip(starts, starts[1:], strict=False)]
        out.append({
            "node": node, "runs": len(ds), "rejections": rejections, "incidents": len(starts),
            "mean_hours_between": round(statistics.fmean(gaps), 2) if gaps else None,
            "first": _iso(starts[0]) if starts else None,
            "last": _iso(starts[-1]) if starts else None,
        })  # fmt: skip
    return out


def node_history(
    conn: Connection, node_names: Iterable[str], runs_back: int
) -> dict[str, list[Mapping[str, Any]]]:
    """Node -> its last `runs_back` decisions (oldest first) with each run's state and time:
    what the rules and the reports read."""
    names = sorted(set(node_names))
    out: dict[str, list[Mapping[str, Any]]] = {n: [] for n in names}
    for i in range(0, len(names), 500):
        chunk = names[i : i + 500]
        q = (
            sa.select(
                t.nodes.c.name.label("node"), t.runs.c.run_id, t.runs.c.started_at,
                t.runs.c.finished_at, t.runs.c.state.label("run_state"), t.decisions.c.state,
                t.decisions.c.reason_check, t.decisions.c.reason, t.decisions.c.remediation,
            )
            .join(t.runs, t.runs.c.id == t.decisions.c.run)
            .join(t.nodes, t.nodes.c.id == t.decisions.c.node)
            .where(t.nodes.c.name.in_(chunk))
            .order_by(t.nodes.c.name, *_run_order())
        )  # fmt: skip
        for r in conn.execute(q):
            out[r.node].append({"run_id": r.run_id, "at": _when(r), "run_state": r.run_state,
                                "state": r.state, "reason_check": r.reason_check,
                                "reason": r.reason, "remediation": r.remediation})  # fmt: skip
    return {n: ds[-runs_back:] if runs_back else ds for n, ds in out.items()}


def metric_history(
    conn: Connection, node_names: Iterable[str], metrics: Iterable[str], complete_only: bool
) -> dict[tuple[str, str, str], list[tuple[str, float]]]:
    """(node, metric, component key) -> [(run id, value)] oldest first."""
    names, mets = sorted(set(node_names)), sorted(set(metrics))
    out: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
    if not mets:
        return out
    for i in range(0, len(names), 500):
        q = (
            sa.select(t.nodes.c.name, t.checks.c.name, t.components.c.name, t.runs.c.run_id,
                      t.measurements.c.value)
            .select_from(t.measurements)
            .join(t.runs, t.runs.c.id == t.measurements.c.run)
            .join(t.nodes, t.nodes.c.id == t.measurements.c.node)
            .join(t.checks, t.checks.c.id == t.measurements.c.check)
            .join(t.components, t.components.c.id == t.measurements.c.component)
            .where(t.nodes.c.name.in_(names[i : i + 500]), t.checks.c.name.in_(mets))
            .order_by(*_run_order())
        )  # fmt: skip
        if complete_only:
            q = q.where(t.runs.c.state == t.COMPLETE)
        for node, check, comp, run_id, value in conn.execute(q):
            out.setdefault((node, check, comp), []).append((run_id, value))
    return out


def stored_run(conn: Connection, run_id: str) -> tuple[dict[str, Any], list[Verdict]] | None:
    """A recorded run as its admission document's head and its verdicts (what a baseline is
    built from: `nodegate.compare.baseline.baseline_doc`); None when it is not recorded."""
    run = conn.execute(sa.select(t.runs).where(t.runs.c.run_id == run_id)).first()
    if run is None:
        return None
    nodes = {
        name: {"profile": profile, "admitted": state == "admitted", "state": state}
        for name, profile, state in conn.execute(
            sa.select(t.nodes.c.name, t.decisions.c.profile, t.decisions.c.state)
            .join(t.nodes, t.nodes.c.id == t.decisions.c.node)
            .where(t.decisions.c.run == run.id)
            .order_by(t.nodes.c.name)
        )
    }
    v, n, c, k = t.verdicts, t.nodes, t.checks, t.components
    q = (
        sa.select(c.c.name, n.c.name, v.c.status, k.c.name, v.c.observed, v.c.unit, v.c.message,
                  v.c.remediation_class, v.c.job)
        .select_from(v)
        .join(n, n.c.id == v.c.node).join(c, c.c.id == v.c.check)
        .join(k, k.c.id == v.c.component)
        .where(v.c.run == run.id)
    )  # fmt: skip
    verdicts = [
        Verdict(check, node, Status(status), comp, None if obs is None else json.loads(obs),
                None, unit, msg or "", remediation_class=cls, job=job)
        for check, node, status, comp, obs, unit, msg, cls, job in conn.execute(q)
    ]  # fmt: skip
    head = {
        "run_id": run.run_id, "finished_at": _iso(run.finished_at), "inventory": run.inventory,
        "transport": run.transport, "complete": run.state == t.COMPLETE,
        "stages": [s for s in run.stages.split(",") if s], "checks": json.loads(run.checks),
        "nodes": nodes,
    }  # fmt: skip
    return head, verdicts


REPORT_NODES = 200  # rejected nodes report.html shows a past for (the page stays readable)


def node_past(
    conn: Connection, doc: Mapping[str, Any], runs_back: int = 5, points: int = 10
) -> dict[str, dict[str, Any]]:
    """For report.html, per node `doc` rejects (the first REPORT_NODES): its last `runs_back`
    recorded decisions and, when its first cause is a number, that metric's recorded values
    followed by this run's (`doc`: the run's admission document, not recorded yet)."""
    rejected = [n for n, d in doc["nodes"].items() if d["state"] == REJECTED][:REPORT_NODES]
    if not rejected:
        return {}
    past = node_history(conn, rejected, runs_back)
    failed: dict[str, tuple[str, str, float, str | None]] = {}
    for n in rejected:
        for r in doc["nodes"][n]["reasons"]:
            if r["status"] == "fail" and is_number(r.get("observed")):
                failed[n] = (r["check"], component_key(r["component"]), r["observed"], r["unit"])
                break
    values = metric_history(conn, failed, {c for c, _, _, _ in failed.values()}, False)
    out: dict[str, dict[str, Any]] = {}
    for n in rejected:
        trend = None
        if n in failed:
            check, comp, now, unit = failed[n]
            seen = values.get((n, check, comp), [])[-(points - 1) :]
            trend = {"check": check, "component": comp, "unit": unit,
                     "points": [*seen, (doc["run_id"], now)]}  # fmt: skip
        decisions = [{"run_id": d["run_id"], "state": d["state"], "reason": d["reason"]}
                     for d in past.get(n, [])]  # fmt: skip
        if decisions or trend:
            out[n] = {"decisions": decisions, "trend": trend}
    return out
