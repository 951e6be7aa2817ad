"""Stage `pcie_gpu`: GPU count and model, driver, PCIe links (GPU and switch ports), ECC, row
remapping, retired pages, Xid events, NVLink, fabric manager, clock event reasons, persistence
mode and DCGM diag, each judged per GPU against the profile's `pcie_gpu` section.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nodegate.inventory import Node
from nodegate.model import CommandSpec, NodeOutcome, Reach, Verdict
from nodegate.profiles import Profile
from nodegate.stages import gpu_checks as gc
from nodegate.stages import gpu_fabric as gf
from nodegate.stages import gpu_health as gh
from nodegate.stages.base import (
    CheckSpec,
    OutcomeReader,
    PassiveStage,
    StageContext,
    unreachable_verdicts,
)
from nodegate.stages.pcie_gpu_facts import GpuNode, gather

CMD_TIMEOUT_S = 60.0

Check = Callable[[GpuNode], list[Verdict]]

# check id -> how it is judged (pure: GpuNode -> verdicts); order = report order.
JUDGES: dict[str, Check] = {
    "gpu.count": gc.check_count,
    "gpu.model": gc.check_model,
    "gpu.driver": gc.check_driver,
    "pcie.gpu.gen": lambda n: gc.check_link(n, "gen"),
    "pcie.gpu.width": lambda n: gc.check_link(n, "width"),
    "pcie.switch.link": gc.check_switch,
    "gpu.ecc.mode": gh.check_ecc_mode,
    "gpu.ecc.uncorrectable": gh.check_ecc_uncorrectable,
    "gpu.remap": gh.check_remap,
    "gpu.retired_pages": gh.check_retired_pages,
    "gpu.xid": gh.check_xid,
    "gpu.nvlink": gf.check_nvlink,
    "gpu.fabric": gf.check_fabric,
    "gpu.clocks": gh.check_clocks,
    "gpu.persistence": gh.check_persistence,
    "gpu.dcgm": gf.check_dcgm,
}


class PcieGpuStage(PassiveStage[Any, Any]):
    name = "pcie_gpu"
    checks = (
        CheckSpec("gpu.count", "test_gpu_count", "GPU count (nvidia-smi, lspci)"),
        CheckSpec("gpu.model", "test_gpu_model", "GPU PCI device id vs profile"),
        CheckSpec("gpu.driver", "test_gpu_driver", "driver nvidia-smi runs on vs profile"),
        CheckSpec("pcie.gpu.gen", "test_pcie_gpu_gen", "GPU PCIe generation vs profile"),
        CheckSpec("pcie.gpu.width", "test_pcie_gpu_width", "GPU PCIe width vs profile"),
        CheckSpec("pcie.switch.link", "test_pcie_switch_link", "ports above each GPU"),
        CheckSpec("gpu.ecc.mode", "test_gpu_ecc_mode", "ECC mode vs profile"),
        CheckSpec("gpu.ecc.uncorrectable", "test_gpu_ecc_uncorrectable", "volatile DBE count"),
        CheckSpec("gpu.remap", "test_gpu_row_remap", "no row remap pending or failed"),
        CheckSpec("gpu.retired_pages", "test_gpu_retired_pages", "retired pages (pre-Ampere)"),
        CheckSpec("gpu.xid", "test_gpu_xid", "Xid events in the window, per Xid table"),
        CheckSpec("gpu.nvlink", "test_gpu_nvlink", "NVLink count, speed, all active"),
        CheckSpec("gpu.fabric", "test_gpu_fabric", "fabric manager and GPU fabric state"),
        CheckSpec("gpu.clocks", "test_gpu_clocks", "no HW slowdown/thermal/power brake"),
        CheckSpec("gpu.persistence", "test_gpu_persistence", "persistence mode vs profile"),
        CheckSpec("gpu.dcgm", "test_gpu_dcgm", "DCGM diag at the profile's level"),
    )

    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]:
        sec = profile.section(self.name)
        t = CMD_TIMEOUT_S
        hours = int(sec["xid"]["window_hours"])
        cmds = [
            CommandSpec("nvsmi", "nvidia-smi -q", t),
            CommandSpec("lspci", "lspci -vvv", t),
            CommandSpec("nvlink", "nvidia-smi nvlink -s", t),
            CommandSpec(
                "kernel_log", f"journalctl -k --since -{hours}h -o short-iso --no-pager", t
            ),
        ]
        if sec["fabric"]["manager"]:
            cmds.append(
                CommandSpec("fabricmanager", "systemctl status nvidia-fabricmanager --no-pager", t)
            )
        dcgm = sec["dcgm"]
        cmds.append(
            CommandSpec("dcgm", f"dcgmi diag -r {int(dcgm['level'])} -j", float(dcgm["timeout_s"]))
        )
        return cmds

    def evaluate(self, outcomes: Mapping[str, NodeOutcome], ctx: StageContext) -> list[Verdict]:
        verdicts: list[Verdict] = []
        for node in ctx.nodes:
            out = outcomes[node.name]
            if out.reach is not Reach.OK:
                verdicts += unreachable_verdicts(self, out, first_check_fails=False)
                continue
            prof = ctx.profiles[node.name].section(self.name)
            verdicts += judge(gather(node.name, prof, OutcomeReader(self.name, out)))
        return verdicts


def judge(n: GpuNode) -> list[Verdict]:
    """Every check's verdicts for one node's facts (pure)."""
    out: list[Verdict] = []
    for judge_fn in JUDGES.values():
        out += judge_fn(n)
    return out


STAGE = PcieGpuStage()
