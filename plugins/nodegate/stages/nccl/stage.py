"""Stage `nccl`: all_reduce_perf on each node alone, then over the whole set, then bad-node
localization, through real `mpirun` or `srun`, on the active-stage skeleton.

Only nodes that passed every earlier stage take part (the engine's rule for active stages).
The nodes of one profile form one campaign (`nodegate.framework.active`): the plan is written to
<run>/nccl/plan-<profile>.json before each round runs, the conclusion to
<run>/nccl/localization-<profile>.json.
"""

from __future__ import annotations

from nodegate.core.values import Verdict
from nodegate.framework.active.campaign import Campaign
from nodegate.framework.active.skeleton import ActiveStage
from nodegate.framework.stage import StageContext
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.fabric.discovered import discovered_cabling, discovered_uplinks
from nodegate.stages.nccl.campaign import NcclCampaign
from nodegate.stages.nccl.checks import CHECKS, CLEANUP
from nodegate.stages.nccl.plan import NcclJob
from nodegate.stages.nccl.profile import nccl_profile, roce_settings


class NcclStage(ActiveStage[NcclJob]):
    name = "nccl"
    checks = CHECKS
    tool = "all_reduce_perf"
    cleanup_check = CLEANUP.id

    def campaign_for(
        self, name: str, profile: Profile, nodes: list[Node], ctx: StageContext
    ) -> Campaign[NcclJob] | list[Verdict]:
        prof, roce = nccl_profile(profile), roce_settings(profile)
        run = ctx.run_dir
        return NcclCampaign(name, prof, nodes, ctx.transport, roce, discovered_cabling(run),
                            discovered_uplinks(run))  # fmt: skip


STAGE = NcclStage()
