"""pcie_gpu checks on inventory and links: count, model, driver, PCIe gen/width, switch ports.

Each function is pure: (GpuNode, profile section) -> verdicts, at least one per node.
"""

from __future__ import annotations

from nodegate.model import Status, Verdict
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.parsers.lspci import gpus as lspci_gpus
from nodegate.parsers.lspci import pcie_gen
from nodegate.stages.pcie_gpu_facts import GpuNode, gpu_name
from nodegate.versions import check_version

# nvidia-smi exits 6 (NVML_ERROR_NOT_FOUND) with "No devices were found" when it sees no GPU.
NVSMI_NO_DEVICES = 6
RESEAT = "reseat the GPU/baseboard cable or riser, check the slot, then requalify; RMA if it stays"


def check_count(n: GpuNode) -> list[Verdict]:
    """gpu.count: nvidia-smi sees the profile's GPU count; lspci sees no GPU it lacks."""
    want = int(n.prof["gpu"]["count"])
    cmds = ("nvsmi", "lspci")
    res = n.facts.result("nvsmi")
    if n.nvsmi is None and res is not None and res.rc == NVSMI_NO_DEVICES:
        return [
            n.verdict(
                "gpu.count",
                Status.FAIL,
                "GPUs",
                0,
                want,
                "nvidia-smi: No devices were found",
                cmds=cmds,
                unit="GPUs",
                remediation="check that the NVIDIA driver is loaded and "
                "the GPUs are on the bus (lspci); power-cycle, then " + RESEAT,
            )
        ]
    if n.nvsmi is None:
        return [n.error("gpu.count", "GPUs", want, "nvsmi")]
    got = len(n.gpus)
    out: list[Verdict] = []
    seen = {g.pci_bus_id for g in n.gpus}
    if n.lspci is not None:
        for dev in lspci_gpus(n.lspci.report):
            if dev.bdf not in seen:
                out.append(
                    n.verdict(
                        "gpu.count",
                        Status.FAIL,
                        f"GPU {dev.bdf} (lspci only)",
                        "on PCIe, not in nvidia-smi",
                        "visible to the driver",
                        f"lspci lists an NVIDIA GPU at {dev.bdf} that nvidia-smi does not report",
                        cmds=cmds,
                        remediation="reset or reboot; if it stays, drain for RMA",
                    )
                )
    if got == want:
        out.append(
            n.verdict(
                "gpu.count", Status.PASS, "GPUs", got, want, f"{got} GPUs", cmds=cmds, unit="GPUs"
            )
        )
        return out
    missing = _missing_modules(n.gpus, want)
    component = f"GPU module(s) {missing} missing" if missing else "GPUs"
    out.append(
        n.verdict(
            "gpu.count",
            Status.FAIL,
            component,
            got,
            want,
            f"{got} GPUs visible, profile expects {want}"
            + (f"; absent module id(s) {missing}" if missing else ""),
            cmds=cmds,
            unit="GPUs",
            remediation="power-cycle the node; if a GPU stays missing, " + RESEAT,
        )
    )
    return out


def _missing_modules(gpus: tuple[NvsmiGpu, ...], want: int) -> str:
    """HGX boards number their GPU modules 1..N: name the ids nobody reported."""
    ids = {g.module_id for g in gpus}
    if None in ids or not ids <= set(range(1, want + 1)):
        return ""
    return ",".join(str(i) for i in range(1, want + 1) if i not in ids)


def check_model(n: GpuNode) -> list[Verdict]:
    """gpu.model: every GPU's PCI vendor:device id is one the profile allows."""
    allowed = [str(x).lower() for x in n.prof["gpu"]["pci_device_ids"]]
    if n.nvsmi is None:
        return [n.error("gpu.model", "GPUs", allowed, "nvsmi")]
    out = []
    for g in n.gpus:
        ok = g.pci_vendor_device in allowed
        out.append(
            n.verdict(
                "gpu.model",
                Status.PASS if ok else Status.FAIL,
                gpu_name(g),
                g.pci_vendor_device,
                allowed,
                f"{g.pci_vendor_device} {g.product_name}",
                cmds=("nvsmi",),
                remediation="wrong GPU model for this SKU: fix the inventory "
                "profile or swap the board",
            )
        )
    return out or [
        n.verdict(
            "gpu.model",
            Status.FAIL,
            "GPUs",
            0,
            allowed,
            "no GPU reported",
            cmds=("nvsmi",),
            remediation="check the GPU driver and board",
        )
    ]


def check_driver(n: GpuNode) -> list[Verdict]:
    """gpu.driver: the driver nvidia-smi runs against is allowed by the profile."""
    rule = n.prof["driver"]
    want = check_version("", rule)[1]
    if n.nvsmi is None or n.nvsmi.driver_version is None:
        return [n.error("gpu.driver", "nvidia driver", want, "nvsmi")]
    got = n.nvsmi.driver_version
    ok, want = check_version(got, rule)
    return [
        n.verdict(
            "gpu.driver",
            Status.PASS if ok else Status.FAIL,
            "nvidia driver",
            got,
            want,
            f"nvidia-smi driver {got}" + ("" if ok else f", expected {want}"),
            cmds=("nvsmi",),
            remediation=f"install a qualified NVIDIA driver ({want})",
        )
    ]


def _link(n: GpuNode, g: NvsmiGpu, what: str) -> tuple[int | None, str]:
    """(lowest of nvidia-smi current and lspci LnkSta, where each came from)."""
    seen: list[tuple[int, str]] = []
    if g.pcie is not None:
        v = g.pcie.gen_current if what == "gen" else g.pcie.width_current_lanes
        if v is not None:
            seen.append((v, f"nvidia-smi {v}"))
    dev = n.lspci.device(g.pci_bus_id or "") if n.lspci is not None else None
    if dev is not None and dev.link_status is not None:
        ls = dev.link_status
        v = pcie_gen(ls.speed_gts) if what == "gen" else ls.width_lanes
        if v is not None:
            seen.append((v, f"lspci LnkSta {v}"))
    if not seen:
        return None, ""
    return min(s[0] for s in seen), ", ".join(s[1] for s in seen)


def check_link(n: GpuNode, what: str) -> list[Verdict]:
    """pcie.gpu.gen / pcie.gpu.width: each GPU's trained link against the profile."""
    check = f"pcie.gpu.{what}"
    want = int(n.prof["pcie"]["gen" if what == "gen" else "width_lanes"])
    unit = "gen" if what == "gen" else "lanes"
    if n.nvsmi is None:
        return [n.error(check, "GPUs", want, "nvsmi")]
    out = []
    for g in n.gpus:
        got, where = _link(n, g, what)
        if got is None:
            out.append(
                n.verdict(
                    check,
                    Status.ERROR,
                    gpu_name(g),
                    None,
                    want,
                    "no PCIe link value from nvidia-smi or lspci",
                    cmds=("nvsmi", "lspci"),
                )
            )
            continue
        ok = got >= want
        label = f"Gen{got}" if what == "gen" else f"x{got}"
        exp = f"Gen{want}" if what == "gen" else f"x{want}"
        out.append(
            n.verdict(
                check,
                Status.PASS if ok else Status.FAIL,
                gpu_name(g),
                got,
                want,
                f"PCIe {label} ({where})" + ("" if ok else f", expected {exp}"),
                cmds=("nvsmi", "lspci"),
                unit=unit,
                remediation=f"link trained at {label} instead of {exp}: " + RESEAT,
            )
        )
    return out


def check_switch(n: GpuNode) -> list[Verdict]:
    """pcie.switch.link: every bridge between root and GPU runs at the profile's gen/width."""
    check = "pcie.switch.link"
    pcie = n.prof["pcie"]
    gen, width = int(pcie["gen"]), int(pcie["width_lanes"])
    want = f"Gen{gen} x{width}"
    if not pcie["switch_ports"]:
        return [
            n.verdict(
                check,
                Status.PASS,
                "PCIe switch ports",
                "not checked",
                "not visible",
                "profile: switch ports are not visible on this SKU (VM)",
                cmds=("lspci",),
            )
        ]
    if n.lspci is None:
        return [n.error(check, "PCIe switch ports", want, "lspci")]
    if n.nvsmi is None:
        return [n.error(check, "PCIe switch ports", want, "nvsmi")]
    out = []
    for g in n.gpus:
        path = n.lspci.path_to(g.pci_bus_id or "")
        if not path:
            out.append(
                n.verdict(
                    check,
                    Status.ERROR,
                    gpu_name(g),
                    None,
                    want,
                    "no bridge above the GPU in lspci -vvv (run as root?)",
                    cmds=("lspci",),
                )
            )
            continue
        for b in path:
            ls = b.device.link_status
            comp = f"{gpu_name(g)} via {b.device.bdf} ({b.device.express_type or 'bridge'})"
            if ls is None:
                out.append(
                    n.verdict(
                        check,
                        Status.ERROR,
                        comp,
                        None,
                        want,
                        "no LnkSta line for this port",
                        cmds=("lspci",),
                    )
                )
                continue
            got_gen = pcie_gen(ls.speed_gts)
            ok = got_gen is not None and got_gen >= gen and ls.width_lanes >= width
            got = f"Gen{got_gen} x{ls.width_lanes}"
            out.append(
                n.verdict(
                    check,
                    Status.PASS if ok else Status.FAIL,
                    comp,
                    got,
                    want,
                    f"port link {got}" + ("" if ok else f", expected {want}"),
                    cmds=("lspci",),
                    remediation="a port above the GPU is degraded: check the riser/cable "
                    "and the switch board; RMA the baseboard if it stays",
                )
            )
    return out or [
        n.verdict(
            check,
            Status.FAIL,
            "GPUs",
            0,
            want,
            "no GPU to check",
            cmds=("nvsmi",),
            remediation="check the GPU driver",
        )
    ]
