"""One gpu_load campaign: the nodes of one profile, each loaded on its own, all at once.

Unit and test: the node. One round; no localization (nothing is shared between nodes: a GPU's
numbers are its node's). Sanity reads each node's sides into facts (`reading`); the verdicts
are the check table's on those facts. A node that could not run its side is every check
ERROR with the reason, and judges no other node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from nodegate.core.thresholds import Threshold
from nodegate.core.values import Verdict
from nodegate.framework.active.campaign import Campaign, EvidenceRefs, Execution, Spawner
from nodegate.framework.active.rounds import Outcome, Round, RoundId, Sanity
from nodegate.stages.gpu_load.checks import CHECKS, CLEANUP
from nodegate.stages.gpu_load.profile import GpuLoadProfile
from nodegate.stages.gpu_load.reading import read_load
from nodegate.stages.gpu_load.run import run_load

SPAWNS = 5  # topology, sampler, nvbandwidth, dcgmi, journalctl (the sampler spans the rest)
LOST_HINT = "check the node's SSH access (stage reach), then qualify it again"
ALL_SIDES = Threshold("equal", 0)  # sanity's value: the node's parts that could not be read


@dataclass(frozen=True, slots=True, order=True)
class LoadTest:
    node: str


class LoadLocalizer:
    """One round of every node; it learns nothing further (pure)."""

    def __init__(self, nodes: Sequence[str]) -> None:
        self.nodes = tuple(nodes)
        self.outcomes: dict[str, Outcome[LoadTest]] = {}

    def first_rounds(self) -> Sequence[Round[LoadTest]]:
        return [Round(RoundId(1), tuple(LoadTest(n) for n in self.nodes))] if self.nodes else []

    def add(self, outcome: Outcome[LoadTest]) -> None:
        self.outcomes[outcome.test.node] = outcome

    def next_round(self) -> Round[LoadTest] | None:
        return None


class LoadCampaign(Campaign[LoadTest]):
    def __init__(self, name: str, prof: GpuLoadProfile, nodes: Sequence[str]) -> None:
        self.name = name
        self.prof = prof
        self.nodes = tuple(nodes)
        self.localizer: LoadLocalizer = LoadLocalizer(self.nodes)
        self.performance = ALL_SIDES
        self._runs: dict[str, Execution] = {}

    def plan_header(self) -> dict[str, Any]:
        return {"method": self.prof.describe()}

    def doc_of(self, test: LoadTest) -> dict[str, Any]:
        return {"node": test.node}

    def nodes_of(self, test: LoadTest) -> tuple[str, ...]:
        return (test.node,)

    def key_of(self, test: LoadTest) -> str:
        return test.node

    def channels(self, test: LoadTest) -> int:
        return SPAWNS

    async def execute(self, test: LoadTest, spawn: Spawner) -> Execution:
        return await run_load(test.node, self.prof, spawn)

    def sanity(self, test: LoadTest, run: Execution) -> Sanity:
        """How many of the node's parts could not be read (the checks say which and why)."""
        self._runs[test.node] = run
        facts = read_load(test.node, run, self.prof, {})
        return Sanity(float(len(facts.errors)), run.error)

    def verdicts(self, evidence: EvidenceRefs[LoadTest]) -> list[Verdict]:
        out: list[Verdict] = []
        for n in self.nodes:
            o = self.localizer.outcomes.get(n)
            if o is None:
                out += _unjudged(n, "not tested (the round did not run it)", (), None)
                continue
            refs = {r.rsplit(".", 1)[-1]: r for r in evidence.refs(o, n)}
            lost = o.lost_why(n)
            if lost is not None:
                out += _unjudged(n, lost, tuple(refs.values()), LOST_HINT)
                continue
            facts = read_load(n, self._runs[n], self.prof, refs)
            out += CHECKS.judge_node(n, facts, self.prof)
        return out


def _unjudged(node: str, why: str, ev: tuple[str, ...], hint: str | None) -> list[Verdict]:
    """Every check of the node ERROR (the skeleton judges the cleanup check itself)."""
    return [
        replace(v, remediation=hint, evidence=ev)
        for v in CHECKS.all_error(node, "node", why)
        if v.check != CLEANUP.id
    ]
