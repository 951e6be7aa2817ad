"""pcie_gpu checks on GPU health: Xid events, clock event reasons, persistence mode."""

from __future__ import annotations

from collections import Counter

from nodegate.core.checks import AnyCheck
from nodegate.core.remediation import XID_ACTION_CLASS
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.parsers.kernel_log import XidEvent
from nodegate.parsers.pci import normalize_bdf
from nodegate.stages.pcie_gpu.commands import KERNEL_LOG, NVSMI
from nodegate.stages.pcie_gpu.facts import PcieGpuFacts
from nodegate.stages.pcie_gpu.judging import cmd_error, gpu_name, per_gpu
from nodegate.stages.pcie_gpu.profile import XID_ACTIONS, PcieGpuProfile, XidAction, XidTable

# What each Xid action asks of the operator (the action per code comes from the profile).
ACTION_REMEDIATION: dict[XidAction, str] = {
    "ignore": "application-level error; no node action",
    "reset": "drain, reset the GPU (nvidia-smi -r -i <idx>) or reboot, then requalify",
    "reboot": "drain and reboot the node, then requalify",
    "drain_rma": "drain the node and open an RMA for the GPU/baseboard",
}
# NVIDIA's Xid catalogue: Xid 79 is "GPU has fallen off the bus". The driver also reports a
# fall at probe time with no Xid at all (corpus dmesg__fallen-off-bus-at-probe-no-xid-...).
FALLEN_OFF_BUS_XID = 79
THROTTLED = (
    "GPU is throttled by hardware: check cooling (fans, inlet temperature), "
    "PSUs and the power brake signal; reseat or RMA if it persists"
)


def check_xid(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.xid: Xid events in the profile's window, judged by the profile's Xid table; a GPU
    that fell off the bus without an Xid 79 logged is judged as Xid 79."""
    hours = p.xid.window_hours
    want = f"no Xid needing action in the last {hours} h"
    if f.klog is None:
        return [cmd_error(f, check, "kernel log", want, KERNEL_LOG)]
    by_comp: dict[str, list[XidEvent]] = {}
    for ev in f.klog.xids:
        by_comp.setdefault(_gpu_component(f, ev.bdf), []).append(ev)
    fallen: dict[str, int] = {}
    for fe in f.klog.fallen_off_bus:
        comp = _gpu_component(f, fe.bdf) if fe.bdf else "GPU (PCI address not logged)"
        if not any(ev.xid == FALLEN_OFF_BUS_XID for ev in by_comp.get(comp, ())):
            fallen[comp] = fallen.get(comp, 0) + 1
    if not by_comp and not fallen:
        msg = f"no Xid in the last {hours} h"
        return [judged(check, f.node, True, "kernel log", "none", want, msg, evidence=_ev(f))]
    return [
        _xid_verdict(check, f, comp, by_comp.get(comp, []), fallen.get(comp, 0), p.xid, want)
        for comp in sorted(by_comp.keys() | fallen.keys())
    ]


def _gpu_component(f: PcieGpuFacts, bdf: str) -> str:
    g = f.gpu_by_bdf(normalize_bdf(bdf) or bdf)
    return gpu_name(g) if g is not None else f"GPU PCI:{bdf}"


def _ev(f: PcieGpuFacts) -> tuple[str, ...]:
    return f.evidence(KERNEL_LOG)


def _xid_verdict(
    check: AnyCheck,
    f: PcieGpuFacts,
    comp: str,
    evs: list[XidEvent],
    fallen: int,
    table: XidTable,
    want: str,
) -> Verdict:
    """One GPU's Xid codes (and falls off the bus without Xid) in the window; the most severe
    action decides."""
    counts = Counter(ev.xid for ev in evs)
    worst: XidAction = "ignore"
    parts = []
    for code, cnt in sorted(counts.items()):
        action, meaning = table.action(code)
        parts.append(f"Xid {code} x{cnt} ({meaning}: {action})")
        worst = max(worst, action, key=XID_ACTIONS.index)
    observed = [f"{c}" for c in sorted(counts)]
    if fallen:
        action, meaning = table.action(FALLEN_OFF_BUS_XID)
        parts.append(
            f"fallen off the bus x{fallen} without an Xid "
            f"(as Xid {FALLEN_OFF_BUS_XID}, {meaning}: {action})"
        )
        worst = max(worst, action, key=XID_ACTIONS.index)
        observed.append("fallen off the bus")
    return judged(
        check,
        f.node,
        worst == "ignore",
        comp,
        ", ".join(observed),
        want,
        "; ".join(parts),
        unit="Xid",
        remediation=ACTION_REMEDIATION[worst],
        evidence=_ev(f),
        remediation_class=XID_ACTION_CLASS[worst],  # the Xid table's class wins for gpu.xid
    )


def check_clocks(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.clocks: none of the profile's failing clock event reasons is active."""
    bad = list(p.clock_fail_reasons)
    ev = f.evidence(NVSMI)

    def one(g: NvsmiGpu) -> Verdict:
        cer = g.clock_event_reasons
        if cer is None:
            return error(
                check,
                f.node,
                gpu_name(g),
                "no clock event reasons in nvidia-smi -q",
                expected="none of " + str(bad),
                evidence=ev,
            )
        unknown = [r for r in bad if r in cer.active and cer.active[r] is None]
        on = [r for r in bad if cer.active.get(r)]
        if not on and unknown:
            return error(
                check,
                f.node,
                gpu_name(g),
                f"unreadable reasons: {', '.join(unknown)}",
                expected="inactive",
                evidence=ev,
            )
        got = ", ".join(on) or "none"
        return judged(
            check,
            f.node,
            not on,
            gpu_name(g),
            got,
            "none active",
            f"active failing clock event reasons: {got}"
            if on
            else "no failing clock event reason active",
            remediation=THROTTLED,
            evidence=ev,
        )

    return per_gpu(f, check, "none active", one)


def check_persistence(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.persistence: persistence mode as the profile wants."""
    want = p.persistence_mode
    label = "Enabled" if want else "Disabled"
    ev = f.evidence(NVSMI)
    fix = (
        "enable nvidia-persistenced (systemctl enable --now nvidia-persistenced)"
        if want
        else "disable persistence mode (nvidia-smi -pm 0)"
    )

    def one(g: NvsmiGpu) -> Verdict:
        if g.persistence_mode is None:
            return error(
                check,
                f.node,
                gpu_name(g),
                "no persistence mode in nvidia-smi -q",
                expected=label,
                evidence=ev,
            )
        got = "Enabled" if g.persistence_mode else "Disabled"
        return judged(
            check,
            f.node,
            g.persistence_mode is want,
            gpu_name(g),
            got,
            label,
            f"persistence mode {got}",
            remediation=fix,
            evidence=ev,
        )

    return per_gpu(f, check, label, one)
