"""One ib_pairs campaign: the nodes of one profile, every rail, pairs planned and localized."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from nodegate.core.values import Verdict
from nodegate.framework.active.addresses import PeerAddress, peer_address
from nodegate.framework.active.campaign import Campaign, EvidenceRefs, Execution, Spawner
from nodegate.framework.active.rounds import Sanity
from nodegate.inventory import Node
from nodegate.stages.ib_pairs.checks import rail_verdict
from nodegate.stages.ib_pairs.perftest import pair_sanity, run_pair
from nodegate.stages.ib_pairs.plan import PairLocalizer, PairTest, rounds_used, suspect_paths
from nodegate.stages.ib_pairs.profile import IbPairsProfile, Rail
from nodegate.transport.base import Transport

ALL_RAILS = "all rails"  # a node's rails as one resource (rails_concurrent: false)


class PairCampaign(Campaign[PairTest]):
    """Units: (node, rail). Tests: one ib_write_bw server/client pair on one rail."""

    def __init__(
        self,
        name: str,
        prof: IbPairsProfile,
        rails: Sequence[Rail],
        members: Sequence[Node],
        transport: Transport,
        leaves: Mapping[str, str] | None = None,
        rail_leaf: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        self.name = name
        self.prof = prof
        self.rails = {r.rail: r for r in rails}
        self.nodes = tuple(n.name for n in members)
        # A pair's path (same leaf or across the spines): the fabric this run discovered
        # where it did (`leaves`), else the inventory's `leaf` label.
        known = leaves or {}
        leaf = {n.name: known.get(n.name) or n.labels.get("leaf", "") for n in members}
        self.localizer: PairLocalizer = PairLocalizer(
            self.nodes,
            leaf,
            sorted(self.rails),
            same_leaf=prof.pairing == "same_leaf",
            seed=prof.seed,
            rail_leaf=rail_leaf,
        )
        self.performance = prof.floor
        # Where each node's server is reached, per rail: the data plane, not SSH's address.
        self.addresses: dict[str, dict[int, PeerAddress]] = {
            n.name: {r: peer_address(n, r, transport) for r in sorted(self.rails)} for n in members
        }
        self._node_address = {n.name: peer_address(n, None, transport) for n in members}

    def plan_header(self) -> dict[str, Any]:
        """The method, and where each node's servers were reached (and which inventory key
        said so): the node's address, plus `rails` where a rail has its own."""
        where: dict[str, dict[str, Any]] = {}
        for n, by_rail in self.addresses.items():
            node_wide = self._node_address[n]
            doc: dict[str, Any] = node_wide.doc()
            own = {str(r): a.doc() for r, a in by_rail.items() if a != node_wide}
            where[n] = {**doc, "rails": own} if own else doc
        return {"method": self.prof.describe(), "server_addresses": where}

    def doc_of(self, test: PairTest) -> dict[str, Any]:
        return {"rail": test.rail, "server": test.server, "client": test.client}

    def nodes_of(self, test: PairTest) -> tuple[str, ...]:
        return test.nodes()

    def key_of(self, test: PairTest) -> str:
        return f"rail{test.rail}-{test.server}-to-{test.client}"

    def resources(self, test: PairTest) -> frozenset[Hashable]:
        # Each node runs one test per rail at a time; a profile whose rails may not share a
        # node at once makes each node's rails one resource.
        if self.prof.rails_concurrent:
            return frozenset({(test.server, test.rail), (test.client, test.rail)})
        return frozenset({(test.server, ALL_RAILS), (test.client, ALL_RAILS)})

    def channels(self, test: PairTest) -> int:
        return 2  # the server's process and the client's

    async def execute(self, test: PairTest, spawn: Spawner) -> Execution:
        addr = self.addresses[test.server][test.rail].address
        return await run_pair(test, self.rails[test.rail], self.prof, addr, spawn)

    def sanity(self, test: PairTest, run: Execution) -> Sanity:
        return pair_sanity(test, run)

    def localization_doc(self) -> dict[str, Any]:
        loc = self.localizer.loc
        return {
            "rounds_used": rounds_used(loc.results),
            "suspect_paths": [{"leaves": [a, b], "rail": r} for a, b, r in suspect_paths(loc)],
            "lost": dict(sorted(loc.down.items())),
            "status": {
                n: {str(r): loc.status(n, r) for r in sorted(self.rails)} for n in self.nodes
            },
        }

    def verdicts(self, evidence: EvidenceRefs[PairTest]) -> list[Verdict]:
        loc = self.localizer.loc
        paths = suspect_paths(loc)
        return [
            rail_verdict(n, self.rails[r], loc, self.prof, paths, evidence.refs)
            for n in self.nodes
            for r in sorted(self.rails)
        ]
