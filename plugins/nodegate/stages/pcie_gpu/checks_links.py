"""pcie_gpu checks on inventory and links: count, model, driver, PCIe gen/width, switch ports."""

from __future__ import annotations

from typing import Literal

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.parsers.lspci_bridges import LspciView
from nodegate.parsers.lspci_select import gpus as lspci_gpus
from nodegate.parsers.pci import pcie_gen
from nodegate.stages.pcie_gpu.commands import LSPCI, NVSMI
from nodegate.stages.pcie_gpu.facts import PcieGpuFacts
from nodegate.stages.pcie_gpu.judging import cmd_error, gpu_name
from nodegate.stages.pcie_gpu.profile import PcieGpuProfile

RESEAT = "reseat the GPU/baseboard cable or riser, check the slot, then requalify; RMA if it stays"
LinkAspect = Literal["gen", "width"]


def check_count(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.count: nvidia-smi sees the profile's GPU count; lspci sees no GPU it lacks."""
    want = p.gpu_count.value
    ev = f.evidence(NVSMI, LSPCI)
    if f.nvsmi_no_devices:
        fix = "check that the NVIDIA driver is loaded and the GPUs are on the bus (lspci); "
        return [
            judged(
                check,
                f.node,
                False,
                "GPUs",
                0,
                want,
                "nvidia-smi: No devices were found",
                unit=p.gpu_count.unit,
                reference=p.gpu_count,
                remediation=fix + "power-cycle, then " + RESEAT,
                evidence=ev,
            )
        ]
    if f.nvsmi is None:
        return [cmd_error(f, check, "GPUs", want, NVSMI)]
    out: list[Verdict] = []
    seen = {g.pci_bus_id for g in f.gpus}
    for dev in lspci_gpus(f.lspci.report) if f.lspci is not None else ():
        if dev.bdf not in seen:
            out.append(
                judged(
                    check,
                    f.node,
                    False,
                    f"GPU {dev.bdf} (lspci only)",
                    "on PCIe, not in nvidia-smi",
                    "visible to the driver",
                    f"lspci lists an NVIDIA GPU at {dev.bdf} that nvidia-smi does not report",
                    remediation="reset or reboot; if it stays, drain for RMA",
                    evidence=ev,
                )
            )
    got = len(f.gpus)
    if p.gpu_count.holds(got):
        out.append(
            judged(
                check,
                f.node,
                True,
                "GPUs",
                got,
                want,
                f"{got} GPUs",
                unit=p.gpu_count.unit,
                reference=p.gpu_count,
                evidence=ev,
            )
        )
        return out
    missing = _missing_modules(f.gpus, int(want))
    out.append(
        judged(
            check,
            f.node,
            False,
            f"GPU module(s) {missing} missing" if missing else "GPUs",
            got,
            want,
            f"{got} GPUs visible, profile expects {want}"
            + (f"; absent module id(s) {missing}" if missing else ""),
            unit=p.gpu_count.unit,
            reference=p.gpu_count,
            remediation="power-cycle the node; if a GPU stays missing, " + RESEAT,
            evidence=ev,
        )
    )
    return out


def _missing_modules(gpus: tuple[NvsmiGpu, ...], want: int) -> str:
    """HGX boards number their GPU modules 1..N: name the ids nobody reported."""
    ids = {g.module_id for g in gpus}
    if None in ids or not ids <= set(range(1, want + 1)):
        return ""
    return ",".join(str(i) for i in range(1, want + 1) if i not in ids)


def check_model(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.model: every GPU's PCI vendor:device id is one the profile allows."""
    allowed = list(p.pci_device_ids)
    if f.nvsmi is None:
        return [cmd_error(f, check, "GPUs", allowed, NVSMI)]
    ev = f.evidence(NVSMI)
    out = [
        judged(
            check,
            f.node,
            g.pci_vendor_device in allowed,
            gpu_name(g),
            g.pci_vendor_device,
            allowed,
            f"{g.pci_vendor_device} {g.product_name}",
            remediation="wrong GPU model for this SKU: fix the inventory profile or swap the board",
            evidence=ev,
        )
        for g in f.gpus
    ]
    return out or [
        judged(
            check,
            f.node,
            False,
            "GPUs",
            0,
            allowed,
            "no GPU reported",
            remediation="check the GPU driver and board",
            evidence=ev,
        )
    ]


def check_driver(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.driver: the driver nvidia-smi runs against is allowed by the profile."""
    want = p.driver.expected()
    if f.nvsmi is None or f.nvsmi.driver_version is None:
        return [cmd_error(f, check, "nvidia driver", want, NVSMI)]
    got = f.nvsmi.driver_version
    ok, want = p.driver.judge(got)
    return [
        judged(
            check,
            f.node,
            ok,
            "nvidia driver",
            got,
            want,
            f"nvidia-smi driver {got}" + ("" if ok else f", expected {want}"),
            remediation=f"install a qualified NVIDIA driver ({want})",
            evidence=f.evidence(NVSMI),
        )
    ]


def _link(f: PcieGpuFacts, g: NvsmiGpu, what: LinkAspect) -> tuple[int | None, str]:
    """(lowest of nvidia-smi current and lspci LnkSta, where each came from)."""
    seen: list[tuple[int, str]] = []
    if g.pcie is not None:
        v = g.pcie.gen_current if what == "gen" else g.pcie.width_current_lanes
        if v is not None:
            seen.append((v, f"nvidia-smi {v}"))
    dev = f.lspci.device(g.pci_bus_id or "") if f.lspci is not None else None
    if dev is not None and dev.link_status is not None:
        ls = dev.link_status
        v = pcie_gen(ls.speed_gts) if what == "gen" else ls.width_lanes
        if v is not None:
            seen.append((v, f"lspci LnkSta {v}"))
    if not seen:
        return None, ""
    return min(s[0] for s in seen), ", ".join(s[1] for s in seen)


def check_link(
    check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile, what: LinkAspect
) -> list[Verdict]:
    """pcie.gpu.gen / pcie.gpu.width: each GPU's trained link against the profile."""
    limit = p.pcie_gen if what == "gen" else p.pcie_width
    want = limit.value
    if f.nvsmi is None:
        return [cmd_error(f, check, "GPUs", want, NVSMI)]
    ev = f.evidence(NVSMI, LSPCI)
    out = []
    for g in f.gpus:
        got, where = _link(f, g, what)
        if got is None:
            out.append(
                error(
                    check,
                    f.node,
                    gpu_name(g),
                    "no PCIe link value from nvidia-smi or lspci",
                    expected=want,
                    evidence=ev,
                )
            )
            continue
        idle_max = _idle_max(g, p, got) if what == "gen" else None
        if idle_max is not None:
            out.append(_idle_link(check, f, g, p, got, idle_max, where))
            continue
        ok = limit.holds(got)  # today's semantics: a link trained above the profile passes
        label = f"Gen{got}" if what == "gen" else f"x{got}"
        exp = f"Gen{want}" if what == "gen" else f"x{want}"
        out.append(
            judged(
                check,
                f.node,
                ok,
                gpu_name(g),
                got,
                want,
                f"PCIe {label} ({where})" + ("" if ok else f", expected {exp}"),
                unit=limit.unit,
                reference=limit,
                remediation=f"link trained at {label} instead of {exp}: " + RESEAT,
                evidence=ev,
            )
        )
    return out


def _idle_max(g: NvsmiGpu, p: PcieGpuProfile, got: int) -> int | None:
    """nvidia-smi's Max generation when GPU `g` is idle (profile `idle_pstate`) with its link
    below Max: link power saving, not a degraded link. None: judge the current link."""
    idle, link, pstate = p.pcie_idle_pstate, g.pcie, g.performance_state
    if idle is None or link is None or link.gen_max is None or pstate is None:
        return None
    return link.gen_max if idle.holds(pstate) and got < link.gen_max else None


def _idle_link(
    check: AnyCheck, f: PcieGpuFacts, g: NvsmiGpu, p: PcieGpuProfile, got: int, top: int, where: str
) -> Verdict:
    """pcie.gpu.gen of an idle GPU whose link runs below Max: its Max against the profile."""
    limit, idle = p.pcie_gen, p.pcie_idle_pstate
    ok, exp = limit.holds(top), f"Gen{limit.value}"
    since = f"P{idle.value}" if idle is not None else "?"
    rule = f"an idle GPU's link may run below Max, Max judged (profile: idle from {since})"
    msg = f"PCIe Max Gen{top}, Gen{got} now ({where}) at idle P{g.performance_state}: {rule}"
    return judged(
        check,
        f.node,
        ok,
        gpu_name(g),
        top,
        limit.value,
        msg + ("" if ok else f", expected {exp}"),
        unit=limit.unit,
        reference=limit,
        remediation=f"the link reaches at most Gen{top} instead of {exp}: " + RESEAT,
        evidence=f.evidence(NVSMI, LSPCI),
    )


def check_link_gen(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """pcie.gpu.gen: every GPU's PCIe link runs at the profile's PCIe generation."""
    return check_link(check, f, p, "gen")


def check_link_width(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """pcie.gpu.width: every GPU's PCIe link runs at the profile's width."""
    return check_link(check, f, p, "width")


PORT_FIX = (
    "a port above the GPU is degraded: check the riser/cable and the switch board; "
    "RMA the baseboard if it stays"
)


def check_switch(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """pcie.switch.link: every bridge between root and GPU runs at the profile's gen/width."""
    want = f"Gen{p.pcie_gen.value} x{p.pcie_width.value}"
    if not p.switch_ports:
        return [
            judged(
                check,
                f.node,
                True,
                "PCIe switch ports",
                "not checked",
                "not visible",
                "profile: switch ports are not visible on this SKU (VM)",
                evidence=f.evidence(LSPCI),
            )
        ]
    if f.lspci is None:
        return [cmd_error(f, check, "PCIe switch ports", want, LSPCI)]
    if f.nvsmi is None:
        return [cmd_error(f, check, "PCIe switch ports", want, NVSMI)]
    out = [v for g in f.gpus for v in _ports_above(check, f, f.lspci, p, g, want)]
    return out or [
        judged(
            check,
            f.node,
            False,
            "GPUs",
            0,
            want,
            "no GPU to check",
            remediation="check the GPU driver",
            evidence=f.evidence(NVSMI),
        )
    ]


def _ports_above(
    check: AnyCheck, f: PcieGpuFacts, lspci: LspciView, p: PcieGpuProfile, g: NvsmiGpu, want: str
) -> list[Verdict]:
    """One verdict per bridge between the root complex and GPU `g`, root port first."""
    ev = f.evidence(LSPCI)
    path = lspci.path_to(g.pci_bus_id or "")
    if not path:
        why = "no bridge above the GPU in lspci -vvv (run as root?)"
        return [error(check, f.node, gpu_name(g), why, expected=want, evidence=ev)]
    out = []
    for b in path:
        ls = b.device.link_status
        comp = f"{gpu_name(g)} via {b.device.bdf} ({b.device.express_type or 'bridge'})"
        if ls is None:
            why = "no LnkSta line for this port"
            out.append(error(check, f.node, comp, why, expected=want, evidence=ev))
            continue
        got_gen = pcie_gen(ls.speed_gts)
        ok = p.pcie_gen.holds(got_gen) and p.pcie_width.holds(ls.width_lanes)
        got = f"Gen{got_gen} x{ls.width_lanes}"
        msg = f"port link {got}" + ("" if ok else f", expected {want}")
        out.append(
            judged(check, f.node, ok, comp, got, want, msg, remediation=PORT_FIX, evidence=ev)
        )
    return out
