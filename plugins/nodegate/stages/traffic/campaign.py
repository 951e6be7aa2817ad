"""One traffic campaign: the nodes of one profile, the rails tested, incasts with their victim
flows, a bisection per rail, judged and blamed (`blame`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from nodegate.core.thresholds import Threshold
from nodegate.core.values import Verdict
from nodegate.framework.active.addresses import peer_address
from nodegate.framework.active.campaign import Campaign, EvidenceRefs, Execution, Spawner
from nodegate.framework.active.rounds import Outcome, Sanity
from nodegate.inventory import Node
from nodegate.stages.traffic.blame import (
    Cable,
    Finding,
    Infra,
    Judged,
    Namer,
    discovered_name,
    judge_bisection,
    judge_incast,
    switch_name,
)
from nodegate.stages.traffic.checks import BY_AREA, area_verdict, fabric_verdicts
from nodegate.stages.traffic.measure import Measured, measure
from nodegate.stages.traffic.plan import TrafficPlan, TrafficTest
from nodegate.stages.traffic.profile import TrafficProfile
from nodegate.stages.traffic.run import RailPath, Runner, Timing, channels
from nodegate.transport.base import Transport


class TrafficCampaign(Campaign[TrafficTest]):
    """Units: (node, rail). Tests: an incast with its victim flow, or a bisection, on a rail."""

    def __init__(
        self, name: str, prof: TrafficProfile, paths: Sequence[RailPath], members: Sequence[Node],
        transport: Transport, leaf: Mapping[str, str], prio: int | None,
        on_rail: Mapping[tuple[str, int], str] | None = None,
        ports: Mapping[tuple[str, int], tuple[int, int]] | None = None,
        cables: Mapping[str, Sequence[Cable]] | None = None,
    ) -> None:  # fmt: skip
        self.name = name
        # (node, rail) -> (LID, port) of the switch port it lands on (the fabric stage's)
        self.ports = dict(ports or {})
        # leaf -> its linked uplinks (leaf LID, port, spine, its LID, its port): the same's
        self.cables = {k: tuple(v) for k, v in (cables or {}).items()}
        self.prof = prof
        self.paths = {p.rail.rail: p for p in paths}
        self.nodes = tuple(n.name for n in members)
        self.leaf = dict(leaf)
        self.prio = prio  # the RoCE priority whose counters are read; None on InfiniBand
        # (node, rail) -> the switch the fabric stage discovered it on: every node's every rail
        # tested, else none (labels then)
        cabled = dict(on_rail or {})
        self.discovered = bool(cabled) and all(
            (n, r) in cabled for n in self.nodes for r in self.paths
        )
        rail_leaf = {
            r: {n: cabled[(n, r)] for n in self.nodes} for r in self.paths if self.discovered
        }
        self.name_switch: Namer = discovered_name if self.discovered else switch_name
        self.localizer: TrafficPlan = TrafficPlan(
            self.nodes, self.leaf, tuple(sorted(self.paths)), prof.senders, prof.seed, rail_leaf
        )
        self.performance: Threshold = prof.aggregate
        self.addresses = {
            n.name: {r: peer_address(n, r, transport).address for r in self.paths} for n in members
        }
        self.timings: dict[TrafficTest, list[Timing]] = {}
        self.measured: dict[TrafficTest, Measured] = {}
        self.judged: dict[TrafficTest, Judged] = {}

    def plan_header(self) -> dict[str, Any]:
        return {
            "method": self.prof.describe(),
            "leaves": dict(sorted(self.leaf.items())),
            "discovered": self.discovered,
            "counters": self.prio is not None,
        }

    def doc_of(self, test: TrafficTest) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": test.kind, "rail": test.rail}
        if test.kind == "incast":
            doc.update(receiver=test.receiver, senders=list(test.senders))
            if test.victim is not None:
                doc["victim"] = {"sender": test.victim[0], "receiver": test.victim[1]}
        else:
            doc["pairs"] = [list(p) for p in test.pairs]
        if test.retest:
            doc["retest"] = test.retest
        return doc

    def nodes_of(self, test: TrafficTest) -> tuple[str, ...]:
        return test.nodes()

    def key_of(self, test: TrafficTest) -> str:
        if test.kind == "bisection":
            if test.retest:
                return f"rail{test.rail}-bisection-retest-{test.retest}"
            if len(test.pairs) == 1:  # the odd node out, alone
                return f"rail{test.rail}-bisection-{test.pairs[0][0]}-to-{test.pairs[0][1]}"
            return f"rail{test.rail}-bisection"
        tail = f"-retest-{test.retest}" if test.retest else ""
        return f"rail{test.rail}-incast-to-{test.receiver}{tail}"

    def resources(self, test: TrafficTest) -> frozenset[Hashable]:
        return frozenset((n, test.rail) for n in test.nodes())

    def channels(self, test: TrafficTest) -> int:
        sw = self.switches(test)
        return channels(test, self.prio is not None, len(sw[1]) if sw else 0)

    def watch(self, test: TrafficTest) -> tuple[int, int] | None:
        """The switch (LID, port) facing an incast's receiver whose XmitWait is judged: on
        InfiniBand with `traffic.xmit_wait` set, where the fabric stage discovered it."""
        if test.kind != "incast" or self.prio is not None or self.prof.xmit_wait is None:
            return None
        return self.ports.get((test.receiver, test.rail))

    def switches(self, test: TrafficTest) -> tuple[str, tuple[int, ...]] | None:
        """Who reads which switches' XmitWait around the test: an incast's receiver its leaf
        (`watch`); a bisection's first sender the leaves of its nodes and their uplinks'
        spines (which uplink the slow flows share). None: not read (RoCE, no discovery)."""
        w = self.watch(test)
        if w is not None:
            return test.receiver, (w[0],)
        if test.kind != "bisection" or self.prio is not None or self.prof.xmit_wait is None:
            return None
        on = self.localizer.leaf_on(test.rail)
        cables = [c for lf in sorted({on.get(n, "") for n in test.nodes()})
                  for c in self.cables.get(lf, ())]  # fmt: skip
        if not cables:
            return None
        lids = sorted({c[0] for c in cables} | {c[3] for c in cables})
        return test.pairs[0][0], tuple(lids)

    def cables_on(self, rail: int) -> dict[str, tuple[Cable, ...]]:
        """leaf -> its uplink cables, for the leaves of the rail (the discovered switches)."""
        leaves = set(self.localizer.leaf_on(rail).values())
        return {lf: c for lf, c in self.cables.items() if lf in leaves}

    async def execute(self, test: TrafficTest, spawn: Spawner) -> Execution:
        addr = {n: self.addresses[n][test.rail] for n in test.nodes()}
        path = self.paths[test.rail]
        runner = Runner(test, path, self.prof, addr, spawn, self.switches(test))
        run, timings = await runner.run()
        self.timings[test] = timings
        return run

    def sanity(self, test: TrafficTest, run: Execution) -> Sanity:
        path = self.paths[test.rail]
        m = measure(
            test, run, self.timings.get(test, []), self.prof.duration_s, path.rail.device,
            self.prio, float(self.prof.overlap.value), self.watch(test), self.prof.xmit_wait,
        )  # fmt: skip
        self.measured[test] = m
        key = self.key_of(test)
        if test.kind == "incast":
            self.judged[test] = judge_incast(
                test, m, self.prof, self.localizer.leaf_on(test.rail), self.prio, key,
                self.name_switch,
            )  # fmt: skip
        else:
            j = judge_bisection(
                test, m, self.prof, self.localizer.leaf_on(test.rail), key, self.name_switch,
                self.cables_on(test.rail),
            )  # fmt: skip
            self.judged[test] = j
            if j.suspects:
                self.localizer.leaf_suspects.append((test.rail, j.suspects))
        if m.error is not None:
            return Sanity(None, m.error)
        return Sanity(round(sum(m.flows.values()), 2))

    def passes(self, test: TrafficTest, value: float | None) -> bool:
        j = self.judged.get(test)
        return j is not None and not j.infra and all(f.status == "pass" for f in j.findings)

    def _outcomes(self) -> dict[str, Outcome[TrafficTest]]:
        return {self.key_of(o.test): o for o in self.localizer.outcomes}

    def localization_doc(self) -> dict[str, Any]:
        return {
            "tests": {
                self.key_of(t): {
                    "flows": dict(m.flows), "alone": m.alone, "overlap": m.overlap,
                    "error": m.error, "xmit_wait": m.xmit_wait,
                    "counters": {n: dict(g) for n, g in m.growth.items()},
                }
                for t, m in self.measured.items()
            },
            "infrastructure": [
                {"component": i.component, "observed": i.observed, "message": i.message}
                for i in self._infra()
            ],
        }  # fmt: skip

    def _infra(self) -> list[Infra]:
        """One item per fault of a part (its component and what to do about it: a switch
        that neither marks ECN nor pauses is two), listing every place it showed; the first
        test's message says it (a re-test of the same cable measures other numbers)."""
        seen: dict[tuple[str, str], tuple[Infra, list[str]]] = {}
        for j in self.judged.values():
            for i in j.infra:
                first, ats = seen.setdefault((i.component, i.remediation), (i, []))
                ats += [a for a in i.at.split(", ") if a not in ats]
        return sorted(
            (replace(i, at=", ".join(ats), observed=i.observed.format(at=", ".join(ats)))
             for i, ats in seen.values()),
            key=lambda i: (i.component, i.message),
        )  # fmt: skip

    def verdicts(self, evidence: EvidenceRefs[TrafficTest]) -> list[Verdict]:
        outcomes = self._outcomes()

        def refs(key: str, node: str) -> tuple[str, ...]:
            o = outcomes.get(key)
            if o is None:
                return ()
            n = node if node in o.test.nodes() else o.test.nodes()[0]
            return evidence.refs(o, n)

        found: dict[tuple[str, str, int], list[Finding]] = {}
        lost: dict[str, str] = {}
        for o in self.localizer.outcomes:
            for n, why in o.lost:
                lost.setdefault(n, why)
            j = self.judged.get(o.test)
            if j is None:  # a node of the test was lost: its error, nobody else's
                continue
            for f in j.findings:
                fs = found.setdefault((f.area, f.node, f.rail), [])
                # a rail's own incast (it received) first: its pass verdict says that one
                fs.insert(0, f) if f.node == o.test.receiver else fs.append(f)
        infra = self._infra()
        confirmed = {(i.rail, i.leaf) for i in infra if i.uplink}
        for t, j in self.judged.items():
            if j.suspects and any((t.rail, x) in confirmed for x in j.suspects):
                names = " or ".join(x for x in j.suspects if (t.rail, x) in confirmed)
                for f in j.findings:
                    k = (f.area, f.node, f.rail)
                    found[k] = [
                        replace(g, status="pass", message=f"{g.message}: explained by {names}'s "
                                "uplinks (re-tested)") if g is f and g.status == "fail" else g
                        for g in found.get(k, [])
                    ]  # fmt: skip
        out: list[Verdict] = []
        roce = self.prio is not None
        for n in self.nodes:
            for r in sorted(self.paths):
                dev = self.paths[r].rail.device
                for area in BY_AREA:
                    fs = found.get((area, n, r), [])
                    if n in lost and not any(f.status == "fail" for f in fs):
                        out.append(_lost(area, n, r, dev, lost[n]))
                        continue
                    out.append(area_verdict(area, n, r, dev, fs, refs, roce))
            lf = self.leaf.get(n, "")

            def leaf_on(rail: int, n: str = n) -> str:
                return self.localizer.leaf_on(rail).get(n, "")

            out += fabric_verdicts(n, leaf_on, infra, refs, f"{lf} (leaf)")
        return out


def _lost(area: Any, node: str, rail: int, device: str, why: str) -> Verdict:
    from nodegate.core.values import Status
    from nodegate.stages.traffic.checks import rail_component

    return Verdict(
        BY_AREA[area].id,
        node,
        Status.ERROR,
        rail_component(device, rail),
        None,
        "tested",
        message=why,
        remediation="check the node's SSH access (stage reach), then qualify it again",
    )
