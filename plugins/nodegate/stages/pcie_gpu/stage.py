"""Stage `pcie_gpu`: GPU count and model, driver, PCIe links (GPU and switch ports), ECC, row
remapping, retired pages, Xid events, NVLink, fabric manager, clock event reasons, persistence
mode and DCGM diag, each judged per GPU against the profile's `pcie_gpu` section.
"""

from __future__ import annotations

from nodegate.core.values import CommandSpec, NodeOutcome
from nodegate.framework.stage import PassiveStage
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.pcie_gpu.checks import CHECKS
from nodegate.stages.pcie_gpu.commands import (
    CMD_TIMEOUT_S,
    DCGM,
    FABRICMANAGER,
    KERNEL_LOG,
    LSPCI,
    NVLINK,
    NVSMI,
)
from nodegate.stages.pcie_gpu.facts import STAGE_NAME, PcieGpuFacts, build_facts
from nodegate.stages.pcie_gpu.profile import PcieGpuProfile, pcie_gpu_profile


class PcieGpuStage(PassiveStage[PcieGpuFacts, PcieGpuProfile]):
    name = STAGE_NAME
    checks = CHECKS

    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]:
        p = self.profile_of(profile)
        t = CMD_TIMEOUT_S
        since = f"-{p.xid.window_hours}h"
        klog = ("-o", "short-iso", "--no-pager")
        cmds = [
            CommandSpec(NVSMI, ("nvidia-smi", "-q"), t),
            CommandSpec(LSPCI, ("lspci", "-vvv"), t),
            CommandSpec(NVLINK, ("nvidia-smi", "nvlink", "-s"), t),
            CommandSpec(KERNEL_LOG, ("journalctl", "-k", "--since", since, *klog), t),
        ]
        if p.fabric_manager:
            fm = ("systemctl", "status", "nvidia-fabricmanager", "--no-pager")
            cmds.append(CommandSpec(FABRICMANAGER, fm, t))
        dcgm = ("dcgmi", "diag", "-r", str(p.dcgm.level), "-j")
        cmds.append(CommandSpec(DCGM, dcgm, p.dcgm.timeout_s))
        return cmds

    def profile_of(self, profile: Profile) -> PcieGpuProfile:
        return pcie_gpu_profile(profile)

    def facts(self, outcome: NodeOutcome, profile: PcieGpuProfile) -> PcieGpuFacts:
        return build_facts(outcome, profile)


STAGE = PcieGpuStage()
