"""Stage `gpu_load`: GPUs under load, node-local, every node at once (bounded by
--max-active, four channels a node), after pcie_gpu: only nodes that passed every earlier
stage take part. What runs is the profile's `gpu_load.run` (a level overlays it): nvbandwidth
testcases, DCGM stress at level 3 or 4, with telemetry sampled throughout. The plan is written
to <run>/gpu_load/plan-<profile>.json before the round runs.
"""

from __future__ import annotations

from nodegate.core.values import Verdict
from nodegate.framework.active.campaign import Campaign
from nodegate.framework.active.skeleton import ActiveStage
from nodegate.framework.stage import StageContext
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.gpu_load.campaign import LoadCampaign, LoadTest
from nodegate.stages.gpu_load.checks import CHECKS, CLEANUP
from nodegate.stages.gpu_load.profile import gpu_load_profile


class GpuLoadStage(ActiveStage[LoadTest]):
    name = "gpu_load"
    checks = CHECKS
    tool = "GPU load"
    cleanup_check = CLEANUP.id

    def campaign_for(
        self, name: str, profile: Profile, nodes: list[Node], ctx: StageContext
    ) -> Campaign[LoadTest] | list[Verdict]:
        return LoadCampaign(name, gpu_load_profile(profile), [n.name for n in nodes])


STAGE = GpuLoadStage()
