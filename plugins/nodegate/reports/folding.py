"""The one place nodes are folded, for the terminal, report.html and Allure: nodesets
(ClusterShell, `gpu[003,017]`), a node's causes, the rejected nodes by (check, status) with
their distinct reasons, nodes by rack/leaf; a failure shows what was observed and expected."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ClusterShell.NodeSet import NodeSet

FIRST_NODES = 8  # nodes named in a fold's header line
NODESET_CHARS = 240  # an ADMITTED/REJECTED nodeset longer than this is cut: 3 lines at 80 columns
GROUP_LABELS = ("rack", "leaf")  # inventory labels a fleet is grouped by, first found wins


def nodeset(nodes: Iterable[str]) -> str:
    """The folded nodeset: `nodeset(["gpu1", "gpu2", "gpu4"]) == "gpu[1-2,4]"`."""
    return str(NodeSet.fromlist(list(nodes)))


def clip_nodeset(nodes: Sequence[str], where: str, limit: int = NODESET_CHARS) -> str:
    """The folded nodeset, or as many of the first nodes as fold within `limit` characters
    and how many more (a fleet with scattered faults folds poorly).

    >>> clip_nodeset([f"n{i}" for i in range(1, 100, 2)], "a.json", 20)
    'n[1,3,5,7,9,11,13] +43 more (a.json)'
    """
    whole = nodeset(nodes)
    if len(whole) <= limit:
        return whole
    lo, hi = 1, len(nodes)  # the most nodes whose nodeset fits: at least one
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(nodeset(nodes[:mid])) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return f"{nodeset(nodes[:lo])} +{len(nodes) - lo} more ({where})"


def group_of(labels: Mapping[str, str]) -> str:
    """The group a node is drawn in, from its labels: `rack r1 · leaf l2`, else `fleet`."""
    for key in GROUP_LABELS:
        if labels.get(key):
            parts = [f"{k} {labels[k]}" for k in GROUP_LABELS if labels.get(k)]
            return " · ".join(parts)
    return "fleet"


def _value(value: Any) -> str:
    if value is None:
        return "not reported"
    if isinstance(value, list | tuple):
        return ", ".join(_value(v) for v in value) or "nothing"
    return str(value)


def with_unit_text(text: str, value: Any, unit: str | None) -> str:
    """`text` (how `value` is shown) with its unit when it is a quantity: a number, or text
    that ends in one (`>= 360`, `x16`); prose keeps no unit ("no Xid ... in the last 24 h").

    >>> with_unit_text(">= 360", ">= 360", "Gb/s"), with_unit_text("no Xid", "no Xid", "Xid")
    ('>= 360 Gb/s', 'no Xid')
    """
    number = isinstance(value, int | float) and not isinstance(value, bool)
    quantity = number or (isinstance(value, str) and value[-1:].isdigit())
    return f"{text} {unit}" if unit and quantity else text


def _with_unit(value: Any, unit: str | None) -> str:
    return with_unit_text(_value(value), value, unit)


def _shows(message: str, text: str) -> bool:
    """Whether `message` shows `text` as itself: `0` is not shown by a PID `18750`."""
    head = r"(?<![\d.])" if text[:1].isdigit() else ""
    tail = r"(?!\.?\d)" if text[-1:].isdigit() else ""
    return re.search(head + re.escape(text) + tail, message) is not None


def observed_expected(reason: Mapping[str, Any]) -> str:
    """What a failure's message does not show of its observed and expected values, as
    ' (observed X, expected Y)'; '' for other statuses or when the message shows both.

    >>> observed_expected({"status": "fail", "message": "x8", "observed": 8, "expected": 16,
    ...                    "unit": "lanes"})
    ' (expected 16 lanes)'
    """
    if reason["status"] != "fail":
        return ""
    unit, message = reason.get("unit"), reason["message"]
    missing = [
        f"{word} {_with_unit(value, unit)}"
        for word, value in (("observed", reason["observed"]), ("expected", reason["expected"]))
        if value is None or not _shows(message, _value(value))
    ]
    return f" ({', '.join(missing)})" if missing else ""


def node_state(d: Mapping[str, Any]) -> str:
    """admitted | rejected | not_qualified (the last only where admission.json says so)."""
    return str(d.get("state") or ("admitted" if d["admitted"] else "rejected"))


def causes(reasons: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A node's causes, not their echoes: failures, else errors, else everything; a check
    left unjudged after a failed session repeats that failure."""
    picked = (
        [r for r in reasons if r["status"] == "fail"]
        or [r for r in reasons if r["status"] == "error"]
        or list(reasons)
    )
    return [r for r in picked if not r["message"].startswith("not judged:")] or picked


def reason_line(nodes: Sequence[str], r: Mapping[str, Any]) -> str:
    """`gpu[003,017]: check STATUS [component]: message (observed X, expected Y) (class)`."""
    comp = f" [{r['component']}]" if r["component"] else ""
    cls = f" ({r['remediation_class']})" if r.get("remediation_class") else ""
    return (
        f"{nodeset(nodes)}: {r['check']} {r['status'].upper()}{comp}: "
        f"{r['message']}{observed_expected(r)}{cls}"
    )


@dataclass
class Fold:
    """Every node one (check, status) rejects, and its distinct reasons with their nodes."""

    check: str
    status: str
    nodes: list[str]
    reasons: dict[tuple[Any, ...], tuple[Mapping[str, Any], list[str]]]  # key -> (one, nodes)

    def header(self) -> str:
        n = len(self.nodes)
        first = nodeset(self.nodes[:FIRST_NODES])
        more = f" +{n - FIRST_NODES} more" if n > FIRST_NODES else ""
        return f"{self.check} {self.status.upper()} on {n} node{'s' * (n != 1)}: {first}{more}"


def folds(doc: Mapping[str, Any]) -> list[Fold]:
    """Rejected nodes' causes by (check, status), the largest fold first."""
    by_check: dict[tuple[str, str], Fold] = {}
    for node, d in doc["nodes"].items():
        if node_state(d) != "rejected":
            continue
        for r in causes(d["reasons"]):
            f = by_check.setdefault(
                (r["check"], r["status"]), Fold(r["check"], r["status"], [], {})
            )
            if not f.nodes or f.nodes[-1] != node:
                f.nodes.append(node)
            key = (r["component"], r["message"], observed_expected(r), r.get("remediation_class"))
            f.reasons.setdefault(key, (r, []))[1].append(node)
    return sorted(by_check.values(), key=lambda f: (-len(f.nodes), f.check, f.status))
