"""What the actions share: which nodes to act on, the reason text, and `actions.json`.

An action consumes only an actionable decision (`doc["actionable"]`: a complete run, or one
the operator let through with --allow-incomplete; never an interrupted run). A rejected node
is taken out of service, an admitted one returned, a not-qualified one left alone. Each
action, planned or applied, and its result go to `<run-dir>/actions.json` (schema
`schemas/actions.schema.json`), one section per target.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ClusterShell.NodeSet import NodeSet

from nodegate.admission.remediation import UNJUDGED_CLASS, class_order
from nodegate.core import schemas
from nodegate.core.drainlimit import DEFAULT
from nodegate.core.results import ACTIONS_FILE
from nodegate.core.safetext import printable

REASON_PREFIX = "nodegate "  # whoever's reason does not start so is not ours (NHC's rule)
Intent = Literal["take_out", "return", "leave"]
# A component's PCI address and what follows it (`GPU3 0000:5d:00.0 serial 1650...`): the
# first words name the part in a reason that has to stay short.
_PCI_TAIL = re.compile(r"\s+(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7].*$")


def intent(doc: Mapping[str, Any], node: str) -> Intent:
    """What an actionable decision asks for `node`."""
    state = doc["nodes"][node].get("state")
    if state == "rejected":
        return "take_out"
    if state == "admitted":
        return "return"
    return "leave"


def not_actionable(doc: Mapping[str, Any]) -> str | None:
    """Why actions must leave this decision alone, or None."""
    if doc.get("interrupted"):
        return f"run interrupted during {doc['interrupted']}: no action"
    if not doc.get("actionable"):
        return (
            "run not complete (required checks out of scope: "
            f"{len(doc.get('out_of_scope') or ())}): no action without --allow-incomplete"
        )
    return None


def target_name(doc: Mapping[str, Any], node: str, label: str) -> str:
    """The node's name in the target system: inventory label `label`, else its own name."""
    labels = doc["nodes"][node].get("labels") or {}
    return str(labels.get(label) or node)


def causes(reasons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the node must be fixed for: its failures, else its errors, else every reason (a
    skip or an unjudged check repeats an earlier failure)."""
    picked = (
        [r for r in reasons if r["status"] == "fail"]
        or [r for r in reasons if r["status"] == "error"]
        or reasons
    )
    return [r for r in picked if not r["message"].startswith("not judged:")] or picked


def main_reason(reasons: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cause to name: the most severe class among the causes."""
    picked = causes(reasons)
    if not picked:
        return None
    return max(picked, key=lambda r: class_order(r.get("remediation_class")))


def short_component(component: str) -> str:
    return _PCI_TAIL.sub("", component).strip()


def cause_head(reasons: list[dict[str, Any]]) -> tuple[str, str] | None:
    """The main cause as a reason names it: (`gpu.xid GPU2`, its class); None without one."""
    main = main_reason(reasons)
    if main is None:
        return None
    head = " ".join(p for p in (main["check"], short_component(main["component"])) if p)
    return head, str(main.get("remediation_class") or UNJUDGED_CLASS)


def same_cause(reason: str | None, head: tuple[str, str] | None) -> bool:
    """Whether a nodegate reason (any run's) names this main cause and class: the numbers in
    its message may differ from run to run (`Xid 79 x2`), the cause does not."""
    if reason is None or head is None or not reason.startswith(REASON_PREFIX):
        return False
    body = reason.partition(": ")[2]
    tail = _CLASS_TAIL.search(body)
    return (body == head[0] or body.startswith(head[0] + " ")) and (
        tail is not None and tail.group(1) == head[1]
    )


# The end of a reason: ` (rma)`, ` (rma) +2 more`.
_CLASS_TAIL = re.compile(r" \(([a-z_]+)\)(?: \+\d+ more)?$")
# A reason nodegate set earlier, quoted inside a message (a transport that reports Slurm's
# state and reason): `(nodegate <run-id>: ...)`, or to the end without the bracket.
_NESTED = re.compile(r"\s*(\()?" + re.escape(REASON_PREFIX) + r"[A-Za-z0-9_.-]+: ")


def quotes_ours(reasons: list[dict[str, Any]]) -> bool:
    """Whether the main cause's message quotes a nodegate reason: the node could not be
    judged because nodegate's own drain holds it (a transport that reports Slurm's state)."""
    main = main_reason(reasons)
    return main is not None and _NESTED.search(str(main.get("message") or "")) is not None


def without_nested(text: str) -> str:
    """`text` less any nodegate reason it quotes, so that a new reason never nests an old one:
    `... IDLE+DRAIN (nodegate r1: gpu.xid GPU2 ... (rma))` -> `... IDLE+DRAIN`."""
    while (m := _NESTED.search(text)) is not None:
        end = len(text)
        if m.group(1):  # up to the bracket that closes it
            depth = 0
            for i in range(m.start(1), len(text)):
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                if depth == 0:
                    end = i + 1
                    break
        text = text[: m.start()] + text[end:]
    return text.strip()


def reason_text(run_id: str, reasons: list[dict[str, Any]], limit: int) -> str:
    """`nodegate <run-id>: gpu.xid GPU2 Xid 79 x1 (...) (rma)`, ASCII, at most `limit` chars;
    more causes are counted (`+2 more`)."""
    main = main_reason(reasons)
    if main is None:
        return f"{REASON_PREFIX}{run_id}: rejected"[:limit]
    cls = main.get("remediation_class") or UNJUDGED_CLASS
    comp = short_component(main["component"])
    what = " ".join(p for p in (main["check"], comp, without_nested(main["message"])) if p)
    more = len({(r["check"], r["component"]) for r in causes(reasons)})
    tail = f" ({cls})" + (f" +{more - 1} more" if more > 1 else "")
    head = f"{REASON_PREFIX}{run_id}: "
    # printable() escapes control characters; what is left may still be non-ASCII.
    body = printable(what).encode("ascii", "replace").decode("ascii")
    room = limit - len(head) - len(tail)
    if len(body) > room:
        body = body[: max(room - 3, 0)].rstrip() + "..."
    return (head + body + tail)[:limit]


@dataclass
class ActionRecord:
    """One node's action: what was seen, what is planned or done, and how it went."""

    node: str
    target: str  # the node's name in the target system
    decision: str  # admitted | rejected | not_qualified
    action: str  # drain | resume | patch | none
    why: str
    before: dict[str, Any] | None = None
    reason: str | None = None
    result: str = "planned"  # planned | applied | unchanged | failed | skipped
    after: dict[str, Any] | None = None
    error: str | None = None
    patch: list[dict[str, Any]] | None = None  # Kubernetes: the JSON patch (RFC 6902)
    held_by: str | None = None  # admitted, but kept out of service by another (not nodegate)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if v is not None or k in _ALWAYS}
        return out


_ALWAYS = ("before", "reason", "after", "error")


def refusal(
    target: str, verb: str, doc: Mapping[str, Any], take_out: list[ActionRecord]
) -> dict[str, Any] | None:
    """The blast-radius guard: None when `take_out` (the nodes this action would take out of
    service) is within the decision's max_drain, else the refusal, with its one-line message.

    `verb`: what taking out is for this target (`drain`, `taint`)."""
    guard = doc.get("guard") or {
        "max_drain": DEFAULT.of(len(doc["nodes"])),
        "rule": DEFAULT.describe(),
        "from": "default",
        "nodes": len(doc["nodes"]),
    }
    limit = int(guard["max_drain"])
    if len(take_out) <= limit:
        return None
    checks = Counter(
        str((main_reason(doc["nodes"][r.node]["reasons"]) or {}).get("check", "rejected"))
        for r in take_out
    )
    top, top_n = min(checks.items(), key=lambda kv: (-kv[1], kv[0]))
    n = len(take_out)
    message = (
        f"{target}: REFUSED to {verb} {n} nodes, more than max_drain {limit} of "
        f"{guard['nodes']} nodes ({guard['rule']}; from {guard['from']}); top check {top} on "
        f"{top_n} of them; nothing {verb}ed (a fleet-wide cause? else --max-drain)"
    )
    return {
        "take_out": n,
        "max_drain": limit,
        "rule": guard["rule"],
        "from": guard["from"],
        "nodes": guard["nodes"],
        "top_check": top,
        "top_check_nodes": top_n,
        "message": message,
    }


def refuse(records: list[ActionRecord], refused: Mapping[str, Any]) -> None:
    """Every take-out the guard refused: skipped, saying why."""
    for r in records:
        r.result = "skipped"
        r.why = (
            f"refused: {refused['take_out']} nodes to take out, max_drain {refused['max_drain']}"
        )


def record(
    run_dir: Path,
    doc: Mapping[str, Any],
    target: str,
    apply: bool,
    records: list[ActionRecord],
    skipped: str | None = None,
    error: str | None = None,
    refused: Mapping[str, Any] | None = None,
) -> Path:
    """Write (or add this target's section to) `<run-dir>/actions.json`, validated."""
    path = run_dir / ACTIONS_FILE
    out: dict[str, Any] = {"schema_version": 1, "run_id": doc["run_id"], "targets": {}}
    if path.exists():
        out = json.loads(path.read_text(encoding="utf-8"))
    out["targets"][target] = {
        "mode": "apply" if apply else "dry-run",
        "skipped": skipped,
        "error": error,
        "refused": None if refused is None else dict(refused),
        "actions": [r.to_json() for r in records],
    }
    schemas.validate("actions", out)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


HELD_LINES = 10  # admitted nodes another keeps out, named one per line up to this many


def summary(target: str, apply: bool, records: list[ActionRecord]) -> list[str]:
    """Terminal lines: nodes folded per (action, result); then each admitted node that stays
    out of service by another's drain or taint, by name (an operator must hear of it)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in records:
        groups.setdefault((r.action, r.result), []).append(r.node)
    mode = "applied" if apply else "dry-run"
    lines = [f"{target} ({mode}):"]
    for (action, result), nodes in sorted(groups.items()):
        lines.append(f"  {action} {result}: {NodeSet.fromlist(nodes)}")
    held = [r for r in records if r.held_by]
    for r in held[:HELD_LINES]:
        lines.append(f"  admitted, still out of service (not by nodegate): {r.node}: {r.held_by}")
    if len(held) > HELD_LINES:
        rest = NodeSet.fromlist([r.node for r in held[HELD_LINES:]])
        lines.append(f"  ... and {len(held) - HELD_LINES} more admitted nodes held out: {rest}")
    return [printable(line) for line in lines]
