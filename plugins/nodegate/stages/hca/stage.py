"""Stage `hca`: HCA count/model/PSID per role, firmware (rule and fleet uniformity), rail port
state/width/speed/rate/link layer, PCIe of each HCA, error counter deltas over a window,
GPUDirect RDMA, rail <-> GPU affinity.

One round trip per node: the script reads /sys/class/infiniband (with each device's PCI
attributes), sleeps the profile's counter window, reads the ports and counters again, then
reads `nvidia-smi topo -m`, the nvidia_peermem module state, the NVIDIA driver, the kernel and
`mlxlink` of each rail HCA (BER, module flags).
"""

from __future__ import annotations

from dataclasses import replace

from nodegate.core.values import CommandSpec, NodeOutcome
from nodegate.framework.stage import PassiveStage
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.hca.checks import CHECKS
from nodegate.stages.hca.commands import (
    CMD_TIMEOUT_S,
    DRIVER,
    KERNEL,
    MLXLINK_TIMEOUT_S,
    PEERMEM,
    SLEEP,
    SYSFS,
    SYSFS_AGAIN,
    SYSFS_AGAIN_COMMAND,
    SYSFS_COMMAND,
    TOPO,
    mlxlink_argv,
    mlxlink_id,
)
from nodegate.stages.hca.facts import HcaFacts, build_facts
from nodegate.stages.hca.profile import HcaProfile, hca_profile


class HcaStage(PassiveStage[HcaFacts, HcaProfile]):
    name = "hca"
    checks = CHECKS

    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]:
        t = CMD_TIMEOUT_S
        prof = self.profile_of(profile)
        window = prof.counters.window_s
        return [
            CommandSpec(SYSFS, SYSFS_COMMAND, t),
            CommandSpec(SLEEP, ("sleep", f"{window:g}"), window + t),
            CommandSpec(SYSFS_AGAIN, SYSFS_AGAIN_COMMAND, t),
            CommandSpec(TOPO, ("nvidia-smi", "topo", "-m"), t),
            CommandSpec(PEERMEM, ("cat", "/sys/module/nvidia_peermem/initstate"), t),
            CommandSpec(DRIVER, ("cat", "/proc/driver/nvidia/version"), t),
            CommandSpec(KERNEL, ("uname", "-r"), t),
        ] + [
            CommandSpec(mlxlink_id(r.device), mlxlink_argv(r.device), MLXLINK_TIMEOUT_S)
            for r in prof.rails
            if prof.link_health is not None
        ]

    def profile_of(self, profile: Profile) -> HcaProfile:
        return hca_profile(profile)

    def facts(self, outcome: NodeOutcome, profile: HcaProfile) -> HcaFacts:
        return build_facts(outcome)

    def fleet_facts(self, facts: HcaFacts) -> HcaFacts:
        """What hca.firmware.uniform reads (the sysfs listing, the PCI ids that place a
        device, the reasons and evidence): not the second listing, the topology nor the
        mlxlink reports (~2/3 of a node's facts)."""
        return replace(facts, sysfs_again=None, topo=None, mlxlink={})


STAGE = HcaStage()
