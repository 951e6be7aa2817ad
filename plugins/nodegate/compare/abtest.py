"""CI A/B comparison: this run against a baseline (`--compare-to DIR`), per node and fleet-wide.

Both sides are baseline documents (`nodegate.compare.baseline`). Only checks both runs covered are
compared; nodes on one side only are listed. A change is a regression when:
- `status`: a check that passed on a node in the baseline does not pass now (or is gone);
- `metric`: a number moved the worse way beyond the profile's `regression.metrics` rule, or a
  number under a rule is no longer measured while its check still passes;
- `fact`: a text fact changed against the profile's `regression.versions` rule;
- `admission`: a node admitted by a complete baseline is not admitted by a complete run;
- fleet-wide `metric`: the median over the profile's nodes moved beyond the same rule;
- a job's number (a check that measures a job: the whole-set NCCL busbw) is compared once per
  job (`nodegate.compare.jobs`), never as each member's own: per node only its status.
Every other difference is reported as a change, not judged.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from nodegate.compare.baseline import is_number, worst_status
from nodegate.compare.jobs import JobChange, job_changes, job_checks, placement_checks
from nodegate.compare.jobs import fmt as _fmt
from nodegate.compare.jobs import pct as _pct
from nodegate.compare.regression import RegressionRules, describe_version_rule, version_regressed

FLEET = "fleet"  # the scope of fleet-wide changes
Kind = Literal["status", "metric", "fact", "admission"]
_NO_RULES = RegressionRules({}, {})


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the baseline and this run."""

    scope: str  # a node name, or FLEET
    kind: Kind
    check: str
    component: str
    before: Any
    after: Any
    unit: str | None
    regression: bool
    rule: str | None  # the profile rule that judged it: `may drop at most 3 %`
    message: str

    def to_json(self) -> dict[str, Any]:
        """Every field, in declaration order (the schema's order)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Comparison:
    """What changed between a baseline and this run."""

    baseline_run: str
    changes: list[Change] = field(default_factory=list)
    nodes_compared: list[str] = field(default_factory=list)
    only_in_baseline: list[str] = field(default_factory=list)
    only_in_run: list[str] = field(default_factory=list)
    checks_only_in_baseline: list[str] = field(default_factory=list)
    checks_only_in_run: list[str] = field(default_factory=list)
    jobs: list[JobChange] = field(default_factory=list)  # job-level numbers, once per job

    @property
    def regressions(self) -> list[Change]:
        """The regressions of nodes and of the fleet (the jobs': `job_regressions`)."""
        return [c for c in self.changes if c.regression]

    @property
    def job_regressions(self) -> list[JobChange]:
        return [j for j in self.jobs if j.regression]

    @property
    def regressed(self) -> bool:
        return any(c.regression for c in self.changes) or any(j.regression for j in self.jobs)


def compare(
    base: Mapping[str, Any], run: Mapping[str, Any], rules: Mapping[str, RegressionRules]
) -> Comparison:
    """Compare two baseline documents; `rules` by profile name (this run's profiles)."""
    b_nodes, r_nodes = base["nodes"], run["nodes"]
    b_checks, r_checks = set(base["checks"]), set(run["checks"])
    scope = b_checks & r_checks
    out = Comparison(
        baseline_run=base["run_id"],
        nodes_compared=[n for n in r_nodes if n in b_nodes],
        only_in_baseline=[n for n in b_nodes if n not in r_nodes],
        only_in_run=[n for n in r_nodes if n not in b_nodes],
        checks_only_in_baseline=sorted(b_checks - r_checks),
        checks_only_in_run=sorted(r_checks - b_checks),
    )
    both_complete = bool(base["complete"]) and bool(run["complete"])
    by_job = scope & job_checks()
    for node in out.nodes_compared:
        b, r = b_nodes[node], r_nodes[node]
        node_rules = rules.get(r["profile"] or "", _NO_RULES)
        if both_complete and b["admitted"] and not r["admitted"]:
            out.changes.append(
                Change(node, "admission", "admission", "", "admitted", "not admitted", None,
                       True, None, "admitted in the baseline, not admitted now")
            )  # fmt: skip
        for check in sorted(scope):
            out.changes += _check_changes(
                node, check, b["checks"].get(check, {}), r["checks"].get(check, {}), node_rules,
                numbers=check not in by_job,
            )  # fmt: skip
    out.changes += fleet_changes(base, run, out.nodes_compared, scope - by_job, rules)
    out.jobs += job_changes(base, run, by_job, rules)
    return out


def _check_changes(
    node: str,
    check: str,
    before: Mapping[str, Mapping[str, Any]],
    after: Mapping[str, Mapping[str, Any]],
    rules: RegressionRules,
    numbers: bool = True,
) -> list[Change]:
    """One node's changes of one check: its status, then each component's value (not for a
    check whose numbers are a job's: `numbers` False)."""
    changes: list[Change] = []
    b_status, a_status = worst_status(before.values()), worst_status(after.values())
    status_regressed = b_status == "pass" and a_status != "pass"
    if b_status != a_status:
        why = next((e.get("message", "") for e in after.values() if e["status"] != "pass"), "")
        msg = f"{check}: {b_status} -> {a_status}" + (f": {why}" if why else "")
        changes.append(
            Change(node, "status", check, "", b_status, a_status, None, status_regressed, None,
                   msg)
        )  # fmt: skip
    for comp in sorted(set(before) | set(after)) if numbers else ():
        b, a = before.get(comp), after.get(comp)
        bv = None if b is None else b["observed"]
        av = None if a is None else a["observed"]
        unit = (a or b or {}).get("unit")
        change = _value_change(node, check, comp, bv, av, unit, rules, status_regressed)
        if change is not None:
            changes.append(change)
    return changes


def _value_change(
    node: str,
    check: str,
    comp: str,
    bv: Any,
    av: Any,
    unit: str | None,
    rules: RegressionRules,
    status_regressed: bool,
) -> Change | None:
    metric = rules.metrics.get(check)
    if is_number(bv) and is_number(av):
        if float(bv) == float(av):
            return None
        bad = metric is not None and metric.regressed(float(bv), float(av))
        msg = f"{_fmt(bv, unit)} -> {_fmt(av, unit)}{_pct(float(bv), float(av))}"
        rule = None if metric is None else metric.describe()
        return Change(node, "metric", check, comp, bv, av, unit, bad, rule, msg)
    if is_number(bv) and av is None:
        if status_regressed:
            return None  # the check's status change already says it did not run
        rule = None if metric is None else metric.describe()
        msg = f"{_fmt(bv, unit)} -> not measured"
        return Change(node, "metric", check, comp, bv, None, unit, metric is not None, rule, msg)
    if bv == av:
        return None
    if bv is not None and check in placement_checks():
        msg = f"moved since the baseline: {_fmt(bv, unit)} -> {_fmt(av, unit)}"
        rule = "a cable may not move since the baseline"
        return Change(node, "fact", check, comp, bv, av, unit, True, rule, msg)
    version = rules.versions.get(check)
    bad = (
        version is not None
        and isinstance(bv, str)
        and isinstance(av, str)
        and version_regressed(version, bv, av)
    )
    rule = None if version is None else describe_version_rule(version)
    msg = f"{_fmt(bv, unit)} -> {_fmt(av, unit)}"
    return Change(node, "fact", check, comp, bv, av, unit, bad, rule, msg)


def _numbers(
    doc: Mapping[str, Any], nodes: list[str], profile: str, check: str
) -> dict[str, list[float]]:
    """component -> the numbers the profile's `nodes` measured for `check` in `doc`."""
    out: dict[str, list[float]] = {}
    for node in nodes:
        d = doc["nodes"][node]
        if d["profile"] != profile:
            continue
        for comp, e in d["checks"].get(check, {}).items():
            if is_number(e["observed"]):
                out.setdefault(comp, []).append(float(e["observed"]))
    return out


def fleet_changes(
    base: Mapping[str, Any],
    run: Mapping[str, Any],
    nodes: list[str],
    scope: set[str],
    rules: Mapping[str, RegressionRules],
) -> Iterator[Change]:
    """Fleet-wide: per profile, check and component, the median over the nodes on both sides."""
    profiles = sorted({run["nodes"][n]["profile"] or "" for n in nodes})
    for profile in profiles:
        prof_rules = rules.get(profile, _NO_RULES)
        for check in sorted(scope):
            before = _numbers(base, nodes, profile, check)
            after = _numbers(run, nodes, profile, check)
            for comp in sorted(set(before) & set(after)):
                bm, am = statistics.median(before[comp]), statistics.median(after[comp])
                if bm == am:
                    continue
                metric = prof_rules.metrics.get(check)
                bad = metric is not None and metric.regressed(bm, am)
                unit = _unit(run, nodes, check, comp)
                msg = (
                    f"{profile} median {_fmt(bm, unit)} -> {_fmt(am, unit)}{_pct(bm, am)} "
                    f"({len(before[comp])} -> {len(after[comp])} nodes)"
                )
                rule = None if metric is None else metric.describe()
                yield Change(FLEET, "metric", check, comp, bm, am, unit, bad, rule, msg)


def _unit(doc: Mapping[str, Any], nodes: list[str], check: str, comp: str) -> str | None:
    for n in nodes:
        e = doc["nodes"][n]["checks"].get(check, {}).get(comp)
        if e is not None and e["unit"]:
            return str(e["unit"])
    return None
