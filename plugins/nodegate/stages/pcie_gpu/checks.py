"""The pcie_gpu check table: every check id of the stage, in report order.

Node-scope checks, each `(check, PcieGpuFacts, PcieGpuProfile) -> verdicts`, one verdict per
GPU where it applies (component `GPU3 0000:5d:00.0 serial 1650124032506`).
"""

from __future__ import annotations

from nodegate.core.checks import Chart, Check, CheckTable
from nodegate.stages.pcie_gpu import checks_fabric as fabric
from nodegate.stages.pcie_gpu import checks_health as health
from nodegate.stages.pcie_gpu import checks_links as links
from nodegate.stages.pcie_gpu import checks_memory as memory
from nodegate.stages.pcie_gpu import checks_nvswitch as nvswitch
from nodegate.stages.pcie_gpu.facts import PcieGpuFacts
from nodegate.stages.pcie_gpu.profile import PcieGpuProfile

CHECKS: CheckTable[PcieGpuFacts, PcieGpuProfile] = CheckTable(
    "pcie_gpu",
    [
        Check(
            "gpu.count",
            "nvidia-smi reports the profile's GPU count and lspci shows no GPU it lacks.",
            links.check_count,
            "GPUs",
            "test_gpu_count",
        ),
        Check(
            "gpu.model",
            "every GPU's PCI vendor:device id is allowed by the profile.",
            links.check_model,
            "GPU",
            "test_gpu_model",
        ),
        Check(
            "gpu.driver",
            "the driver nvidia-smi reports is allowed by the profile.",
            links.check_driver,
            "nvidia driver",
            "test_gpu_driver",
        ),
        Check(
            "pcie.gpu.gen",
            "every GPU's PCIe link runs at the profile's PCIe generation; where the profile "
            "sets idle_pstate, an idle GPU whose link runs below Max is judged by its Max.",
            links.check_link_gen,
            "GPU",
            "test_pcie_gpu_gen",
            chart=Chart(3),
        ),
        Check(
            "pcie.gpu.width",
            "every GPU's PCIe link runs at the profile's width (nvidia-smi and lspci).",
            links.check_link_width,
            "GPU",
            "test_pcie_gpu_width",
            chart=Chart(2),
        ),
        Check(
            "pcie.switch.link",
            "ports above each GPU run at the profile's gen and width.",
            links.check_switch,
            "PCIe port above a GPU",
            "test_pcie_switch_link",
        ),
        Check(
            "gpu.ecc.mode",
            "ECC is enabled (current and pending) as the profile wants.",
            memory.check_ecc_mode,
            "GPU",
            "test_gpu_ecc_mode",
        ),
        Check(
            "gpu.ecc.uncorrectable",
            "no volatile uncorrectable ECC error beyond the profile's maximum.",
            memory.check_ecc_uncorrectable,
            "GPU",
            "test_gpu_ecc_uncorrectable",
            chart=Chart(5),
        ),
        Check(
            "gpu.remap",
            "no row remap pending (reset) or failed (RMA).",
            memory.check_remap,
            "GPU",
            "test_gpu_row_remap",
        ),
        Check(
            "gpu.retired_pages",
            "pre-Ampere GPUs: retired pages under NVIDIA's limit, none pending.",
            memory.check_retired_pages,
            "GPU",
            "test_gpu_retired_pages",
        ),
        Check(
            "gpu.xid",
            "no Xid needing action in the profile's window (per the profile's Xid table); a GPU "
            "fallen off the bus without an Xid counts as Xid 79.",
            health.check_xid,
            "GPU",
            "test_gpu_xid",
        ),
        Check(
            "gpu.nvlink",
            "every GPU has the profile's NVLink count, all active at the profile's speed.",
            fabric.check_nvlink,
            "GPU",
            "test_gpu_nvlink",
        ),
        Check(
            "gpu.fabric",
            "fabric manager running; each GPU's fabric Completed/Success where the GPU reports "
            "one (Hopper on).",
            fabric.check_fabric,
            "GPU",
            "test_gpu_fabric",
        ),
        Check(
            "gpu.nvswitch",
            "no NVSwitch SXid needing action in the profile's window (per the profile's SXid "
            "table), in the kernel log or from the fabric manager.",
            nvswitch.check_nvswitch,
            "NVSwitch",
            "test_gpu_nvswitch",
        ),
        Check(
            "gpu.clocks",
            "no failing clock event reason (HW slowdown, thermal, power brake) is active.",
            health.check_clocks,
            "GPU",
            "test_gpu_clocks",
        ),
        Check(
            "gpu.persistence",
            "persistence mode as the profile wants.",
            health.check_persistence,
            "GPU",
            "test_gpu_persistence",
        ),
        Check(
            "gpu.dcgm",
            "dcgmi diag at the profile's level passes every test on every GPU.",
            fabric.check_dcgm,
            "GPU",
            "test_gpu_dcgm",
        ),
    ],
)
