"""The gate: admit a node only when every selected check ran and passed (fail closed)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from nodegate.engine import RunResult
from nodegate.model import Status

ADMISSION_FILE = "admission.json"
INTERRUPTED_CHECK = "run.interrupted"  # the reason every node of an interrupted run carries


@dataclass(frozen=True, slots=True)
class Reason:
    check: str
    status: str  # fail | error | skip | not_run
    component: str
    observed: Any
    expected: Any
    message: str
    unit: str | None = None
    remediation: str | None = None
    evidence: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status,
            "component": self.component,
            "observed": self.observed,
            "expected": self.expected,
            "unit": self.unit,
            "message": self.message,
            "remediation": self.remediation,
            "evidence": list(self.evidence),
        }


@dataclass
class NodeDecision:
    node: str
    profile: str | None
    labels: Mapping[str, str]
    checks_total: int = 0
    checks_passed: int = 0
    reasons: list[Reason] = field(default_factory=list)

    @property
    def admitted(self) -> bool:
        return (
            not self.reasons and self.checks_total > 0 and self.checks_passed == self.checks_total
        )


def decide(
    selected: Iterable[tuple[str, str]],
    result: RunResult,
    profiles: Mapping[str, str | None],
    labels: Mapping[str, Mapping[str, str]],
    item_outcomes: Mapping[tuple[str, str], str] | None = None,
    interrupted: str | None = None,
) -> dict[str, NodeDecision]:
    """Per node decision. `item_outcomes`: pytest outcome per (check, node) item, when known;
    an item selected but never reported (crash, -x, interrupt) counts as not run.

    `interrupted` (what the run was doing when it was interrupted) rejects every node of
    `profiles` with that one reason, besides what was measured to fail; the checks it left
    unfinished are not listed one by one.
    """
    if interrupted is not None:
        return _interrupted(
            decide(selected, result, profiles, labels, item_outcomes), interrupted, profiles, labels
        )
    decisions: dict[str, NodeDecision] = {}
    for check, node in selected:
        d = decisions.get(node)
        if d is None:
            d = decisions[node] = NodeDecision(node, profiles.get(node), labels.get(node, {}))
        d.checks_total += 1
        vs = result.for_item(check, node)
        if not vs:
            d.reasons.append(
                Reason(check, "not_run", "", None, None, "check produced no verdict (did not run)")
            )
            continue
        bad = [v for v in vs if v.status is not Status.PASS]
        for v in bad:
            d.reasons.append(
                Reason(
                    v.check,
                    v.status.value,
                    v.component,
                    v.observed,
                    v.expected,
                    v.message,
                    v.unit,
                    v.remediation,
                    v.evidence,
                )
            )
        if item_outcomes is not None and not bad:
            outcome = item_outcomes.get((check, node))
            if outcome != "passed":
                d.reasons.append(
                    Reason(
                        check,
                        "not_run",
                        "",
                        None,
                        None,
                        f"test item did not pass (outcome: {outcome or 'not run'})",
                    )
                )
                continue
        if not bad:
            d.checks_passed += 1
    return decisions


def _interrupted(
    decisions: dict[str, NodeDecision],
    during: str,
    profiles: Mapping[str, str | None],
    labels: Mapping[str, Mapping[str, str]],
) -> dict[str, NodeDecision]:
    """Every node rejected for the interrupt, keeping what was measured to fail."""
    why = Reason(INTERRUPTED_CHECK, "not_run", "", None, None, f"run interrupted during {during}")
    for node in profiles:
        d = decisions.setdefault(node, NodeDecision(node, profiles[node], labels.get(node, {})))
        d.reasons = [why] + [r for r in d.reasons if r.status != "not_run"]
    return decisions


@lru_cache(maxsize=1)
def admission_schema() -> dict[str, Any]:
    text = resources.files("nodegate").joinpath("schemas/admission.schema.json").read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def admission_doc(
    decisions: Mapping[str, NodeDecision],
    node_order: Iterable[str],
    meta: Mapping[str, Any],
    checks: Iterable[str],
) -> dict[str, Any]:
    ordered = [n for n in node_order if n in decisions]
    admitted = sum(1 for n in ordered if decisions[n].admitted)
    doc = {
        "schema_version": 1,
        **meta,
        "checks": sorted(set(checks)),
        "summary": {
            "nodes": len(ordered),
            "admitted": admitted,
            "rejected": len(ordered) - admitted,
        },
        "nodes": {
            n: {
                "admitted": decisions[n].admitted,
                "profile": decisions[n].profile,
                "labels": dict(decisions[n].labels),
                "checks_passed": decisions[n].checks_passed,
                "checks_total": decisions[n].checks_total,
                "reasons": [r.to_json() for r in decisions[n].reasons],
            }
            for n in ordered
        },
    }
    jsonschema.Draft202012Validator(admission_schema()).validate(doc)
    return doc


def write_admission(run_dir: Path, doc: Mapping[str, Any]) -> Path:
    p = run_dir / ADMISSION_FILE
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(p)
    return p
