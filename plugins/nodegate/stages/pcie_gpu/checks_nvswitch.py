"""pcie_gpu check on the NVSwitches: SXid errors in the kernel log and the fabric manager's.

The driver logs every NVSwitch error as an SXid in the kernel log (read over the Xid window);
the fabric manager also reports the ones it detects in its journal, which `systemctl status`
shows. Its lines carry no year, so they are counted only when the running fabric manager
(`Main PID`) logged them: what that instance saw is the state of the fabric it manages, and
the restart a fatal error needs starts a new instance.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from nodegate.core.checks import AnyCheck
from nodegate.core.remediation import XID_ACTION_CLASS
from nodegate.core.values import Verdict
from nodegate.core.verdicts import judged
from nodegate.stages.pcie_gpu.commands import FABRICMANAGER, KERNEL_LOG
from nodegate.stages.pcie_gpu.facts import PcieGpuFacts
from nodegate.stages.pcie_gpu.judging import cmd_error
from nodegate.stages.pcie_gpu.profile import XID_ACTIONS, PcieGpuProfile, SxidTable, XidAction

# What each action asks of the operator for an NVSwitch (the action per code is profile data).
SXID_REMEDIATION: dict[XidAction, str] = {
    "ignore": "no node action",
    "reset": "drain; stop nvidia-fabricmanager, reset all GPUs and NVSwitches (nvidia-smi -r), "
    "start it again and requalify",
    "reboot": "drain and reboot the node (resets every GPU and NVSwitch), then requalify",
    "drain_rma": "drain the node and open an RMA for the NVSwitch baseboard",
}
KERNEL = "kernel log"
FABRIC_MANAGER = "fabric manager"


@dataclass(frozen=True, slots=True)
class SwitchError:
    """One NVSwitch error as one source reported it."""

    bdf: str  # the NVSwitch's PCI address, `?` when the line lost it
    code: int
    fatal: bool | None  # None: the line did not say
    source: str  # KERNEL or FABRIC_MANAGER


def check_nvswitch(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.nvswitch: no NVSwitch SXid needing action (per the profile's SXid table)."""
    hours = p.xid.window_hours
    want = f"no NVSwitch SXid needing action in the last {hours} h"
    if f.klog is None:
        return [cmd_error(f, check, KERNEL, want, KERNEL_LOG)]
    errs = [SwitchError(sx.bdf, sx.sxid, sx.fatal, KERNEL) for sx in f.klog.sxids]
    # The kernel log holds every SXid; an unreadable fabric manager status is gpu.fabric's ERROR.
    fm_note = "; fabric manager journal not read (see gpu.fabric)" if p.fabric_manager else ""
    if f.fm is not None:
        pid = f.fm.main_pid
        errs += [
            SwitchError(nv.bdf or "?", nv.error_code, nv.fatal, FABRIC_MANAGER)
            for j in f.fm.journal
            if (nv := j.nvswitch_error) is not None and pid is not None and j.pid == pid
        ]
        fm_note = f"; none from the fabric manager (pid {pid})" if pid else ""
    ev = f.evidence(KERNEL_LOG, FABRICMANAGER)
    if not errs:
        msg = f"no SXid in the kernel log of the last {hours} h{fm_note}"
        return [judged(check, f.node, True, "NVSwitches", "none", want, msg, evidence=ev)]
    by_switch: dict[str, list[SwitchError]] = {}
    for e in errs:
        by_switch.setdefault(e.bdf, []).append(e)
    return [
        _switch_verdict(check, f, bdf, by_switch[bdf], p.sxid, want, ev)
        for bdf in sorted(by_switch)
    ]


def _switch_verdict(
    check: AnyCheck,
    f: PcieGpuFacts,
    bdf: str,
    errs: list[SwitchError],
    table: SxidTable,
    want: str,
    ev: tuple[str, ...],
) -> Verdict:
    """One NVSwitch's SXid codes; the most severe action decides."""
    worst: XidAction = "ignore"
    parts = []
    for code in sorted({e.code for e in errs}):
        same = [e for e in errs if e.code == code]
        fatal = any(e.fatal for e in same)
        action, meaning = table.action(code, fatal)
        seen = Counter(e.source for e in same)
        where = ", ".join(f"{src} x{seen[src]}" for src in (KERNEL, FABRIC_MANAGER) if seen[src])
        known = all(e.fatal is False for e in same)
        sev = "fatal" if fatal else "non-fatal" if known else "severity not logged"
        parts.append(f"SXid {code} ({meaning}, {sev}: {action}): {where}")
        worst = max(worst, action, key=XID_ACTIONS.index)
    return judged(
        check,
        f.node,
        worst == "ignore",
        f"NVSwitch {bdf}",
        ", ".join(str(c) for c in sorted({e.code for e in errs})),
        want,
        "; ".join(parts),
        unit="SXid",
        remediation=SXID_REMEDIATION[worst],
        evidence=ev,
        remediation_class=XID_ACTION_CLASS[worst],  # the SXid table's class wins
    )
