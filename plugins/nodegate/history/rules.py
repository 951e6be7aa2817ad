"""Rules over a node's own past, as profile data (`history:` section, schema
`profile.history.schema.json`; the shipped profiles have them off):

- *repeat offender*: rejected >= `rejections` times within `days` days -> the remediation of
  its causes escalates (`escalate: {retest: rma}`), and once it has tripped, admission needs
  `clean_runs` consecutive complete runs that admit it;
- *drift*: a metric `drop_pct` % or more worse than the node's own median over its last `runs`
  complete runs (at least `min_runs` of them) -> flagged; `blocks_admission` rejects it;
- *flapping*: admitted and rejected alternating `min_flips` times over its last `runs` runs.

Each flag names the runs it rests on. The gate gets the flags as data (`apply`): admission
never reads the history.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import statistics
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodegate.admission.gate import ADMITTED, REJECTED, NodeDecision, Reason, causes
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.core.values import Status, component_key, is_number

SECTION = "history"
REPEAT, DRIFT, FLAPPING = "repeat_offender", "drift", "flapping"
REASON_PREFIX = (
    "history."  # a blocking flag's reason: history.repeat_offender, history.drift.<check>
)


@dataclass(frozen=True, slots=True)
class RepeatOffender:
    enabled: bool = False
    rejections: int = 3
    days: float = 30.0
    escalate: Mapping[str, str] = field(default_factory=dict)
    clean_runs: int = 2


@dataclass(frozen=True, slots=True)
class Drift:
    enabled: bool = False
    metrics: tuple[str, ...] = ()
    drop_pct: float = 5.0
    runs: int = 5
    min_runs: int = 3
    blocks_admission: bool = False


@dataclass(frozen=True, slots=True)
class Flapping:
    enabled: bool = False
    runs: int = 6
    min_flips: int = 3


@dataclass(frozen=True, slots=True)
class HistoryRules:
    """A profile's `history:` section, typed (absent: every rule off)."""

    repeat_offender: RepeatOffender = RepeatOffender()
    drift: Drift = Drift()
    flapping: Flapping = Flapping()

    @classmethod
    def of(cls, doc: Mapping[str, Any] | None) -> HistoryRules:
        doc = doc or {}
        r, d, f = (doc.get(k) or {} for k in (REPEAT, DRIFT, FLAPPING))
        return cls(
            RepeatOffender(**{**r, "escalate": dict(r.get("escalate", {}))}),
            Drift(**{**d, "metrics": tuple(d.get("metrics", ()))}),
            Flapping(**f),
        )

    @property
    def enabled(self) -> bool:
        return self.repeat_offender.enabled or self.drift.enabled or self.flapping.enabled


def validate_metrics(profiles: Iterable[Any], known_checks: Collection[str]) -> None:
    """ConfigError for a `history.drift.metrics` entry naming no check (profiles: `Profile`s)."""
    for p in profiles:
        for check in rules_of(p.data).drift.metrics:
            if check not in known_checks:
                where = f"profile {p.name} ({p.source}): {SECTION}.drift.metrics"
                raise ConfigError(f"{where}: {check}: no such check")


def rules_of(profile_data: Mapping[str, Any]) -> HistoryRules:
    section = profile_data.get(SECTION)
    return HistoryRules.of(section if isinstance(section, Mapping) else None)


@dataclass(frozen=True, slots=True)
class Flag:
    """One rule tripped for one node in this run."""

    node: str
    rule: str
    message: str
    based_on: tuple[str, ...]  # the run ids it rests on (this run included when it counts)
    blocks_admission: bool
    check: str | None = None
    component: str | None = None
    escalated: Mapping[str, str] = field(default_factory=dict)  # class -> class

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "rule": self.rule, "check": self.check,
                "component": self.component, "blocks_admission": self.blocks_admission,
                "message": self.message, "based_on": list(self.based_on),
                "escalated": dict(self.escalated)}  # fmt: skip


Past = Mapping[
    str, list[Mapping[str, Any]]
]  # node -> decisions oldest first (queries.node_history)
Series = Mapping[tuple[str, str, str], list[tuple[str, float]]]  # (node, check, comp) -> values


def judge(
    run_id: str,
    decisions: Mapping[str, NodeDecision],
    result: RunResult,
    rules: Mapping[str, HistoryRules],
    past: Past,
    series: Series,
    now: dt.datetime,
) -> list[Flag]:
    """The flags of this run, from each node's past (`past`, `series`: complete runs' values)."""
    flags: list[Flag] = []
    for node in sorted(decisions):
        r = rules.get(node)
        if r is None or not r.enabled:
            continue
        d, mine = decisions[node], past.get(node, [])
        if r.repeat_offender.enabled:
            flags += _repeat(run_id, d, r.repeat_offender, mine, now)
        if r.flapping.enabled:
            flags += _flapping(run_id, d, r.flapping, mine)
    drifting = {n: r.drift for n, r in rules.items() if r.drift.enabled and n in decisions}
    if drifting:
        flags += _drift(run_id, result, drifting, series)
    return flags


def _repeat(
    run_id: str, d: NodeDecision, rule: RepeatOffender, past: list[Mapping[str, Any]],
    now: dt.datetime,
) -> list[Flag]:  # fmt: skip
    window = dt.timedelta(days=rule.days)
    # A run that rejected the node only to hold it back (this rule's own reason) is one of its
    # clean runs, not a rejection.
    held = {p["run_id"] for p in past if p["reason_check"] == REASON_PREFIX + REPEAT}
    rejected = [p for p in past if p["state"] == REJECTED and p["at"] is not None
                and p["run_id"] not in held]  # fmt: skip
    if d.state == REJECTED:
        recent = [p["run_id"] for p in rejected if p["at"] >= now - window] + [run_id]
        if len(recent) < rule.rejections:
            return []
        escalated = {c: rule.escalate[c] for c in _classes(d) if c in rule.escalate}
        return [Flag(d.node, REPEAT, f"rejected {len(recent)} times in {rule.days:g} days "
                     f"(rule: {rule.rejections})" + _escalation(escalated), tuple(recent),
                     True, escalated=escalated)]  # fmt: skip
    if d.state != ADMITTED or not rejected:
        return []
    last = rejected[-1]
    tripped = [p["run_id"] for p in rejected if last["at"] - window <= p["at"] <= last["at"]]
    if len(tripped) < rule.rejections:
        return []
    after = past[past.index(last) + 1 :]
    clean = [p["run_id"] for p in after if p["run_state"] == "complete"
             and (p["state"] == ADMITTED or p["run_id"] in held)]  # fmt: skip
    clean.append(run_id)
    if len(clean) >= rule.clean_runs:
        return []
    return [Flag(d.node, REPEAT,
                 f"repeat offender (rejected {len(tripped)} times in {rule.days:g} days up to "
                 f"run {last['run_id']}): admitted only after {rule.clean_runs} consecutive clean "
                 f"complete runs, this is {len(clean)}", (*tripped, *clean), True)]  # fmt: skip


def _classes(d: NodeDecision) -> list[str]:
    return list(dict.fromkeys(r.remediation_class or "retest" for r in causes(d.reasons)))


def _escalation(escalated: Mapping[str, str]) -> str:
    if not escalated:
        return ""
    return "; remediation escalated: " + ", ".join(f"{a} -> {b}" for a, b in escalated.items())


def _flapping(
    run_id: str, d: NodeDecision, rule: Flapping, past: list[Mapping[str, Any]]
) -> list[Flag]:
    seq = [(p["run_id"], p["state"]) for p in past] + [(run_id, d.state)]
    seq = [s for s in seq if s[1] in (ADMITTED, REJECTED)][-rule.runs :]
    flips = sum(1 for a, b in zip(seq, seq[1:], strict=False) if a[1] != b[1])
    if flips < rule.min_flips:
        return []
    return [Flag(d.node, FLAPPING, f"admitted and rejected in turn: {flips} changes over its "
                 f"last {len(seq)} runs (rule: {rule.min_flips})", tuple(r for r, _ in seq),
                 False)]  # fmt: skip


def _drift(
    run_id: str, result: RunResult, rules: Mapping[str, Drift], series: Series
) -> list[Flag]:
    out = []
    for (check, node), vs in result.verdicts.items():
        rule = rules.get(node)
        if rule is None or check not in rule.metrics:
            continue
        for v in vs:
            if v.status is not Status.PASS or not is_number(v.observed):
                continue  # a failure is the floor's to judge; drift is about passing numbers
            comp = component_key(v.component)
            past = series.get((node, check, comp), [])[-rule.runs :]
            if len(past) < rule.min_runs:
                continue
            med = statistics.median(x for _, x in past)
            lower_better = v.reference is not None and v.reference.direction == "max"
            worse_pct = (
                (v.observed - med) / med * 100 if lower_better else (med - v.observed) / med * 100
            ) if med else 0.0  # fmt: skip
            if worse_pct < rule.drop_pct:
                continue
            unit = f" {v.unit}" if v.unit else ""
            how = "above" if lower_better else "below"
            out.append(Flag(
                node, DRIFT,
                f"{v.observed:g}{unit} is {worse_pct:.1f} % {how} its own median {med:g}{unit} "
                f"over {len(past)} complete runs (rule: {rule.drop_pct:g} %)",
                (*(r for r, _ in past), run_id), rule.blocks_admission, check, comp,
            ))  # fmt: skip
    return out


def apply(decisions: Mapping[str, NodeDecision], flags: Iterable[Flag]) -> None:
    """The flags into the decisions: a repeat offender's causes take their escalated class,
    one admitted too early is rejected, a blocking drift flag rejects its node."""
    for f in flags:
        d = decisions.get(f.node)
        if d is None:
            continue
        if f.escalated:
            picked = {id(r) for r in causes(d.reasons)}
            d.reasons = [
                dataclasses.replace(r, remediation_class=f.escalated.get(
                    r.remediation_class or "retest", r.remediation_class))
                if id(r) in picked else r
                for r in d.reasons
            ]  # fmt: skip
        elif f.blocks_admission and d.state == ADMITTED:
            check = REASON_PREFIX + f.rule + (f".{f.check}" if f.check else "")
            d.reasons.append(Reason(check, Status.FAIL.value, f.component or "", None, None,
                                    f.message + f" (runs {', '.join(f.based_on)})",
                                    remediation="retest", remediation_class="retest"))  # fmt: skip


def flag_lines(section: Mapping[str, Any] | None) -> list[str]:
    """The terminal's lines for admission.json's `history` flags: repeat offenders first."""
    if not section:
        return []
    order = {REPEAT: 0, DRIFT: 1, FLAPPING: 2}
    lines = []
    for f in sorted(section.get("flags", ()), key=lambda f: (order.get(f["rule"], 9), f["node"])):
        word = {REPEAT: "REPEAT OFFENDER", DRIFT: "DRIFT", FLAPPING: "FLAPPING"}.get(
            f["rule"], f["rule"].upper()
        )
        what = f" {f['check']} [{f['component']}]" if f.get("check") else ""
        lines.append(f"{word} {f['node']}:{what} {f['message']} (runs {', '.join(f['based_on'])})")
    return lines
