"""Fleet-relative outliers, the second tier after the floors: the gray failures floors miss.

Per profile, per metric (a check id of the profile's `outliers:` section) and per component
(`mlx5_3 port 1 (rail 3)`), over the nodes that measured it: a node whose number passed its
floor but sits below `median - k x MAD` and at least `min_drop_pct` below the median is
flagged. The second condition keeps identical numbers (MAD 0) from flagging a hair's
difference. Fewer than `min_nodes` measured: not judged, a note says so. Flags go into
admission.json (`outliers`) and the terminal; with `blocks_admission: true` each also
rejects its node (reason check `outlier.<check id>`).

A check whose number is a job's (`Check.measures`: the whole-set NCCL busbw) is judged over
jobs, each job's number once (`Verdict.job`), never as each member's own: a flagged job is
listed by its nodes and rejects no member (its nodes to blame are those the stage's
localization named, in their own verdicts).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from ClusterShell.NodeSet import NodeSet

from nodegate.admission.gate import NodeDecision, Reason
from nodegate.compare.baseline import component_key, is_number
from nodegate.compare.jobs import job_checks
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.core.safetext import printable
from nodegate.core.values import Status
from nodegate.profiles import Profile

SECTION = "outliers"
REASON_PREFIX = "outlier."
REMEDIATION = "retest"  # a gray failure is confirmed by a second run before anything is pulled


@dataclass(frozen=True, slots=True)
class OutlierPolicy:
    """A profile's `outliers:` section."""

    metrics: tuple[str, ...]
    k: float
    min_drop_pct: float
    min_nodes: int
    blocks_admission: bool

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> OutlierPolicy:
        return cls(
            tuple(doc["metrics"]),
            float(doc["k"]),
            float(doc["min_drop_pct"]),
            int(doc["min_nodes"]),
            bool(doc["blocks_admission"]),
        )


def outlier_policy(profile: Profile) -> OutlierPolicy | None:
    """The profile's policy, or None when it has no `outliers:` section."""
    if not isinstance(profile.data.get(SECTION), Mapping):
        return None
    return profile.typed(SECTION, OutlierPolicy.of)


def validate_policies(profiles: Collection[Profile], known_checks: Collection[str]) -> None:
    """ConfigError for an `outliers.metrics` entry naming no check."""
    for p in profiles:
        policy = outlier_policy(p)
        for check in policy.metrics if policy else ():
            if check not in known_checks:
                raise ConfigError(
                    f"profile {p.name} ({p.source}): {SECTION}.metrics: {check}: no such check"
                )


@dataclass(frozen=True, slots=True)
class Flag:
    """One node's number far below its fleet's; `job`: a job's number, `node` its nodes."""

    node: str
    profile: str
    check: str
    component: str
    observed: float
    unit: str | None
    median: float
    mad: float
    limit: float
    nodes: int  # how many nodes (jobs, for a job's number) measured it
    blocks_admission: bool
    job: bool = False

    def message(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        return (
            f"{self.observed:g}{u}, below {self.limit:g}{u}: fleet median {self.median:g}{u}, "
            f"MAD {self.mad:g}{u} over {self.nodes} {'jobs' if self.job else 'nodes'}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "profile": self.profile,
            "check": self.check,
            "component": self.component,
            "observed": self.observed,
            "unit": self.unit,
            "median": self.median,
            "mad": self.mad,
            "limit": self.limit,
            "nodes": self.nodes,
            "blocks_admission": self.blocks_admission,
            "message": self.message(),
            **({"job": True} if self.job else {}),
        }


@dataclass
class Outliers:
    """The run's second tier: flags, and notes on what was not judged."""

    flagged: list[Flag] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"flagged": [f.to_json() for f in self.flagged], "notes": self.notes}


def limit_for(values: list[float], policy: OutlierPolicy) -> tuple[float, float, float]:
    """(median, MAD, limit): a number below `limit` is an outlier.

    >>> limit_for([386.0, 386.0, 386.0, 366.7], OutlierPolicy(("x.y",), 5, 3, 3, False))
    (386.0, 0.0, 374.42)
    """
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    limit = min(median - policy.k * mad, median * (1 - policy.min_drop_pct / 100))
    return median, mad, round(limit, 6)


def find_outliers(result: RunResult, profiles: Mapping[str, Profile]) -> Outliers | None:
    """The second tier over the run's verdicts; None when no node's profile asks for it."""
    policies = {n: outlier_policy(p) for n, p in profiles.items()}
    if not any(policies.values()):
        return None
    # (profile, check, component) -> node (or job) -> (number, unit, passed its floor)
    groups: dict[tuple[str, str, str], dict[str, tuple[float, str | None, bool]]] = {}
    by_job = job_checks()
    for (check, node), vs in result.verdicts.items():
        policy = policies.get(node)
        if policy is None or check not in policy.metrics:
            continue
        for v in vs:
            if is_number(v.observed):
                key = (profiles[node].name, check, component_key(v.component))
                who = v.job if check in by_job and v.job else node  # a job's number: once
                passed = v.status is Status.PASS
                seen = groups.setdefault(key, {}).get(who)
                passed = passed and (seen is None or seen[2])
                groups[key][who] = (float(v.observed), v.unit, passed)
    out = Outliers()
    tiny: dict[tuple[str, str], list[int]] = {}
    by_profile = {p.name: policies[n] for n, p in profiles.items()}
    for (profile, check, comp), measured in sorted(groups.items()):
        policy = by_profile[profile]
        assert policy is not None
        if len(measured) < policy.min_nodes:
            tiny.setdefault((profile, check), []).append(len(measured))
            continue
        median, mad, limit = limit_for([m[0] for m in measured.values()], policy)
        job = check in by_job
        for node, (value, unit, passed) in measured.items():
            if passed and value < limit:
                out.flagged.append(
                    Flag(node, profile, check, comp, value, unit, median, mad, limit,
                         len(measured), policy.blocks_admission and not job, job)
                )  # fmt: skip
    for (profile, check), counts in tiny.items():
        policy = by_profile[profile]
        assert policy is not None
        what = "jobs" if check in by_job else "nodes"
        out.notes.append(
            f"{check} ({profile}): {len(counts)} components measured on {max(counts)} {what} or "
            f"fewer, below min_nodes {policy.min_nodes}: not judged"
        )
    order = {n: i for i, n in enumerate(profiles)}
    out.flagged.sort(key=lambda f: (order.get(f.node, len(order)), f.node, f.check, f.component))
    return out


def reject_blocking(decisions: Mapping[str, NodeDecision], found: Outliers) -> None:
    """A flag whose profile blocks admission becomes a reason of its node's decision."""
    for f in found.flagged:
        d = decisions.get(f.node)
        if f.blocks_admission and d is not None:
            d.reasons.append(
                Reason(REASON_PREFIX + f.check, Status.FAIL.value, f.component, f.observed,
                       f">= {f.limit:g}", "fleet outlier: " + f.message(), f.unit, REMEDIATION,
                       remediation_class=REMEDIATION)
            )  # fmt: skip


def summary_lines(section: Mapping[str, Any]) -> list[str]:
    """The terminal's "nodegate outliers" section: flags folded over nodes, then the notes."""
    groups: dict[str, list[str]] = {}
    for f in section["flagged"]:
        how = "REJECTED" if f["blocks_admission"] else "flagged"
        text = f"{how} {f['check']} [{f['component']}]: {f['message']}"
        groups.setdefault(text, []).append(f["node"])
    n = len(section["flagged"])
    lines = [f"fleet-relative outliers (second tier, median - k x MAD): {n} flagged"]
    lines += [f"  {NodeSet.fromlist(nodes)}: {text}" for text, nodes in groups.items()]
    lines += [f"  note: {note}" for note in section["notes"]]
    return [printable(ln) for ln in lines]


class OutlierSummary:
    """The terminal's "nodegate outliers" section (a `pytest_nodegate_admission` consumer)."""

    def __init__(self) -> None:
        self.section: Mapping[str, Any] | None = None

    @pytest.hookimpl
    def pytest_nodegate_admission(self, doc: dict[str, Any]) -> None:
        self.section = doc.get(SECTION)

    @pytest.hookimpl(trylast=True)  # after the admission section
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.section is not None:
            terminalreporter.section("nodegate outliers")
            for line in summary_lines(self.section):
                terminalreporter.write_line(line)
