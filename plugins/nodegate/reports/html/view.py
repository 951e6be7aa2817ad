"""What report.html shows, as plain data built from admission.json and verdicts.jsonl.gz: the
decision, the nodes x checks heatmap by rack, the failed verdicts with their evidence."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from nodegate.core.safetext import printable
from nodegate.reports.folding import (
    causes,
    folds,
    group_of,
    node_state,
    nodeset,
    observed_expected,
    with_unit_text,
)
from nodegate.stages.registry import STAGES

STATUSES = ("pass", "fail", "error", "skip", "not_run", "waived")  # the legend's order
# Worst first: a cell shows the worst of its verdicts.
STATUS_RANK = {"error": 5, "fail": 4, "not_run": 3, "skip": 2, "waived": 1, "pass": 0}


@dataclass(frozen=True, slots=True)
class Cell:
    status: str  # pass | fail | error | skip | not_run | waived
    title: str  # "" for a pass
    message: str | None = None  # the title's verdict message (None: no verdict of that status)


@dataclass(frozen=True, slots=True)
class Row:
    node: str
    state: str
    cells: tuple[Cell, ...]
    evidence: str | None  # href of the first cause's evidence


@dataclass
class Group:
    name: str
    nodes: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    @property
    def nodeset(self) -> str:
        return nodeset(self.nodes)

    @property
    def rejected(self) -> int:
        return sum(r.state != "admitted" for r in self.rows)


@dataclass(frozen=True, slots=True)
class ReasonView:
    check: str
    status: str
    component: str
    observed: str
    expected: str
    message: str
    remediation: str
    remediation_class: str
    evidence: tuple[tuple[str, str, str | None], ...]  # (label, href, its page's href)


@dataclass(frozen=True, slots=True)
class NodeView:
    node: str
    state: str
    labels: str
    reasons: tuple[ReasonView, ...]
    echoes: int  # consequences left out (skips after the cause): admission.json has them
    waived: tuple[ReasonView, ...]


PASS = Cell("pass", "")


def href(ref: str) -> str:
    """An evidence reference (`raw/n/stage.json#cmd`) as a link relative to the run directory."""
    return quote(ref, safe="/#._-")


def check_order(checks: Iterable[str]) -> list[str]:
    """Checks in pipeline order (stage, then check table), others (site checks) after."""
    order = {c.id: i for i, c in enumerate(c for s in STAGES for c in s.checks)}
    return sorted(set(checks), key=lambda c: (order.get(c, len(order)), c))


def worst_status(vs: Sequence[Mapping[str, Any]]) -> str:
    return max((str(v["status"]) for v in vs), key=STATUS_RANK.__getitem__, default="not_run")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return str(value)


Pages = Callable[[str], str | None]  # an evidence reference -> its page's href, if written


def no_pages(ref: str) -> str | None:
    return None


def reason_view(r: Mapping[str, Any], page: Pages = no_pages) -> ReasonView:
    unit = r.get("unit")

    def with_unit(v: Any) -> str:
        return "" if v is None else with_unit_text(_text(v), v, unit)

    return ReasonView(
        check=r["check"],
        status=r["status"],
        component=r["component"],
        observed=with_unit(r["observed"]),
        expected=with_unit(r["expected"]),
        message=r["message"] + observed_expected(r),
        remediation=r.get("remediation") or "",
        remediation_class=r.get("remediation_class") or "",
        evidence=tuple((e, href(e), page(e)) for e in r.get("evidence") or ()),
    )


def heatmap(
    doc: Mapping[str, Any],
    verdicts: Mapping[tuple[str, str], list[Mapping[str, Any]]],
    stage_file: Callable[[str, str], str | None] = lambda node, check: None,
    page: Pages = no_pages,
) -> tuple[list[str], list[Group]]:
    """Columns (checks) and groups of rows; a group with every node admitted has no rows."""
    columns = check_order(doc["checks"])
    groups: dict[str, Group] = {}
    for node, d in doc["nodes"].items():
        g = groups.setdefault(group_of(d.get("labels") or {}), Group(""))
        g.name = group_of(d.get("labels") or {})
        g.nodes.append(node)
        state = node_state(d)
        if state == "admitted" and not d.get("waived"):
            continue
        g.rows.append(_row(node, d, state, columns, verdicts, stage_file, page))
    for g in groups.values():
        if not g.rows:
            continue
        # A group with a rejected node shows all its nodes: the pattern across a rack is news.
        shown = {r.node for r in g.rows}
        for node in g.nodes:
            if node not in shown:
                d = doc["nodes"][node]
                g.rows.append(_row(node, d, node_state(d), columns, verdicts, stage_file, page))
        order = {n: i for i, n in enumerate(g.nodes)}
        g.rows.sort(key=lambda r: order[r.node])
    return columns, list(groups.values())


def _row(
    node: str,
    d: Mapping[str, Any],
    state: str,
    columns: Sequence[str],
    verdicts: Mapping[tuple[str, str], list[Mapping[str, Any]]],
    stage_file: Callable[[str, str], str | None],
    page: Pages = no_pages,
) -> Row:
    by_check: dict[str, str] = {}
    for r in d["reasons"]:
        if r["status"] == "not_run":
            by_check[r["check"]] = "not_run"
    for r in d.get("waived") or ():
        by_check.setdefault(r["check"], "waived")
    cells = []
    for check in columns:
        vs = verdicts.get((check, node), [])
        status = by_check.get(check) or worst_status(vs)
        if status == "pass":
            cells.append(PASS)
            continue
        bad = next((v for v in vs if v["status"] == status), None)
        message = None if bad is None else str(bad["message"])
        title = f"{node} {check}: {status}" + ("" if message is None else f": {message}")
        cells.append(Cell(status, title, message))
    reasons = causes(d["reasons"]) if d["reasons"] else []
    first = next((e for r in reasons for e in r.get("evidence") or ()), None)
    if first is None and reasons:  # no command to cite (a session that never ran): its file
        first = stage_file(node, reasons[0]["check"])
    return Row(node, state, tuple(cells), (page(first) or href(first)) if first else None)


def evidence_nodes(doc: Mapping[str, Any]) -> list[str]:
    """The nodes whose evidence the report cites: rejected, or with a waived failure (those
    whose files the run expanded; a node not qualified cites none)."""
    return [n for n, d in doc["nodes"].items() if node_state(d) == "rejected" or d.get("waived")]


def node_views(
    doc: Mapping[str, Any], page: Pages = no_pages, limit: int | None = None
) -> list[NodeView]:
    """Every node not admitted, and every node with a waived failure, with its causes (the
    first `limit` of them)."""
    out: list[NodeView] = []
    for node, d in doc["nodes"].items():
        state = node_state(d)
        if state == "admitted" and not d.get("waived"):
            continue
        if limit is not None and len(out) == limit:
            break
        shown = causes(d["reasons"]) if d["reasons"] else []
        labels = ", ".join(f"{k}={v}" for k, v in sorted((d.get("labels") or {}).items()))
        out.append(
            NodeView(
                node,
                state,
                labels,
                tuple(reason_view(r, page) for r in shown),
                len(d["reasons"]) - len(shown),
                tuple(reason_view(r, page) for r in d.get("waived") or ()),
            )
        )
    return out


def rejected_by(doc: Mapping[str, Any]) -> tuple[str, list[tuple[str, int, str]]]:
    """The rejected nodes by remediation class when admission.json has them, else by check."""
    by_class = doc.get("remediation") or {}
    if by_class:
        rows = [(c, len(ns), nodeset(ns)) for c, ns in by_class.items()]
        return "remediation class", sorted(rows, key=lambda r: (-r[1], r[0]))
    rows = [(f"{f.check} {f.status}", len(f.nodes), nodeset(f.nodes)) for f in folds(doc)]
    return "check", rows


def index_verdicts(vdoc: Mapping[str, Any]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for v in vdoc.get("verdicts", ()):
        out.setdefault((v["check"], v["node"]), []).append(v)
    return out


@dataclass(frozen=True, slots=True)
class PastView:
    """A rejected node's recent decisions and its failed metric's trend (the run history)."""

    decisions: tuple[tuple[str, str, str], ...]  # (run id, state, reason), oldest first
    metric: str  # "check [component]", or "" without a number to follow
    unit: str
    points: tuple[tuple[str, float], ...]  # (run id, value), this run last
    polyline: str  # SVG points of the trend, 200 x 40


def past_view(h: Mapping[str, Any]) -> PastView:
    trend = h.get("trend") or {}
    points = tuple((str(r), float(v)) for r, v in trend.get("points", ()))
    line = ""
    if len(points) > 1:
        lo, hi = min(v for _, v in points), max(v for _, v in points)
        span = (hi - lo) or 1.0
        step = 190 / (len(points) - 1)
        line = " ".join(
            f"{5 + i * step:.1f},{35 - (v - lo) / span * 30:.1f}" for i, (_, v) in enumerate(points)
        )
    metric = f"{trend['check']} [{trend['component']}]" if trend else ""
    return PastView(
        tuple((d["run_id"], d["state"], d.get("reason") or "") for d in h.get("decisions", ())),
        metric, str(trend.get("unit") or ""), points, line,
    )  # fmt: skip


STATUS_CODES = {s: str(i) for i, s in enumerate(STATUSES)}


def heatmap_data(
    columns: Sequence[str], groups: Sequence[Group], detailed: frozenset[str]
) -> dict[str, Any]:
    """The heatmap's rows as compact data, drawn by the page's script when a group is opened
    (a large run: ~250 bytes per node at 96 checks, where the drawn rows took ~6 KB).

    Per group, its rows as `[node, state, codes, evidence href, anchored, bad]`: `codes` one
    digit per column (an index in `statuses`), `bad` the non-pass cells' `[column, message]`
    pairs, each message an index in `messages` (the messages repeat across nodes: stored once;
    -1: no verdict of the cell's status, a title without a message).
    Node text is made `printable` here; the template escapes it for the script element
    (`tojson`) and the script sets it as text, never as markup.
    """
    messages: dict[str, int] = {}
    out = []
    for g in groups:
        rows = []
        for r in g.rows:
            bad: list[int] = []
            for j, cell in enumerate(r.cells):
                if cell.status != "pass":
                    if cell.message is None:
                        bad += [j, -1]
                    else:
                        message = printable(cell.message)
                        bad += [j, messages.setdefault(message, len(messages))]
            codes = "".join(STATUS_CODES[c.status] for c in r.cells)
            rows.append([printable(r.node), r.state, codes, r.evidence, r.node in detailed, bad])
        out.append(rows)
    return {
        "statuses": list(STATUS_CODES),
        "columns": [printable(c) for c in columns],
        "messages": list(messages),
        "groups": out,
    }
