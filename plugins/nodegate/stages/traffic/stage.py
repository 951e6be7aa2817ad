"""Stage `traffic`: the fabric under load — incast k->1 with a victim flow, bisection across
the spine — per rail, with the real `ib_write_bw -D`; bandwidth, fairness, the victim and (on
RoCE) the congestion counters as criteria; the part to blame named: a node's rail, or a switch
or its uplinks (an infrastructure finding that rejects no node).

Only nodes that passed every earlier stage take part. Rails come from `hca.rails` (narrowed by
`traffic.rails`), the RoCE netdevs, GID index and traffic class from `roce`; leaves from the
fabric stage's discovered cabling when it ran this run (`stages.fabric.discovered`: each rail's
switch by name), else from the nodes' `leaf` labels. On InfiniBand with `traffic.xmit_wait`,
the switch port (LID, port) the fabric stage found facing each incast's receiver: its
PortXmitWait read with perfquery before and after.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from nodegate.core.values import Verdict
from nodegate.framework.active.campaign import Campaign
from nodegate.framework.active.skeleton import ActiveStage
from nodegate.framework.stage import StageContext
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.fabric.discovered import (
    discovered_cabling,
    discovered_ports,
    discovered_uplink_ends,
    node_leaf,
)
from nodegate.stages.ib_pairs.profile import Rail, profile_rails
from nodegate.stages.roce.profile import has_roce, roce_profile
from nodegate.stages.traffic.campaign import TrafficCampaign
from nodegate.stages.traffic.checks import CHECKS, CLEANUP
from nodegate.stages.traffic.plan import TrafficTest
from nodegate.stages.traffic.profile import traffic_profile
from nodegate.stages.traffic.run import RailPath

MIN_NODES = 4  # a receiver, a victim receiver and two senders


class TrafficStage(ActiveStage[TrafficTest]):
    name = "traffic"
    checks = CHECKS
    tool = "ib_write_bw"
    cleanup_check = CLEANUP.id
    not_applicable = "load qualification"  # `traffic: null`: every check PASS, said so

    def unfit(self, profile: Profile) -> str | None:
        return None if profile_rails(profile) else "no 'hca.rails' (the rails traffic loads)"

    def campaign_for(
        self, name: str, profile: Profile, nodes: list[Node], ctx: StageContext
    ) -> Campaign[TrafficTest] | list[Verdict]:
        if len(nodes) < MIN_NODES:
            why = f"{len(nodes)} node(s) of profile {name}: an incast needs {MIN_NODES}"
            return [v for n in nodes for v in self.unjudged(n.name, why)]
        prof = traffic_profile(profile)
        rails = [r for r in profile_rails(profile) if prof.rails is None or r.rail in prof.rails]
        netdev: dict[int, str] = {}
        extra: tuple[str, ...] = ()
        prio = None
        if has_roce(profile):
            rp = roce_profile(profile)
            netdev = {r.rail: r.netdev for r in rp.rails}
            t = rp.transport
            extra = ("-x", str(t.gid_index), "--tclass", str(t.traffic_class))
            prio = rp.qos.roce_priority if prof.counters is not None else None
        paths = [
            RailPath(r, netdev.get(r.rail) if prio is not None else None, extra) for r in rails
        ]
        # The leaves the fabric stage discovered, when it ran (as ib_pairs); else the labels.
        cabling = discovered_cabling(ctx.run_dir)
        devices = [r.device for r in rails]
        leaf = {
            n.name: node_leaf(cabling, n.name, devices) or n.labels.get("leaf", "") for n in nodes
        }
        on_rail = by_rail(cabling, nodes, rails)
        ports = by_rail(discovered_ports(ctx.run_dir) if cabling else {}, nodes, rails)
        cables = discovered_uplink_ends(ctx.run_dir) if cabling else {}
        return TrafficCampaign(
            name, prof, paths, nodes, ctx.transport, leaf, prio, on_rail, ports, cables
        )


T = TypeVar("T")


def by_rail(
    found: Mapping[str, Mapping[str, T]], nodes: list[Node], rails: list[Rail]
) -> dict[tuple[str, int], T]:
    """node -> device -> what the fabric stage found, as (node, rail) -> it, for the rails
    tested."""
    return {
        (n.name, r.rail): found[n.name][r.device]
        for n in nodes
        for r in rails
        if r.device in found.get(n.name, {})
    }


STAGE = TrafficStage()
