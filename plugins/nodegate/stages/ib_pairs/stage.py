"""Stage `ib_pairs`: ib_write_bw per rail between planned node pairs, then localization.

Only nodes that passed every earlier stage take part (the engine's rule for active stages).
Rails come from the profile's `hca.rails`; method, floor, ports and deadlines from `ib_pairs`;
on a RoCE profile, the GID index and traffic class from `roce` (roce_transport).
The nodes of one profile form one campaign of the active skeleton (`nodegate.framework.active`): the
plan is written to <run>/ib_pairs/plan-<profile>.json before each round runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from nodegate.core.values import Verdict
from nodegate.framework.active.campaign import Campaign
from nodegate.framework.active.skeleton import ActiveStage
from nodegate.framework.stage import StageContext
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.ib_pairs.campaign import PairCampaign
from nodegate.stages.ib_pairs.checks import CHECKS, CLEANUP, unjudged
from nodegate.stages.ib_pairs.plan import PairTest
from nodegate.stages.ib_pairs.profile import (
    SECTION,
    IbPairsProfile,
    ib_pairs_profile,
    profile_rails,
)
from nodegate.stages.roce.profile import roce_transport


class IbPairsStage(ActiveStage[PairTest]):
    name = "ib_pairs"
    checks = CHECKS
    tool = "ib_write_bw"
    cleanup_check = CLEANUP.id

    def plan(self, ctx: StageContext) -> tuple[list[Campaign[PairTest]], list[Verdict]]:
        verdicts: list[Verdict] = []
        groups: dict[str, list[Node]] = {}
        for n in ctx.nodes:
            prof = ctx.profiles[n.name]
            why = _missing(prof)
            if why:
                verdicts += unjudged(n.name, f"profile {prof.name}: {why}")
                continue
            groups.setdefault(prof.name, []).append(n)
        campaigns: list[Campaign[PairTest]] = []
        for name, members in groups.items():
            if len(members) < 2:
                verdicts += unjudged(
                    members[0].name, f"no partner node of profile {name} to test with"
                )
                continue
            prof = ctx.profiles[members[0].name]
            campaigns.append(
                PairCampaign(
                    name, with_roce(ib_pairs_profile(prof), prof), profile_rails(prof), members,
                    ctx.transport,
                )
            )  # fmt: skip
        return campaigns, verdicts


def with_roce(ibp: IbPairsProfile, prof: Profile) -> IbPairsProfile:
    """On a RoCE profile both sides run with the profile's GID index and traffic class
    (`-x <roce.gid_index> --tclass <roce.traffic_class>`), the QoS path NCCL takes."""
    t = roce_transport(prof)
    if t is None:
        return ibp
    args = ("-x", str(t.gid_index), "--tclass", str(t.traffic_class))
    return replace(ibp, method=replace(ibp.method, extra_args=(*ibp.method.extra_args, *args)))


def _missing(prof: Profile) -> str | None:
    if not isinstance(prof.data.get(SECTION), Mapping):
        return f"no {SECTION!r} section"
    if not profile_rails(prof):
        return "no 'hca.rails' (the rails ib_pairs tests)"
    return None


STAGE = IbPairsStage()
