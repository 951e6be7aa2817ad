"""Human summary: reasons folded over nodes (`gpu[003,017]: ...`), ClusterShell-style; a
failure shows what was observed and what was expected; node text is escaped (`safetext`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ClusterShell.NodeSet import NodeSet

from nodegate.core.safetext import printable


def _value(value: Any) -> str:
    if value is None:
        return "not reported"
    if isinstance(value, list | tuple):
        return ", ".join(_value(v) for v in value) or "nothing"
    return str(value)


def _with_unit(value: Any, unit: str | None) -> str:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return f"{_value(value)} {unit}" if unit and number else _value(value)


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


def fold_reasons(doc: Mapping[str, Any]) -> list[str]:
    """One line per distinct reason, naming the folded set of nodes it applies to; every
    control character of node text escaped.

    Shows causes, not their echoes: a node's `skip`/`not judged` consequences are left out
    when it has a real failure (admission.json keeps every reason).
    """
    groups: dict[tuple[str, str, str, str, str], list[str]] = {}
    for node, d in doc["nodes"].items():
        if d.get("state") == "not_qualified":
            continue  # said once, in summary_lines
        reasons = d["reasons"]
        causes = (
            [r for r in reasons if r["status"] == "fail"]
            or [r for r in reasons if r["status"] == "error"]
            or reasons
        )
        # An unjudged check after a failed session repeats the session's failure.
        causes = [r for r in causes if not r["message"].startswith("not judged:")] or causes
        for r in causes:
            cls = f" ({r['remediation_class']})" if r.get("remediation_class") else ""
            values = observed_expected(r) + cls
            key = (r["check"], r["status"], r["component"], r["message"], values)
            groups.setdefault(key, []).append(node)
    order = {n: i for i, n in enumerate(doc["nodes"])}
    lines = []
    # Node order first, so one node's causes read together; then the check id.
    for (check, status, component, message, values), nodes in sorted(
        groups.items(), key=lambda kv: (min(order[n] for n in kv[1]), kv[0][0])
    ):
        comp = f" [{component}]" if component else ""
        line = f"{NodeSet.fromlist(nodes)}: {check} {status.upper()}{comp}: {message}{values}"
        lines.append(printable(line))
    return lines
