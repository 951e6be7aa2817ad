"""Job-level numbers in the A/B comparison: a number of a job of several nodes belongs to the job.

A check whose `measures` is `job` (the whole-set NCCL busbw) writes the job's one number into
every member's verdict, naming the job (`Verdict.job`, the baseline entry's `job`). A slower
rail on one node lowers it for all members; compared per node, every member would regress. So
its numbers are compared once per job: per check and component, each job of this run against
the baseline's job of the same nodes, else the one sharing most nodes (the whole set without a
node that dropped out is still the whole set). The nodes to blame are those whose own verdicts
regressed (the stage's localization turns a failed job into verdicts of the nodes it named):
their status changes, compared per node as before.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from ClusterShell.NodeSet import NodeSet

from nodegate.compare.baseline import is_number
from nodegate.compare.regression import RegressionRules
from nodegate.stages.registry import checks_by_id


@cache
def job_checks() -> frozenset[str]:
    """The checks whose number is of a job, not of the node (`Check.measures`)."""
    return frozenset(cid for cid, (_stage, c) in checks_by_id().items() if c.measures == "job")


@cache
def placement_checks() -> frozenset[str]:
    """The checks whose observation is where a part is (`Check.placement`: a cable's far
    end); a change since the baseline is a regression."""
    return frozenset(cid for cid, (_stage, c) in checks_by_id().items() if c.placement)


def fmt(value: Any, unit: str | None = None) -> str:
    """A compared value for a message: `386 Gb/s`, `28.41.1000`, `not measured`."""
    if value is None:
        return "not measured"
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{shown} {unit}" if unit and is_number(value) else shown


def pct(before: float, after: float) -> str:
    return "" if before == 0 else f" ({(after - before) / abs(before) * 100:+.1f} %)"


@dataclass(frozen=True, slots=True)
class Job:
    """One job's number in one run, as its members' entries carry it."""

    check: str
    component: str
    name: str  # its nodes, folded: `gpu[001-008]`
    nodes: frozenset[str]
    observed: float
    unit: str | None
    profile: str  # its first member's


@dataclass(frozen=True, slots=True)
class JobChange:
    """One job's number, baseline against this run (a side is None: no such job there)."""

    check: str
    component: str
    nodes_before: str | None
    nodes_after: str | None
    before: float | None
    after: float | None
    unit: str | None
    regression: bool
    rule: str | None
    message: str

    @property
    def name(self) -> str:
        """The job by its nodes in this run (else in the baseline)."""
        return self.nodes_after or self.nodes_before or ""

    def to_json(self) -> dict[str, Any]:
        """Every field, in declaration order (the schema's order)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def jobs_of(doc: Mapping[str, Any], checks: Collection[str]) -> dict[tuple[str, str], list[Job]]:
    """(check, component) -> the distinct jobs whose numbers the document's nodes carry; an
    entry without `job` (an older baseline): one job of the nodes carrying it."""
    found: dict[tuple[str, str, str], tuple[list[str], float, str | None]] = {}
    for node, d in doc["nodes"].items():
        for check in checks:
            for comp, e in d["checks"].get(check, {}).items():
                if is_number(e["observed"]):
                    key = (check, comp, str(e.get("job") or ""))
                    got = found.setdefault(key, ([], float(e["observed"]), e["unit"]))
                    got[0].append(node)
    out: dict[tuple[str, str], list[Job]] = {}
    for (check, comp, name), (carriers, value, unit) in found.items():
        nodes = frozenset(NodeSet(name)) if name else frozenset(carriers)
        shown = name or str(NodeSet.fromlist(carriers))
        profile = doc["nodes"][carriers[0]]["profile"] or ""
        job = Job(check, comp, shown, nodes, value, unit, profile)
        out.setdefault((check, comp), []).append(job)
    return out


def _matched(before: list[Job], after: list[Job]) -> list[tuple[Job | None, Job | None]]:
    """Pairs of the same job: the same nodes first, then by most nodes shared; the rest alone."""
    pairs: list[tuple[Job | None, Job | None]] = []
    left_b, left_a = list(before), list(after)
    for a in list(left_a):
        b = next((b for b in left_b if b.nodes == a.nodes), None)
        if b is not None:
            pairs.append((b, a))
            left_b.remove(b)
            left_a.remove(a)
    overlaps = sorted(
        (
            (len(b.nodes & a.nodes), i, j)
            for i, b in enumerate(left_b)
            for j, a in enumerate(left_a)
        ),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    used_b: set[int] = set()
    used_a: set[int] = set()
    for shared, i, j in overlaps:
        if shared and i not in used_b and j not in used_a:
            pairs.append((left_b[i], left_a[j]))
            used_b.add(i)
            used_a.add(j)
    pairs += [(b, None) for i, b in enumerate(left_b) if i not in used_b]
    pairs += [(None, a) for j, a in enumerate(left_a) if j not in used_a]
    return pairs


def job_changes(
    base: Mapping[str, Any],
    run: Mapping[str, Any],
    checks: Collection[str],
    rules: Mapping[str, RegressionRules],
) -> Iterator[JobChange]:
    """Each job's number compared once, by the rules of its profile (this run's)."""
    b_jobs, r_jobs = jobs_of(base, checks), jobs_of(run, checks)
    for key in sorted(set(b_jobs) | set(r_jobs)):
        check, comp = key
        for b, a in _matched(b_jobs.get(key, []), r_jobs.get(key, [])):
            change = _job_change(check, comp, b, a, bool(r_jobs.get(key)), rules)
            if change is not None:
                yield change


def _job_change(
    check: str,
    comp: str,
    b: Job | None,
    a: Job | None,
    measured_now: bool,
    rules: Mapping[str, RegressionRules],
) -> JobChange | None:
    either = a or b
    assert either is not None
    rule = rules.get(either.profile)
    metric = None if rule is None else rule.metrics.get(check)
    described = None if metric is None else metric.describe()
    bv, av = (None if b is None else b.observed), (None if a is None else a.observed)
    unit = either.unit
    if b is not None and a is not None:
        if bv == av and b.nodes == a.nodes:
            return None
        bad = metric is not None and metric.regressed(b.observed, a.observed)
        msg = (
            f"{fmt(bv, unit)}, the same number"
            if bv == av
            else f"{fmt(bv, unit)} -> {fmt(av, unit)}{pct(b.observed, a.observed)}"
        )
    elif a is None:
        # No longer measured: a regression under a rule, unless this run measured the check
        # in another job (a localization's smaller job of a failed baseline).
        bad, msg = metric is not None and not measured_now, f"{fmt(bv, unit)} -> not measured"
    else:
        bad, msg = False, f"not in the baseline -> {fmt(av, unit)}"
    return JobChange(
        check, comp, None if b is None else b.name, None if a is None else a.name, bv, av,
        unit, bad, described, msg,
    )  # fmt: skip
