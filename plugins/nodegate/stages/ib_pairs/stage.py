"""Stage `ib_pairs`: ib_write_bw per rail between planned node pairs, then localization.

Only nodes that passed every earlier stage take part (the engine's rule for active stages).
Rails come from the profile's `hca.rails`; method, floor, ports and deadlines from `ib_pairs`;
on a RoCE profile, the GID index and traffic class from `roce` (roce_transport).
The nodes of one profile form one campaign of the active skeleton (`nodegate.framework.active`): the
plan is written to <run>/ib_pairs/plan-<profile>.json before each round runs.
"""

from __future__ import annotations

from dataclasses import replace

from nodegate.core.values import Verdict
from nodegate.framework.active.campaign import Campaign
from nodegate.framework.active.skeleton import ActiveStage
from nodegate.framework.stage import StageContext
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.fabric.discovered import discovered_cabling, node_leaf
from nodegate.stages.ib_pairs.campaign import PairCampaign
from nodegate.stages.ib_pairs.checks import CHECKS, CLEANUP
from nodegate.stages.ib_pairs.plan import PairTest
from nodegate.stages.ib_pairs.profile import IbPairsProfile, ib_pairs_profile, profile_rails
from nodegate.stages.roce.profile import roce_transport


class IbPairsStage(ActiveStage[PairTest]):
    name = "ib_pairs"
    checks = CHECKS
    tool = "ib_write_bw"
    cleanup_check = CLEANUP.id

    def unfit(self, profile: Profile) -> str | None:
        return None if profile_rails(profile) else "no 'hca.rails' (the rails ib_pairs tests)"

    def campaign_for(
        self, name: str, profile: Profile, nodes: list[Node], ctx: StageContext
    ) -> Campaign[PairTest] | list[Verdict]:
        if len(nodes) < 2:
            return self.unjudged(nodes[0].name, f"no partner node of profile {name} to test with")
        ibp = with_roce(ib_pairs_profile(profile), profile)
        rails = profile_rails(profile)
        cabling = discovered_cabling(ctx.run_dir)
        devices = [r.device for r in rails]
        leaves = {n.name: leaf for n in nodes if (leaf := node_leaf(cabling, n.name, devices))}
        on_rail = {
            (n.name, r.rail): cabling[n.name][r.device]
            for n in nodes
            for r in rails
            if r.device in cabling.get(n.name, {})
        }
        return PairCampaign(name, ibp, rails, nodes, ctx.transport, leaves, on_rail)


def with_roce(ibp: IbPairsProfile, prof: Profile) -> IbPairsProfile:
    """On a RoCE profile both sides run with the profile's GID index and traffic class
    (`-x <roce.gid_index> --tclass <roce.traffic_class>`), the QoS path NCCL takes."""
    t = roce_transport(prof)
    if t is None:
        return ibp
    args = ("-x", str(t.gid_index), "--tclass", str(t.traffic_class))
    return replace(ibp, method=replace(ibp.method, extra_args=(*ibp.method.extra_args, *args)))


STAGE = IbPairsStage()
