"""The gate: admit a node only when every selected check ran and passed (fail closed)."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from nodegate.admission.policy import AdmissionPolicy
from nodegate.admission.remediation import UNJUDGED_CLASS, class_order
from nodegate.admission.waivers import Waiver, WaiverSet
from nodegate.core import schemas
from nodegate.core.results import ADMISSION_FILE, RunResult
from nodegate.core.values import SAID, Reach, Status, Verdict

INTERRUPTED_CHECK = "run.interrupted"  # the reason every node of an interrupted run carries
ADMITTED, REJECTED, NOT_QUALIFIED = "admitted", "rejected", "not_qualified"
OUT_OF_SCOPE = "out_of_scope"  # a required check this run did not select (-k, -m)
SYSTEMIC = "systemic"  # an ERROR of a check that errored on most nodes (admission.guard)


@dataclass(frozen=True, slots=True)
class Reason:
    check: str
    status: str  # fail | error | skip | not_run | out_of_scope | systemic
    component: str
    observed: Any
    expected: Any
    message: str
    unit: str | None = None
    remediation: str | None = None
    evidence: tuple[str, ...] = ()
    remediation_class: str | None = None

    @classmethod
    def of(cls, v: Verdict) -> Reason:
        """What a verdict says, less its node (the decision's): `Reason.of(verdict)`."""
        return cls(status=v.status.value, **{k: getattr(v, k) for k in _FROM_VERDICT})

    def to_json(self) -> dict[str, Any]:
        said = {k: getattr(self, k) for k in SAID}
        return {"check": self.check, "status": self.status, **said, "evidence": list(self.evidence)}


# Every field of a Reason but its status (a word, not the verdict's enum) is the verdict's own.
_FROM_VERDICT = tuple(f.name for f in fields(Reason) if f.name != "status")


LEVEL_CHECK = "admission.min_level"  # the reason a run below the profile's level carries


def level_reason(why: str) -> Reason:
    """A run below the profile's admission.min_level: out of scope, so not complete (the node
    is not qualified, never rejected for it)."""
    return _unjudged(LEVEL_CHECK, OUT_OF_SCOPE, why)


def _unjudged(check: str, status: str, message: str) -> Reason:
    return Reason(check, status, "", None, None, message, remediation_class=UNJUDGED_CLASS)


@dataclass
class NodeDecision:
    node: str
    profile: str | None
    labels: Mapping[str, str]
    checks_total: int = 0
    checks_passed: int = 0
    reasons: list[Reason] = field(default_factory=list)
    waived: list[tuple[Reason, Waiver]] = field(default_factory=list)

    @property
    def not_tested(self) -> bool:
        """The scheduler holds the node and nothing else reached it (`Reach.HELD`): every
        reason is a skip that follows from that (or out of scope)."""
        return any(r.observed == Reach.HELD.value for r in self.reasons) and all(
            r.status in ("skip", OUT_OF_SCOPE) for r in self.reasons
        )

    @property
    def state(self) -> str:
        """admitted | rejected | not_qualified: only checks out of this run's scope missing,
        only systemic errors (a tool or controller problem) and the skips that followed them,
        or not tested at all (held by the scheduler)."""
        if self.not_tested:
            return NOT_QUALIFIED
        bad = [r for r in self.reasons if r.status not in (OUT_OF_SCOPE, SYSTEMIC)]
        if any(r.status in ("fail", "error") for r in bad):
            return REJECTED
        if any(r.status == SYSTEMIC for r in self.reasons):
            return NOT_QUALIFIED
        if bad:
            return REJECTED
        if self.reasons:
            return NOT_QUALIFIED
        full = self.checks_total > 0 and self.checks_passed == self.checks_total
        return ADMITTED if full else REJECTED

    @property
    def admitted(self) -> bool:
        return self.state == ADMITTED


def decide(
    selected: Iterable[tuple[str, str]],
    result: RunResult,
    profiles: Mapping[str, str | None],
    labels: Mapping[str, Mapping[str, str]],
    item_outcomes: Mapping[tuple[str, str], str] | None = None,
    interrupted: str | None = None,
    *,
    required: Mapping[str, Collection[str]] | None = None,
    waivers: WaiverSet | None = None,
) -> dict[str, NodeDecision]:
    """Per node decision. `item_outcomes`: pytest outcome per (check, node) item, when known;
    an item selected but never reported (crash, -x, interrupt) counts as not run.

    `required` (node -> the check ids its admission policy needs): a required check the run
    did not select is an `out_of_scope` reason, and every node of `profiles` gets a decision;
    None judges only what was selected. `waivers`: a FAIL/ERROR an active waiver covers does
    not block admission (the decision keeps it under `waived`).

    `interrupted` (what the run was doing when it was interrupted) rejects every node of
    `profiles` with that one reason, besides what was measured to fail; the checks it left
    unfinished are not listed one by one.
    """
    if interrupted is not None:
        done = decide(
            selected, result, profiles, labels, item_outcomes, required=None, waivers=waivers
        )
        return _interrupted(done, interrupted, profiles, labels)
    decisions: dict[str, NodeDecision] = {}
    if required is not None:
        for node in profiles:
            decisions[node] = NodeDecision(node, profiles[node], labels.get(node, {}))
    ran: dict[str, set[str]] = {}
    for check, node in selected:
        d = decisions.get(node)
        if d is None:
            d = decisions[node] = NodeDecision(node, profiles.get(node), labels.get(node, {}))
        ran.setdefault(node, set()).add(check)
        d.checks_total += 1
        outcome = None if item_outcomes is None else item_outcomes.get((check, node), "not run")
        _judge_item(d, check, result.for_item(check, node), outcome, waivers or WaiverSet())
    for node, need in (required or {}).items():
        d = decisions.get(node)
        if d is None:
            continue
        for check in need:
            if check not in ran.get(node, ()):
                d.reasons.append(_unjudged(check, OUT_OF_SCOPE, f"{check} did not run in this run"))
    return decisions


def _judge_item(
    d: NodeDecision, check: str, vs: list[Verdict], outcome: str | None, waivers: WaiverSet
) -> None:
    """One (check, node) item into its node's decision; `outcome` None: not known."""
    if not vs:
        d.reasons.append(_unjudged(check, "not_run", "check produced no verdict (did not run)"))
        return
    bad = [v for v in vs if v.status is not Status.PASS]
    blocking = []
    for v in bad:
        w = waivers.match(v.check, v.node, v.component, v.status.value)
        if w is None:
            blocking.append(v)
        else:
            d.waived.append((Reason.of(v), w))
    d.reasons.extend(Reason.of(v) for v in blocking)
    if blocking:
        return
    # A waived failure's item is reported as an expected failure (skipped), a clean one passed.
    want = "skipped" if bad else "passed"
    if outcome is not None and outcome != want:
        d.reasons.append(
            _unjudged(check, "not_run", f"test item did not pass (outcome: {outcome})")
        )
        return
    d.checks_passed += 1


def _interrupted(
    decisions: dict[str, NodeDecision],
    during: str,
    profiles: Mapping[str, str | None],
    labels: Mapping[str, Mapping[str, str]],
) -> dict[str, NodeDecision]:
    """Every node rejected for the interrupt, keeping what was measured to fail."""
    why = _unjudged(INTERRUPTED_CHECK, "not_run", f"run interrupted during {during}")
    for node in profiles:
        d = decisions.setdefault(node, NodeDecision(node, profiles[node], labels.get(node, {})))
        d.reasons = [why] + [r for r in d.reasons if r.status not in ("not_run", OUT_OF_SCOPE)]
    return decisions


def admission_doc(
    decisions: Mapping[str, NodeDecision],
    node_order: Iterable[str],
    meta: Mapping[str, Any],
    checks: Iterable[str],
    *,
    policies: Mapping[str, AdmissionPolicy] | None = None,
    waivers: WaiverSet | None = None,
    allow_incomplete: bool = False,
    systemic: Iterable[Any] = (),
    guard: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The admission document (schema `admission.schema.json`), validated.

    `systemic`: the run's systemic checks (`nodegate.admission.guard.Systemic`); `guard`:
    the bound on its actions (`drain_bound`).

    `complete`: not interrupted, and every node ran every check its policy requires (none
    out of scope, none left unrun); `actionable`: whether `reports/latest` and actions follow
    this run (complete, or `allow_incomplete`; never an interrupted run).
    """
    ordered = [n for n in node_order if n in decisions]
    states = {n: decisions[n].state for n in ordered}
    unrun = {r.status for n in ordered for r in decisions[n].reasons} & {"not_run", OUT_OF_SCOPE}
    complete = not meta.get("interrupted") and not unrun
    doc = {
        "schema_version": 1,
        **meta,
        "checks": sorted(set(checks)),
        "summary": {
            "nodes": len(ordered),
            **{key: sum(1 for s in states.values() if s == key) for key in STATES},
        },
        "complete": complete,
        "actionable": bool(complete or (allow_incomplete and not meta.get("interrupted"))),
        "out_of_scope": sorted(
            {r.check for n in ordered for r in decisions[n].reasons if r.status == OUT_OF_SCOPE}
        ),
        "remediation": _by_class(decisions, ordered),
        **({"policy": {p: pol.to_json() for p, pol in sorted(policies.items())}}
           if policies is not None else {}),
        **({"waivers": _waivers_json(decisions, ordered, waivers)} if waivers else {}),
        "systemic": [s.to_json() for s in systemic],
        **({"guard": dict(guard)} if guard is not None else {}),
        "nodes": {n: _node_json(decisions[n]) for n in ordered},
    }  # fmt: skip
    schemas.validate("admission", doc)
    return doc


STATES = (ADMITTED, REJECTED, NOT_QUALIFIED)


def _node_json(d: NodeDecision) -> dict[str, Any]:
    return {
        "admitted": d.admitted,
        "state": d.state,
        "profile": d.profile,
        "labels": dict(d.labels),
        "checks_passed": d.checks_passed,
        "checks_total": d.checks_total,
        "reasons": [r.to_json() for r in d.reasons],
        "waived": [{**r.to_json(), "waiver": w.to_json()} for r, w in d.waived],
    }


def causes(reasons: list[Reason]) -> list[Reason]:
    """What a node must be fixed for: its failures, else its errors, else every reason; an
    unjudged check after a failed session repeats the session's failure."""
    picked = (
        [r for r in reasons if r.status == "fail"]
        or [r for r in reasons if r.status == "error"]
        or reasons
    )
    return [r for r in picked if not r.message.startswith("not judged:")] or picked


def _by_class(decisions: Mapping[str, NodeDecision], order: list[str]) -> dict[str, list[str]]:
    """Remediation class -> the rejected nodes one of whose causes has it."""
    out: dict[str, list[str]] = {}
    for n in order:
        if decisions[n].state != REJECTED:
            continue
        for cls in dict.fromkeys(
            r.remediation_class or UNJUDGED_CLASS for r in causes(decisions[n].reasons)
        ):
            out.setdefault(cls, []).append(n)
    return {c: out[c] for c in sorted(out, key=class_order)}  # fmt: skip


def _waivers_json(
    decisions: Mapping[str, NodeDecision], order: list[str], waivers: WaiverSet
) -> dict[str, Any]:
    return {
        "file": waivers.source,
        "active": [w.to_json() for w in waivers.active],
        "expired": [w.to_json() for w in waivers.expired],
        "applied": sum(len(decisions[n].waived) for n in order),
    }


def write_admission(run_dir: Path, doc: Mapping[str, Any]) -> Path:
    """Write admission.json, streamed: the run's own keys indented, then `nodes` last with one
    compact line per node (`grep '"gpu014"' admission.json` shows its decision whole). At
    1,024 nodes of a `-m` run, `indent=1` per node took 10.8 KB per node, this 8.1."""
    p = run_dir / ADMISSION_FILE
    tmp = p.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        out.write("{\n")
        for key, value in doc.items():
            if key != "nodes":
                text = json.dumps(value, indent=1, default=str).replace("\n", "\n ")
                out.write(f" {json.dumps(key)}: {text},\n")
        out.write(' "nodes": {')
        sep = "\n"
        for node, d in (doc.get("nodes") or {}).items():
            line = json.dumps(d, separators=(",", ":"), default=str)
            out.write(f"{sep}  {json.dumps(node)}: {line}")
            sep = ",\n"
        out.write("}\n}\n" if sep == "\n" else "\n }\n}\n")
    tmp.replace(p)
    return p
