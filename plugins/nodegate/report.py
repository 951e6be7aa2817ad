"""Human summary: reasons folded over nodes (`gpu[003,017]: ...`), ClusterShell-style."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ClusterShell.NodeSet import NodeSet


def fold_reasons(doc: Mapping[str, Any]) -> list[str]:
    """One line per distinct reason, naming the folded set of nodes it applies to.

    Shows causes, not their echoes: a node's `skip`/`not judged` consequences are left out
    when it has a real failure (admission.json keeps every reason).
    """
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for node, d in doc["nodes"].items():
        reasons = d["reasons"]
        causes = (
            [r for r in reasons if r["status"] == "fail"]
            or [r for r in reasons if r["status"] == "error"]
            or reasons
        )
        # An unjudged check after a failed session repeats the session's failure.
        causes = [r for r in causes if not r["message"].startswith("not judged:")] or causes
        for r in causes:
            key = (r["check"], r["status"], r["component"], r["message"])
            groups.setdefault(key, []).append(node)
    order = {n: i for i, n in enumerate(doc["nodes"])}
    lines = []
    # Node order first, so one node's causes read together; then the check id.
    for (check, status, component, message), nodes in sorted(
        groups.items(), key=lambda kv: (min(order[n] for n in kv[1]), kv[0][0])
    ):
        comp = f" [{component}]" if component else ""
        lines.append(f"{NodeSet.fromlist(nodes)}: {check} {status.upper()}{comp}: {message}")
    return lines


def summary_lines(doc: Mapping[str, Any], admission_path: str) -> list[str]:
    s = doc["summary"]
    admitted = [n for n, d in doc["nodes"].items() if d["admitted"]]
    rejected = [n for n, d in doc["nodes"].items() if not d["admitted"]]
    during = f" INTERRUPTED during {doc['interrupted']}:" if doc.get("interrupted") else ""
    lines = [
        f"nodegate run {doc['run_id']}:{during} {s['nodes']} nodes, {s['admitted']} admitted, "
        f"{s['rejected']} rejected (stages: {', '.join(doc['stages']) or 'none'})",
    ]
    if admitted:
        lines.append(f"ADMITTED {NodeSet.fromlist(admitted)}")
    if rejected:
        lines.append(f"REJECTED {NodeSet.fromlist(rejected)}")
        lines += ["  " + ln for ln in fold_reasons(doc)]
    lines.append(f"admission: {admission_path}")
    return lines
