"""Stage `nccl`: all_reduce_perf on each node alone, then over the whole set, then bad-node
localization, through real `mpirun` or `srun`, on the active-stage skeleton.

Only nodes that passed every earlier stage take part (the engine's rule for active stages).
The nodes of one profile form one campaign (`nodegate.framework.active`): the plan is written to
<run>/nccl/plan-<profile>.json before each round runs, the conclusion to
<run>/nccl/localization-<profile>.json.
"""

from __future__ import annotations

from collections.abc import Mapping

from nodegate.core.values import Verdict
from nodegate.framework.active.campaign import Campaign
from nodegate.framework.active.skeleton import ActiveStage
from nodegate.framework.stage import StageContext
from nodegate.inventory import Node
from nodegate.stages.nccl.campaign import NcclCampaign
from nodegate.stages.nccl.checks import CHECKS, CLEANUP, unjudged
from nodegate.stages.nccl.plan import NcclJob
from nodegate.stages.nccl.profile import SECTION, nccl_profile, roce_settings


class NcclStage(ActiveStage[NcclJob]):
    name = "nccl"
    checks = CHECKS
    tool = "all_reduce_perf"
    cleanup_check = CLEANUP.id

    def plan(self, ctx: StageContext) -> tuple[list[Campaign[NcclJob]], list[Verdict]]:
        verdicts: list[Verdict] = []
        groups: dict[str, list[Node]] = {}
        for n in ctx.nodes:
            prof = ctx.profiles[n.name]
            if not isinstance(prof.data.get(SECTION), Mapping):
                verdicts += unjudged(n.name, f"profile {prof.name}: no {SECTION!r} section")
                continue
            groups.setdefault(prof.name, []).append(n)
        campaigns: list[Campaign[NcclJob]] = []
        for name, members in groups.items():
            prof = ctx.profiles[members[0].name]
            campaigns.append(
                NcclCampaign(name, nccl_profile(prof), members, ctx.transport, roce_settings(prof))
            )
        return campaigns, verdicts


STAGE = NcclStage()
