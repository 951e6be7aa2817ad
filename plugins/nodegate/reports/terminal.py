"""The terminal of a nodegate run serves the decision: pytest's per-item failure reports are off
by default (the evidence is in the reports), and the admission summary, folded by check and
nodeset, is printed last, after pytest's own closing line, on one screen at any fleet size.

    ============================= nodegate admission =============================
    nodegate run r1: 1024 nodes, 974 admitted, 50 rejected (stages: reach, pcie_gpu)
    ADMITTED 974: gpu[0001-0002,0004-...]
    REJECTED 50: gpu[0003,0035,...]
    reach.ssh FAIL on 32 nodes: gpu[0003,0035,0067,0099,0131,0163,0195,0227] +24 more
      gpu0003: reach.ssh FAIL [ssh]: unreachable: connection to root@10.0.0.3:22 refused
      ... 31 more nodes with other messages: report.html, admission.json
    admission: reports/r1/admission.json
    report: reports/r1/report.html
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nodegate.core.results import ADMISSION_FILE, REPORT_FILE
from nodegate.core.safetext import printable
from nodegate.reports.folding import Fold, clip_nodeset, folds, node_state, nodeset, reason_line


def quiet_item_reports(config: pytest.Config) -> None:
    """pytest's FAILURES section and FAILED lines grow with the fleet (minutes at 5,000
    nodes); a choice the operator made (--tb, -r) is kept."""
    if config.option.tbstyle == "auto":
        config.option.tbstyle = "no"
    if config.option.reportchars == "fE":  # pytest's default
        config.option.reportchars = "N"
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:  # it read the option when it was made
            reporter.reportchars = "".join(c for c in reporter.reportchars if c not in "fEF")


class DecisionScreen:
    """The "nodegate admission" section, written after pytest's closing line."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.got: tuple[dict[str, Any], Path] | None = None

    @pytest.hookimpl
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        self.got = (doc, run_dir)

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outside the terminal reporter's wrapper
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if self.got is not None and reporter is not None:
            doc, run_dir = self.got
            reporter.write_sep("=", "nodegate admission")
            paths = Paths(
                os.path.relpath(run_dir / ADMISSION_FILE),
                os.path.relpath(run_dir / REPORT_FILE)
                if (run_dir / REPORT_FILE).exists()
                else None,
            )
            for line in decision_lines(doc, paths, self.budget):
                reporter.write_line(line)
        return result


@dataclass(frozen=True, slots=True)
class Paths:
    admission: str
    report: str | None = None

    def where(self) -> str:
        return ", ".join(p for p in (self.report, self.admission) if p)


def fold_lines(found: Sequence[Fold], budget: int, where: str) -> list[str]:
    """The reason lines, within `budget` lines (0: no limit): a fold with one reason line is
    that line; a larger one has a header, then as many of its lines as the budget allows."""
    shares = _shares(found, budget or 1 << 30)
    lines: list[str] = []
    left_nodes: set[str] = set()
    left_folds = 0
    for f, share in zip(found, shares, strict=True):
        if share == 0:
            left_folds += 1
            left_nodes.update(f.nodes)
            continue
        items = list(f.reasons.values())
        if len(items) == 1:
            lines.append("  " + reason_line(items[0][1], items[0][0]))
            continue
        lines.append(f.header())
        shown = items[: share - 1] if share - 1 >= len(items) else items[: share - 2]
        lines += ["  " + reason_line(nodes, r) for r, nodes in shown]
        rest = {n for _, ns in items[len(shown) :] for n in ns}
        if rest:
            others = "message" if len(items) - len(shown) == 1 else "messages"
            lines.append(
                f"  ... {len(rest)} more node{'s' * (len(rest) != 1)} with other {others}: {where}"
            )
    if left_folds:
        lines.append(
            f"... {left_folds} more check{'s' * (left_folds != 1)} fail on {len(left_nodes)} "
            f"node{'s' * (len(left_nodes) != 1)}: {where}"
        )
    return lines


def _shares(found: Sequence[Fold], limit: int) -> list[int]:
    """Lines per fold (0: left out): one reason line, or a header, one reason and a "... more"
    line, for each fold in order while `limit` lasts; what is left goes round the folds."""

    def need(f: Fold) -> int:
        return 1 if len(f.reasons) == 1 else len(f.reasons) + 1

    shares = [0] * len(found)
    left = limit - 1  # room for the "... more checks" line
    for i, f in enumerate(found):
        first = min(need(f), 3)
        if left < first:
            break
        shares[i], left = first, left - first
    growing = [i for i, f in enumerate(found) if 0 < shares[i] < need(f)]
    while left > 0 and growing:  # one more line to each fold in turn: no fold hogs the screen
        for i in list(growing):
            if left == 0:
                break
            shares[i], left = shares[i] + 1, left - 1
            if shares[i] == need(found[i]):
                growing.remove(i)
    return shares


WAIVED_LINES = 10  # waived failures listed one per line up to this many, then counted


def missing_checks(doc: Mapping[str, Any]) -> str:
    """The required checks a diagnostic run left out, named (the first few)."""
    out = list(doc.get("out_of_scope") or ())
    shown = ", ".join(out[:6]) + (f" (+{len(out) - 6} more)" if len(out) > 6 else "")
    return f"{len(out)} required checks did not run in this run: {shown}"


def systemic_line(s: Mapping[str, Any]) -> str:
    """One systemic check (admission.json `systemic`), named as the tool problem it is."""
    return (
        f"SYSTEMIC {s['check']} ERROR on {s['errors']} of {s['judged']} nodes (more than "
        f"{s['error_share']:.0%}): probable controller/tool problem, not the nodes' (not held "
        f"against {nodeset(s['nodes'])}, not drained for it): {s['message']}"
    )


def admission_notes(doc: Mapping[str, Any], where: str) -> list[str]:
    """Waived failures, ignored (expired) waivers and an incomplete run's consequences."""
    lines = []
    waived = [(n, r) for n, d in doc["nodes"].items() for r in d.get("waived") or ()]
    for node, r in waived if len(waived) <= WAIVED_LINES else ():
        w = r["waiver"]
        comp = f" [{r['component']}]" if r["component"] else ""
        lines.append(
            f"WAIVED {node}: {r['check']} {r['status'].upper()}{comp}: {r['message']} "
            f"- waiver {w['index']}: {w['reason']} (owner {w['owner']}, until {w['expires']})"
        )
    if len(waived) > WAIVED_LINES:
        lines.append(f"WAIVED {len(waived)} failures (listed in {where})")
    for w in (doc.get("waivers") or {}).get("expired", ()):
        comp = f" [{w['component']}]" if w["component"] else ""
        lines.append(
            f"WARNING waiver {w['index']} ({w['check']}{comp} on {w['nodes']}, owner "
            f"{w['owner']}) expired on {w['expires']}: ignored"
        )
    if doc.get("complete") is False and not doc.get("interrupted"):
        follow = (
            "reports/latest and actions follow it (--allow-incomplete)"
            if doc.get("actionable")
            else "reports/latest and actions do not follow it (--allow-incomplete to let them)"
        )
        lines.append(f"INCOMPLETE run (not every required check ran): {follow}")
    return lines


def summary_lines(doc: Mapping[str, Any], admission_path: str) -> list[str]:
    """The whole section with no line budget (every fold shown), as tests and tools read it."""
    return decision_lines(doc, Paths(admission_path), budget=0)


def decision_lines(doc: Mapping[str, Any], paths: Paths, budget: int) -> list[str]:
    """The whole section, one escaped line per entry; the last line says where the full list is."""
    s = doc["summary"]
    states = {n: node_state(d) for n, d in doc["nodes"].items()}
    admitted = [n for n, st in states.items() if st == "admitted"]
    rejected = [n for n, st in states.items() if st == "rejected"]
    unqualified = [n for n, st in states.items() if st == "not_qualified"]
    during = f" INTERRUPTED during {doc['interrupted']}:" if doc.get("interrupted") else ""
    nq = f", {len(unqualified)} not qualified" if unqualified else ""
    lines = [
        f"nodegate run {doc['run_id']}:{during} {s['nodes']} nodes, {s['admitted']} admitted, "
        f"{s['rejected']} rejected{nq} (stages: {', '.join(doc['stages']) or 'none'})"
    ]
    if admitted:
        lines.append(f"ADMITTED {len(admitted)}: {clip_nodeset(admitted, paths.admission)}")
    if rejected:
        lines.append(f"REJECTED {len(rejected)}: {clip_nodeset(rejected, paths.admission)}")
        by_class = doc.get("remediation") or {}
        if by_class:
            lines.append(
                "  by remediation: " + "; ".join(f"{c} {nodeset(ns)}" for c, ns in by_class.items())
            )
        lines += fold_lines(folds(doc), budget, paths.where())
    if unqualified:
        why = [missing_checks(doc)] if doc.get("out_of_scope") else []
        why += ["systemic errors (below)"] if doc.get("systemic") else []
        lines.append(
            f"NOT QUALIFIED {len(unqualified)}: {clip_nodeset(unqualified, paths.admission)}: "
            + "; ".join(why or [missing_checks(doc)])
        )
    lines += [systemic_line(s) for s in doc.get("systemic") or ()]
    lines += admission_notes(doc, paths.where())
    lines.append(f"admission: {paths.admission}")
    if paths.report:
        lines.append(f"report: {paths.report}")
    return [printable(line) for line in lines]
