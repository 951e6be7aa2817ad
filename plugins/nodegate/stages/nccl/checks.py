"""The checks of stage `nccl` (judged by the active skeleton's phases) and the per-node verdicts
from what the jobs and the localization learnt."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

from ClusterShell.NodeSet import NodeSet

from nodegate.core.checks import AnyCheck, Chart, Check, CheckTable
from nodegate.core.values import Status, Verdict
from nodegate.core.verdicts import marked
from nodegate.framework.active.judge import failure_status
from nodegate.parsers.nccl_debug import NcclHostTransport
from nodegate.stages.fabric.discovered import Cabling, leaves_crossed
from nodegate.stages.nccl.matrix import TIER, GroupResult, describe, findings
from nodegate.stages.nccl.plan import (
    LOCAL,
    PROBE_EXTRA_ROUNDS,
    Localization,
    NcclJob,
    NcclOutcome,
)
from nodegate.stages.nccl.profile import NcclProfile
from nodegate.stages.nccl.results import JobReading
from nodegate.stages.nccl.transport import findings as transport_findings

UNIT = "GB/s"
CHART = Chart(1)  # report.html: NCCL's numbers right after ib_pairs' bandwidth

NO_SINGLES = (
    "no single-node job at this run's level (nccl.single_node_jobs: false): the whole set "
    "judges every node"
)
SINGLE: Check[None, NcclProfile] = Check(
    "nccl.single_node.busbw",
    "all_reduce_perf on the node alone reaches the single-node floor.",
    None,
    "node",
    "test_nccl_single_node_busbw",
    "pipeline",
    chart=CHART,
)
WHOLE: Check[None, NcclProfile] = Check(
    "nccl.whole.busbw",
    "the all-reduce over the whole admitted set reaches its floors, data right.",
    None,
    "job",
    "test_nccl_whole_set_busbw",
    "pipeline",
    chart=CHART,
    measures="job",  # one number of the whole set, the same on every member: the job's
)
LOCALIZED: Check[None, NcclProfile] = Check(
    "nccl.localized",
    "the node is not named by localization (cleared, or nothing to find).",
    None,
    "node",
    "test_nccl_localized",
    "pipeline",
    chart=CHART,
)
MATRIX: Check[None, NcclProfile] = Check(
    "nccl.matrix",
    "every collective of the profile's matrix reaches its floor at every scale the node is in, "
    "and its busbw keeps to the curve (a break is a fabric tier's: a repair-list item that "
    "rejects no node).",
    None,
    "collective",
    "test_nccl_matrix",
    "pipeline",
    chart=CHART,
    infrastructure=True,
    measures="job",  # a group's number, the same on each of its nodes (A/B: once per group)
)
TRANSPORT: Check[None, NcclProfile] = Check(
    "nccl.transport",
    "in every multi-node job the node was in, NCCL used a transport the profile allows "
    "(network, GPU Direct RDMA, NVLS, CollNet/SHARP, HCAs), read from its NCCL_DEBUG=INFO "
    "lines, whatever the bandwidth.",
    None,
    "nccl/net",
    "test_nccl_transport",
    "pipeline",  # what NCCL chose, not a measurement: not charted
)
CLEANUP: Check[None, NcclProfile] = Check(
    "nccl.cleanup",
    "no all_reduce_perf rank or launcher is left on the node after the stage.",
    None,
    "process",
    "test_no_stray_nccl",
    "pipeline",  # a count of strays, not a measurement: not charted
)

CHECKS: CheckTable[None, NcclProfile] = CheckTable(
    "nccl", [SINGLE, WHOLE, LOCALIZED, MATRIX, TRANSPORT, CLEANUP]
)

Refs = Callable[[NcclOutcome, str], tuple[str, ...]]


class Judge:
    """Per-node verdicts of one campaign from its localization and the jobs' readings."""

    def __init__(
        self,
        loc: Localization,
        prof: NcclProfile,
        readings: Mapping[NcclJob, JobReading],
        refs: Refs,
        cabling: Cabling | None = None,
        uplinks: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.loc, self.prof, self.readings, self.refs = loc, prof, readings, refs
        self.cabling: Cabling = cabling or {}
        self.uplinks = uplinks or {}  # leaf -> the far ends of its uplinks (fabric stage)
        self._memo: dict[str, Any] = {}

    def crossing(self, group: Sequence[str]) -> str:
        """`; it crosses leaf-r01-rail0, ...` for a failing group, when the fabric is known."""
        leaves = leaves_crossed(self.cabling, group)
        if not leaves:
            return ""
        shown = ", ".join(leaves[:16]) + (
            f" (+{len(leaves) - 16} more)" if len(leaves) > 16 else ""
        )
        return f"; it crosses {len(leaves)} leaves: {shown} (and their uplinks to the spines)"

    def verdicts(self, node: str) -> list[Verdict]:
        return [self.single(node), self.whole(node), self.localized(node), *self.matrix(node),
                *self.fabric(node), self.transport(node)]  # fmt: skip

    def pair_jobs(self) -> list[NcclOutcome]:
        """The failed localization jobs the slow leaf pair explains (they hold both leaves and
        no node named, suspected or lost)."""
        if "pair_jobs" not in self._memo:
            explained = set(self.loc.suspects()) | self.loc.blamed() | self.loc.down.keys()
            self._memo["pair_jobs"] = [
                r for r in self.loc.results if r.test.phase in ("whole", *LOCAL)
                and not r.passed and self.loc.holds_slow_pair(r.test.nodes)
                and not explained & set(r.test.nodes)
            ]  # fmt: skip
        got: list[NcclOutcome] = self._memo["pair_jobs"]
        return got

    def between(self, a: str, b: str) -> str:
        """`leaf01's uplinks (P17 -> spine01 P1, ...) and leaf02's (...), both on spine01`,
        when the fabric stage discovered them; else the leaves' uplinks and spines."""
        ua, ub = self.uplinks.get(a), self.uplinks.get(b)
        if not ua or not ub:
            return f"the uplinks of {a} and {b} and the spines between them"

        def spines(ups: Sequence[str]) -> set[str]:
            return {u.rpartition(" -> ")[2].split()[0] for u in ups}

        common = sorted(spines(ua) & spines(ub))
        both = f", both on {', '.join(common)}" if common else ", no spine in common"
        return f"{a}'s uplinks ({', '.join(ua)}) and {b}'s ({', '.join(ub)}){both}"

    def fabric(self, node: str) -> list[Verdict]:
        """The slow leaf pair's mark on each node of its two leaves (a repair-list item of
        nccl.matrix: PASS for the node, which passed inside its leaf and with good nodes)."""
        pair = self.loc.slow_pair()
        if pair is None:
            return self.pair_not_named(node)
        if self.loc.leaf_of(node) not in pair or self.loc.status(node) not in ("cleared", "pass"):
            return []
        a, b = pair
        jobs = self.pair_jobs()
        got = [(bw, r) for r in jobs if (bw := self._reading(r).busbw) is not None]
        slowest = min(got, key=lambda x: x[0]) if got else None
        floor = self.prof.floors(2).busbw
        shown = "; ".join(self.describe(r) for r in jobs[:4])
        more = f" (+{len(jobs) - 4} more)" if len(jobs) > 4 else ""
        msg = (
            f"infrastructure: flows between {a} and {b} are slow: every failed job over nodes "
            f"of both leaves ({len(jobs)}: {shown}{more}), every job inside one leaf and over "
            f"other leaves passed; between them: {self.between(a, b)}"
        )
        ev = tuple(ref for r in jobs[:4] for ref in self.refs(r, node))
        v = marked(MATRIX, node, f"leaves {a}+{b}", None if slowest is None else slowest[0],
                   floor.expected(), msg, unit=UNIT, evidence=ev,
                   remediation=f"check {self.between(a, b)} (link state, errors, routing); "
                   "no node is to blame")  # fmt: skip
        return [v if slowest is None else replace(v, job=self.job_of(slowest[1]))]

    def pair_not_named(self, node: str) -> list[Verdict]:
        """A fault between leaves the rounds narrowed but did not name: its candidate pairs,
        a mark on the nodes of their leaves (no node is to blame)."""
        cands = sorted(self.loc.pair_candidates() or ())
        if not cands or self.loc.status(node) not in ("cleared", "pass"):
            return []
        if not any(self.loc.leaf_of(node) in p for p in cands):
            return []
        shown = ", ".join(f"{a}+{b}" for a, b in cands[:8])
        more = f" (+{len(cands) - 8} more)" if len(cands) > 8 else ""
        jobs = self.pair_jobs()
        msg = (
            f"infrastructure: flows between two leaves are slow, the pair not named within "
            f"{self.prof.max_rounds + PROBE_EXTRA_ROUNDS} rounds: one of {len(cands)} leaf "
            f"pairs: {shown}{more}; failed jobs over good nodes: "
            f"{'; '.join(self.describe(r) for r in jobs[:4])}"
        )
        ev = tuple(ref for r in jobs[:4] for ref in self.refs(r, node))
        return [marked(MATRIX, node, "leaves (pair not named)", None, None, msg, evidence=ev,
                       remediation="check the uplinks and spines between these leaf pairs; "
                       "no node is to blame")]  # fmt: skip

    def transport(self, node: str) -> Verdict:
        """FAIL when NCCL on this node used a transport the profile does not allow, in any
        multi-node job it was in (the first such job's lines as evidence); ERROR when the jobs
        that measured something show no line saying what the profile asks; SKIP when the node
        was in no multi-node job with a result."""
        policy = self.prof.transport
        if policy is None:
            return Verdict(
                TRANSPORT.id,
                node,
                Status.PASS,
                "nccl/net",
                message="the profile asserts no transport (nccl.transport: none)",
            )
        jobs = [o for o in self.loc.jobs_of(node)
                if len(o.test.nodes) > 1 and o.lost_why(node) is None
                and self._reading(o).error is None and o.error is None]  # fmt: skip
        if not jobs:
            return Verdict(
                TRANSPORT.id,
                node,
                Status.SKIP,
                "nccl/net",
                message="in no multi-node job that ran to its table",
            )
        unknown: tuple[NcclOutcome, list[str]] | None = None
        shown: NcclOutcome | None = None  # the first job whose lines said everything asked
        for o in jobs:
            facts = self._reading(o).transport.get(node)
            if facts is None:
                unknown = unknown or (o, [f"no NCCL_DEBUG line from {node}"])
                continue
            bad, missing = transport_findings(facts, policy)
            if bad:
                why = "; ".join(f"{f.component}: {f.reason}" for f in bad)
                lines = " | ".join(facts.lines[:6])
                msg = f"{o.test.key} (round {o.round.label}) on host {facts.host}: {why} [{lines}]"
                return Verdict(TRANSPORT.id, node, Status.FAIL, bad[0].component, message=msg,
                               remediation=_TRANSPORT_HINT[bad[0].kind],
                               evidence=self.refs(o, node))  # fmt: skip
            if missing:
                unknown = unknown or (o, [f"{f.component}: {f.reason}" for f in missing])
            else:
                shown = shown or o
        if shown is not None:
            facts = self._reading(shown).transport[node]
            return Verdict(TRANSPORT.id, node, Status.PASS, "nccl/net",
                           message=f"{describe_transport(facts)} ({shown.test.key}, round "
                           f"{shown.round.label}; {len(jobs)} multi-node job(s) read)",
                           evidence=self.refs(shown, node))  # fmt: skip
        o, said = unknown or (jobs[0], ["no NCCL_DEBUG line"])
        return Verdict(TRANSPORT.id, node, Status.ERROR, "nccl/net",
                       message=f"{o.test.key} (round {o.round.label}): {'; '.join(said)} "
                       "(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)",
                       remediation=_hint(TRANSPORT, Status.ERROR),
                       evidence=self.refs(o, node))  # fmt: skip

    def matrix_results(self) -> list[GroupResult]:
        """What every matrix job measured (a tool error or wrong data: None)."""
        if "matrix" not in self._memo:
            self._memo["matrix"] = matrix_results(self.loc, self.readings)
        got: list[GroupResult] = self._memo["matrix"]
        return got

    def matrix_findings(self) -> dict[tuple[str, ...], Any]:
        """The matrix's findings by `_group_key`, once per judge."""
        if "findings" not in self._memo:
            m = self.prof.matrix
            self._memo["findings"] = {} if m is None else {
                _group_key(f.group.collective, f.group.scale, f.group.nodes): f
                for f in findings(m, self.matrix_results())
            }  # fmt: skip
        got: dict[tuple[str, ...], Any] = self._memo["findings"]
        return got

    def job_of(self, o: NcclOutcome) -> str:
        """`_job(o)`, folded once per job (a whole-set job's 10,000 names, once)."""
        jobs = self._memo.setdefault("jobs", {})
        got = jobs.get(o.test)
        if got is None:
            got = jobs[o.test] = _job(o)
        return str(got)

    def matrix(self, node: str) -> list[Verdict]:
        """One verdict per (collective, scale) the node was in: PASS, a mark (a tier's break:
        PASS for the node, on the repair list), or ERROR (nothing measured)."""
        m = self.prof.matrix
        if m is None:  # not applicable: a PASS that says so (as `roce: null`)
            return [Verdict(MATRIX.id, node, Status.PASS, "collective",
                            message="the profile runs no collective matrix")]  # fmt: skip
        mine = [o for o in self.loc.jobs_of(node) if o.test.phase == "matrix"]
        if not mine:
            if self.loc.status(node) in ("pass", "cleared"):
                return [Verdict(MATRIX.id, node, Status.PASS, "collective",
                                message="in no group at the matrix's scales (alone on its "
                                "leaf, or no whole set left)")]  # fmt: skip
            return [Verdict(MATRIX.id, node, Status.SKIP, "collective",
                            message="not in the matrix (not in the whole set, or named, "
                            "suspected or lost by localization)")]  # fmt: skip
        found = self.matrix_findings()
        out = []
        for o in mine:
            t = o.test
            floor = m.floors[(t.collective, t.scale)]
            comp = f"{t.collective}@{t.scale}"
            r = self._reading(o)
            eff = "" if r.busbw is None else f", {r.busbw / m.line_rate * 100:.0f} % of line rate"
            msg = f"{self.describe(o)}{eff} [floor {floor.expected()} {UNIT}]"
            f = found.get(_group_key(t.collective, t.scale, t.nodes))
            ev = self.refs(o, node)
            if o.error is not None or r.busbw is None or o.lost_why(node) is not None:
                out.append(Verdict(MATRIX.id, node, self.status([o]) if o.lost_why(node) is None
                                   else Status.ERROR, comp, None, floor.expected(), UNIT, msg,
                                   _hint(MATRIX, Status.ERROR), ev, reference=floor))  # fmt: skip
            elif f is not None:
                out.append(replace(marked(MATRIX, node, comp, r.busbw, floor.expected(),
                                  f"infrastructure: {describe(f, self.loc.leaf, m.line_rate)}",
                                  remediation=f"check {TIER[t.scale]} (nodes in this group "
                                  "passed alone and in smaller jobs)", unit=UNIT,
                                  evidence=ev), job=self.job_of(o)))  # fmt: skip
            else:
                out.append(Verdict(MATRIX.id, node, Status.PASS, comp, r.busbw, floor.expected(),
                                   UNIT, msg, None, ev, reference=floor,
                                   job=self.job_of(o)))  # fmt: skip
        return out

    def status(self, outcomes: Sequence[NcclOutcome]) -> Status:
        """Wrong data is a FAIL (the job ran and measured it); otherwise a tool error with
        nothing measured is an ERROR."""
        if any(self._reading(o).corrupt for o in outcomes if not o.passed):
            return Status.FAIL
        return failure_status(outcomes)

    def describe(self, o: NcclOutcome) -> str:
        """`whole-16 (round 2): 212.3 GB/s, avg 150.1`, or what went wrong."""
        r = self._reading(o)
        head = f"{o.test.key} (round {o.round.label})"
        if o.lost:
            return f"{head}: not run ({'; '.join(w for _, w in o.lost)})"
        parts = []
        if r.busbw is not None:
            parts.append(f"{r.busbw:g} {UNIT}")
        if r.avg_busbw is not None:
            parts.append(f"avg {r.avg_busbw:g}")
        for why in (r.corrupt, r.error):
            if why:
                parts.append(why)
        return f"{head}: {', '.join(parts) or 'no result'}"

    def _reading(self, o: NcclOutcome) -> JobReading:
        return self.readings.get(o.test) or JobReading(None, None, o.error)

    def _verdict(
        self,
        check: AnyCheck,
        node: str,
        o: NcclOutcome,
        component: str,
        note: str = "",
        status: Status | None = None,
    ) -> Verdict:
        floors = self.prof.floors(len(o.test.nodes))
        if status is None:
            status = Status.PASS if o.passed else self.status([o])
        if o.lost_why(node) is not None:
            status = Status.ERROR
        msg = f"{self.describe(o)}{note} [{self.prof.describe(len(o.test.nodes))}]"
        hint = None if status is Status.PASS else _hint(check, status)
        return Verdict(
            check.id, node, status, component, self._reading(o).busbw, floors.busbw.expected(),
            UNIT, msg, hint, self.refs(o, node), reference=floors.busbw,
            job=self.job_of(o) if check.measures == "job" else None,
        )  # fmt: skip

    def single(self, node: str) -> Verdict:
        if not self.loc.singles:  # not applicable: a PASS that says so (as the matrix's)
            return Verdict(SINGLE.id, node, Status.PASS, "node", message=NO_SINGLES)
        o = self.loc.single(node)
        if o is None:
            return Verdict(SINGLE.id, node, Status.ERROR, "node", message="single-node job not run")
        return self._verdict(SINGLE, node, o, f"node ({self.prof.ranks_per_node} ranks)")

    def whole(self, node: str) -> Verdict:
        """The whole-set job's verdict on `node`. When the job failed, localization decides:
        a node it cleared passes (the fault lies with the nodes it named), a named node fails
        (or errs) as its own jobs did, every node of a fault that needs a group fails."""
        o = self.loc.whole_of(node) or self.loc.whole()
        floor = self.prof.floors(2).busbw.expected()
        if o is None or node not in o.test.nodes:
            single = self.loc.single(node)
            if single is not None and not single.passed:
                why = "not in the whole-set job: its single-node job failed"
                return Verdict(WHOLE.id, node, Status.SKIP, "job", None, floor, UNIT, why)
            why = "whole-set job not run: fewer than two nodes passed their single-node job"
            if not self.loc.singles:
                why = "whole-set job not run: fewer than two nodes took part"
            return Verdict(WHOLE.id, node, Status.ERROR, "job", None, floor, UNIT, why)
        comp = "whole set"  # the same part in every run (A/B); the job's size is in the message
        if o.passed:
            return self._verdict(WHOLE, node, o, comp)
        st = self.loc.status(node)
        if st == "cleared":
            return self._cleared(node, o, comp)
        note, status = f"; {self.named()}", None
        also: tuple[str, ...] = ()
        decided: Sequence[NcclOutcome] = ()
        if st == "blamed":
            decided = fails = self.loc.pair_failures(node)
            status = self.status(fails)
            note += f"; this node fails with good partners: {self._history(fails)}"
            also = tuple(ref for r in fails for ref in self.refs(r, node))
        elif st == "group":  # named() says which group
            decided = self._unexplained(node) or [o]
            status = self.status(decided)
        elif st == "lost":
            status, note = Status.ERROR, f"{note}; this node: {self.loc.down[node]}"
        # A suspect localization did not clear: as the whole-set job says.
        v = self._verdict(WHOLE, node, o, comp, note, status)
        v = replace(v, evidence=v.evidence + also)
        return self._measured(v, decided) if v.observed is None else v

    def _measured(self, v: Verdict, outcomes: Sequence[NcclOutcome]) -> Verdict:
        """A FAIL the whole-set job measured nothing for (it hung or erred) carries what the
        jobs that decided it measured: the best of them, against the floor of its size."""
        got = [(b, r) for r in outcomes if (b := self._reading(r).busbw) is not None]
        if v.status is not Status.FAIL or not got:
            return v
        value, job = max(got, key=lambda x: x[0])
        floor = self.prof.floors(len(job.test.nodes)).busbw
        return replace(v, observed=value, expected=floor.expected(), reference=floor)

    def _unexplained(self, node: str) -> list[NcclOutcome]:
        """The failed jobs holding `node` that no named, suspected or lost node explains."""
        groups = set(self.loc.unexplained())
        return [r for r in self.loc.jobs_of(node) if not r.passed and r.test.phase != "matrix"
                and r.test.nodes in groups]  # fmt: skip

    def _history(self, outcomes: Sequence[NcclOutcome]) -> str:
        return "; ".join(self.describe(r) for r in outcomes)

    def _cleared(self, node: str, whole: NcclOutcome, comp: str) -> Verdict:
        """PASS for a node a localization job cleared: the whole-set job failed, the nodes
        named explain it, and the node reached the floor of a smaller job."""
        ok = next(r for r in self.loc.jobs_of(node) if r.test.phase in LOCAL and r.passed)
        floors = self.prof.floors(len(ok.test.nodes))
        msg = (
            f"whole-set job failed ({self.describe(whole)}); {self.named()}; this node cleared "
            f"by {self.describe(ok)} [{self.prof.describe(len(ok.test.nodes))}]"
        )
        ev = self.refs(whole, node) + self.refs(ok, node)
        return Verdict(
            WHOLE.id, node, Status.PASS, comp, self._reading(ok).busbw, floors.busbw.expected(),
            UNIT, msg, None, ev, reference=floors.busbw, job=self.job_of(ok),
        )  # fmt: skip

    def named(self) -> str:
        """What localization concluded, for the whole-set verdict of every node."""
        if "named" not in self._memo:
            self._memo["named"] = self._named()
        got: str = self._memo["named"]
        return got

    def _named(self) -> str:
        blamed = sorted(self.loc.blamed())
        group = self.loc.smallest_failing()
        parts = []
        if blamed:
            parts.append(f"localized: {NodeSet.fromlist(blamed)}")
        suspects = self.loc.suspects()
        if suspects:
            parts.append(f"not confirmed: {NodeSet.fromlist(suspects)}")
        if group is not None:
            parts.append(
                f"the fault needs a group of {len(group)} nodes, no single node to blame "
                f"(smallest failing: {NodeSet.fromlist(list(group))}){self.crossing(group)}"
            )
        pair = self.loc.slow_pair()
        if pair is not None:
            parts.append(f"between leaves: {pair[0]} and {pair[1]} (their flows slow)")
        elif (cands := self.loc.pair_candidates()) is not None:
            parts.append(f"between leaves, not named: one of {len(cands)} leaf pairs")
        if self.loc.down:
            parts.append(f"lost: {NodeSet.fromlist(sorted(self.loc.down))}")
        return "; ".join(parts) or "nothing localized"

    def localized(self, node: str) -> Verdict:
        st = self.loc.status(node)
        mine = [
            r for r in self.loc.jobs_of(node) if r.round.number > 2 and r.test.phase != "matrix"
        ]
        ev = tuple(ref for r in mine for ref in self.refs(r, node))
        history = "; ".join(self.describe(r) for r in mine)
        if st == "pass":
            return Verdict(LOCALIZED.id, node, Status.PASS, "node", message="whole-set job passed")
        if st == "untested":
            return Verdict(LOCALIZED.id, node, Status.SKIP, "node",
                           message="not in the whole-set job")  # fmt: skip
        if st == "cleared":
            return Verdict(LOCALIZED.id, node, Status.PASS, "node",
                           message=f"cleared: {history}", evidence=ev)  # fmt: skip
        if st == "lost":
            return Verdict(LOCALIZED.id, node, Status.ERROR, "node", message=self.loc.down[node],
                           remediation="check the node's SSH access, then qualify it again",
                           evidence=ev)  # fmt: skip
        if st == "blamed":
            fails = self.loc.pair_failures(node)
            msg = f"fails with two good partners: {'; '.join(self.describe(r) for r in fails)}"
            measured = [b for r in fails if (b := self._reading(r).busbw) is not None]
            pair_floor = self.prof.floors(2).busbw
            return Verdict(LOCALIZED.id, node, self.status(fails), "node",
                           max(measured) if measured else None, pair_floor.expected(),
                           UNIT, msg, "drain the node; check its GPUs, NVLink, HCAs and cables",
                           ev, reference=pair_floor)  # fmt: skip
        if st == "group":
            group = self.loc.smallest_failing() or ()
            msg = (
                f"the fault needs a group of {len(group)} nodes, no single node to blame "
                f"(smallest failing: {NodeSet.fromlist(list(group))}){self.crossing(group)}; "
                f"this node: {history}"
            )
            status = self.status(self._unexplained(node))
            return Verdict(LOCALIZED.id, node, status, "node", message=msg,
                           remediation="check the fabric between these nodes (switches, "
                           "routing, adaptive routing, SHARP)", evidence=ev)  # fmt: skip
        seen = [r for r in self.loc.jobs_of(node) if not r.passed and r.test.phase != "matrix"]
        msg = f"failed and not confirmed within {self.prof.max_rounds} rounds: {history or '-'}"
        return Verdict(LOCALIZED.id, node, self.status(seen) if seen else Status.ERROR, "node",
                       message=msg, remediation="retest with more healthy nodes",
                       evidence=ev)  # fmt: skip


def matrix_results(loc: Localization, readings: Mapping[NcclJob, JobReading]) -> list[GroupResult]:
    """What every matrix job measured (a tool error or wrong data: None)."""
    return [
        GroupResult(o.test.collective, o.test.scale, o.test.nodes,
                    None if o.error is not None or o.test not in readings
                    else readings[o.test].busbw)
        for o in loc.of_phase("matrix")
    ]  # fmt: skip


def _group_key(collective: str, scale: str, nodes: Sequence[str]) -> tuple[str, ...]:
    """A matrix group by (collective, scale, first node, size): a scale's groups are disjoint."""
    return (collective, scale, nodes[0], str(len(nodes)))


def _job(o: NcclOutcome) -> str:
    """The job a number is of, by its nodes (`Verdict.job`)."""
    return _folded(o.test.nodes)


@cache  # the whole set's nodes, folded once for all its members' verdicts
def _folded(nodes: tuple[str, ...]) -> str:
    return str(NodeSet.fromlist(list(nodes)))


_TRANSPORT_HINT = {
    "net": "NCCL fell off the allowed network: check the node's HCAs (ibstat, rdma link), "
    "NCCL_IB_HCA and the IB modules (stage hca)",
    "gdr": "GPU Direct RDMA is off: check nvidia-peermem (or DMA-BUF), ACS/IOMMU on the "
    "GPU-HCA path",
    "nvls": "NVLS is off: check the fabric manager and NVSwitch (stage pcie_gpu)",
    "collnet": "CollNet/SHARP is off: check the SHARP plugin and the aggregation manager",
    "hcas": "NCCL did not use the HCA the profile names: check the HCA (GPU Direct RDMA, link) "
    "and NCCL_IB_HCA",
}


def describe_transport(h: NcclHostTransport) -> str:
    """`NET/IB over mlx5_0, mlx5_1, GPU Direct RDMA on, NVLS available`."""
    nets = "/".join(dict.fromkeys([*h.channel_nets, *h.networks])) or "?"
    devs = ", ".join(d.name for d in h.ib_devices)
    gdr = {True: "on", False: "off", None: "?"}[h.gdr]
    nvls = {True: "available", False: "not available", None: "?"}[h.nvls_support]
    return f"NET/{nets}{' over ' + devs if devs else ''}, GPU Direct RDMA {gdr}, NVLS {nvls}"


def _hint(check: AnyCheck, status: Status) -> str:
    if status is Status.ERROR:
        return "read the job's output (evidence); an NCCL error or hang is no bandwidth number"
    if check is SINGLE:
        return "check NVLink / NVSwitch and the fabric manager (stage pcie_gpu)"
    return "see nccl.localized for the node to blame; requalify without it"
