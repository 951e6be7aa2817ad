"""The repair list: admission.json's `infrastructure` section, from the verdicts of the checks
that judge the fabric's own parts (a switch, a cable between two named ends, the subnet
manager). A fault there marks the nodes behind it (a PASS carrying the fault,
`core.verdicts.marked`) instead of rejecting them; here each fault is one item with the nodes
it marks.

The session names those checks (`Check.infrastructure`; admission does not import stages).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from nodegate.core.values import Status, Verdict
from nodegate.inventory.nodes import natural_key


def is_mark(v: Verdict, infrastructure: Collection[str]) -> bool:
    """A node's verdict that marks it with an infrastructure fault."""
    return v.check in infrastructure and v.status is Status.PASS and v.remediation is not None


def infrastructure_items(
    verdicts: Iterable[Verdict], infrastructure: Collection[str]
) -> list[dict[str, Any]]:
    """One item per fault (component, check, observed, expected, unit, message, remediation),
    with the nodes it marks, by component then check."""
    items: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for v in verdicts:
        if not is_mark(v, infrastructure):
            continue
        message = v.message.removeprefix("infrastructure: ")
        key = (v.component, v.check, repr(v.observed), repr(v.expected), message)
        item = items.setdefault(key, {
            "component": v.component, "check": v.check, "observed": v.observed,
            "expected": v.expected, **({"unit": v.unit} if v.unit else {}), "message": message,
            "remediation": v.remediation, "nodes": [], "evidence": list(v.evidence[:4]),
        })  # fmt: skip
        if v.node not in item["nodes"]:
            item["nodes"].append(v.node)
    out = sorted(items.values(), key=lambda i: (natural_key(i["component"]), i["check"]))
    for i in out:
        i["nodes"].sort(key=natural_key)
    return out
