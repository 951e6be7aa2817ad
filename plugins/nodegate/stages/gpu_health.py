"""pcie_gpu checks on GPU health: ECC, row remapping, retired pages, Xid, clocks, persistence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from nodegate.model import Status, Verdict
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.parsers.kernel_log import XidEvent
from nodegate.parsers.lspci import normalize_bdf
from nodegate.stages.pcie_gpu_facts import GpuNode, gpu_by_bdf, gpu_name

# What each Xid action asks of the operator (the action per code comes from the profile).
ACTIONS = {
    "ignore": "application-level error; no node action",
    "reset": "drain, reset the GPU (nvidia-smi -r -i <idx>) or reboot, then requalify",
    "reboot": "drain and reboot the node, then requalify",
    "drain_rma": "drain the node and open an RMA for the GPU/baseboard",
}
_RANK = {"ignore": 0, "reset": 1, "reboot": 2, "drain_rma": 3}

PerGpu = Callable[[GpuNode, NvsmiGpu], Verdict]


def per_gpu(n: GpuNode, check: str, expected: Any, fn: PerGpu) -> list[Verdict]:
    """Run `fn` for every GPU nvidia-smi reported; ERROR when there is none to judge."""
    if n.nvsmi is None:
        return [n.error(check, "GPUs", expected, "nvsmi")]
    out = [fn(n, g) for g in n.gpus]
    if not out:
        out.append(
            n.verdict(
                check,
                Status.ERROR,
                "GPUs",
                0,
                expected,
                "nvidia-smi reported no GPU",
                cmds=("nvsmi",),
            )
        )
    return out


def check_ecc_mode(n: GpuNode) -> list[Verdict]:
    """gpu.ecc.mode: ECC current and pending mode as the profile wants."""
    want = bool(n.prof["ecc"]["enabled"])
    label = "Enabled" if want else "Disabled"

    def one(n: GpuNode, g: NvsmiGpu) -> Verdict:
        mode = g.ecc.mode if g.ecc is not None else None
        if mode is None or (mode.current is None and mode.current_raw is None):
            return n.verdict(
                "gpu.ecc.mode",
                Status.ERROR,
                gpu_name(g),
                None,
                label,
                "no ECC mode in nvidia-smi -q",
                cmds=("nvsmi",),
            )
        got = mode.current_raw or str(mode.current)
        ok = mode.current is want and mode.pending in (want, None)
        why = f"ECC current {mode.current_raw}, pending {mode.pending_raw}"
        return n.verdict(
            "gpu.ecc.mode",
            Status.PASS if ok else Status.FAIL,
            gpu_name(g),
            got,
            label,
            why,
            cmds=("nvsmi",),
            remediation=f"set ECC {label.lower()} (nvidia-smi -i {g.index} -e "
            f"{int(want)}) and reset the GPU; 'Unknown Error' after an Xid 48 needs a reset",
        )

    return per_gpu(n, "gpu.ecc.mode", label, one)


def check_ecc_uncorrectable(n: GpuNode) -> list[Verdict]:
    """gpu.ecc.uncorrectable: volatile uncorrectable ECC errors at most the profile's maximum."""
    limit = int(n.prof["ecc"]["volatile_uncorrectable_max"])

    def one(n: GpuNode, g: NvsmiGpu) -> Verdict:
        vol = g.ecc.volatile if g.ecc is not None else None
        if vol is None or vol.uncorrectable is None:
            return n.verdict(
                "gpu.ecc.uncorrectable",
                Status.ERROR,
                gpu_name(g),
                None,
                f"<= {limit}",
                "no volatile uncorrectable ECC count",
                cmds=("nvsmi",),
            )
        got = vol.uncorrectable
        ok = got <= limit
        fields = ", ".join(f"{k} {v}" for k, v in sorted(vol.fields.items()) if v)
        return n.verdict(
            "gpu.ecc.uncorrectable",
            Status.PASS if ok else Status.FAIL,
            gpu_name(g),
            got,
            f"<= {limit}",
            f"{got} volatile uncorrectable ECC errors" + (f" ({fields})" if fields else ""),
            cmds=("nvsmi",),
            unit="errors",
            remediation="drain; reset the GPU so the row remapper applies, then requalify; "
            "RMA if it repeats",
        )

    return per_gpu(n, "gpu.ecc.uncorrectable", f"<= {limit}", one)


def check_remap(n: GpuNode) -> list[Verdict]:
    """gpu.remap: no row remap pending (needs reset) and no remapping failure (needs RMA)."""
    required = bool(n.prof["row_remap"]["required"])

    def one(n: GpuNode, g: NvsmiGpu) -> Verdict:
        rr = g.remapped_rows
        if rr is None or (rr.pending is None and rr.failure is None):
            if required:
                return n.verdict(
                    "gpu.remap",
                    Status.ERROR,
                    gpu_name(g),
                    None,
                    "pending No, failure No",
                    "no row remapper state in nvidia-smi",
                    cmds=("nvsmi",),
                )
            return n.verdict(
                "gpu.remap",
                Status.PASS,
                gpu_name(g),
                "n/a",
                "n/a",
                "no row remapper (pre-Ampere): see gpu.retired_pages",
                cmds=("nvsmi",),
            )
        got = f"pending {_yn(rr.pending)}, failure {_yn(rr.failure)}"
        if rr.failure:
            fix = "row remapping failed: drain the node and RMA the GPU"
        elif rr.pending:
            fix = "drain and reset the GPU to apply the pending row remap, then requalify"
        else:
            fix = None
        msg = (
            f"remapped rows: uncorrectable {rr.uncorrectable}, correctable {rr.correctable}, {got}"
        )
        return n.verdict(
            "gpu.remap",
            Status.FAIL if fix else Status.PASS,
            gpu_name(g),
            got,
            "pending No, failure No",
            msg,
            cmds=("nvsmi",),
            remediation=fix,
        )

    return per_gpu(n, "gpu.remap", "pending No, failure No", one)


def _yn(v: bool | None) -> str:
    return "?" if v is None else ("Yes" if v else "No")


def check_retired_pages(n: GpuNode) -> list[Verdict]:
    """gpu.retired_pages: (pre-Ampere) retired pages under NVIDIA's limit, none pending."""
    limit = int(n.prof["retired_pages"]["max_total"])

    def one(n: GpuNode, g: NvsmiGpu) -> Verdict:
        rp = g.retired_pages
        counts = (rp.single_bit_count, rp.double_bit_count) if rp is not None else (None, None)
        if rp is None or (counts == (None, None) and rp.pending is None):
            if g.remapped_rows is not None and g.remapped_rows.pending is not None:
                return n.verdict(
                    "gpu.retired_pages",
                    Status.PASS,
                    gpu_name(g),
                    "n/a",
                    "n/a",
                    "no page retirement: this GPU remaps rows (gpu.remap)",
                    cmds=("nvsmi",),
                )
            return n.verdict(
                "gpu.retired_pages",
                Status.ERROR,
                gpu_name(g),
                None,
                f"<= {limit}",
                "neither retired pages nor remapped rows reported",
                cmds=("nvsmi",),
            )
        total = sum(c or 0 for c in counts)
        ok = total <= limit and not rp.pending
        return n.verdict(
            "gpu.retired_pages",
            Status.PASS if ok else Status.FAIL,
            gpu_name(g),
            total,
            f"<= {limit}, none pending",
            f"retired pages SBE {counts[0]}, DBE {counts[1]}, pending {_yn(rp.pending)}",
            cmds=("nvsmi",),
            unit="pages",
            remediation="pending retirement: reset the GPU; at the limit: RMA the GPU",
        )

    return per_gpu(n, "gpu.retired_pages", f"<= {limit}", one)


def check_clocks(n: GpuNode) -> list[Verdict]:
    """gpu.clocks: none of the profile's failing clock event reasons is active."""
    bad = [str(r) for r in n.prof["clocks"]["fail_reasons"]]

    def one(n: GpuNode, g: NvsmiGpu) -> Verdict:
        cer = g.clock_event_reasons
        if cer is None:
            return n.verdict(
                "gpu.clocks",
                Status.ERROR,
                gpu_name(g),
                None,
                "none of " + str(bad),
                "no clock event reasons in nvidia-smi -q",
                cmds=("nvsmi",),
            )
        unknown = [r for r in bad if r in cer.active and cer.active[r] is None]
        on = [r for r in bad if cer.active.get(r)]
        if not on and unknown:
            return n.verdict(
                "gpu.clocks",
                Status.ERROR,
                gpu_name(g),
                None,
                "inactive",
                f"unreadable reasons: {', '.join(unknown)}",
                cmds=("nvsmi",),
            )
        got = ", ".join(on) or "none"
        return n.verdict(
            "gpu.clocks",
            Status.FAIL if on else Status.PASS,
            gpu_name(g),
            got,
            "none active",
            f"active failing clock event reasons: {got}"
            if on
            else "no failing clock event reason active",
            cmds=("nvsmi",),
            remediation="GPU is throttled by hardware: check cooling (fans, inlet temperature), "
            "PSUs and the power brake signal; reseat or RMA if it persists",
        )

    return per_gpu(n, "gpu.clocks", "none active", one)


def check_persistence(n: GpuNode) -> list[Verdict]:
    """gpu.persistence: persistence mode as the profile wants."""
    want = bool(n.prof["persistence_mode"])
    label = "Enabled" if want else "Disabled"

    def one(n: GpuNode, g: NvsmiGpu) -> Verdict:
        if g.persistence_mode is None:
            return n.verdict(
                "gpu.persistence",
                Status.ERROR,
                gpu_name(g),
                None,
                label,
                "no persistence mode in nvidia-smi -q",
                cmds=("nvsmi",),
            )
        got = "Enabled" if g.persistence_mode else "Disabled"
        return n.verdict(
            "gpu.persistence",
            Status.PASS if g.persistence_mode is want else Status.FAIL,
            gpu_name(g),
            got,
            label,
            f"persistence mode {got}",
            cmds=("nvsmi",),
            remediation="enable nvidia-persistenced (systemctl enable --now nvidia-persistenced)"
            if want
            else "disable persistence mode (nvidia-smi -pm 0)",
        )

    return per_gpu(n, "gpu.persistence", label, one)


def check_xid(n: GpuNode) -> list[Verdict]:
    """gpu.xid: Xid events in the profile's window, judged by the profile's Xid table."""
    xid = n.prof["xid"]
    hours = xid["window_hours"]
    want = f"no Xid needing action in the last {hours} h"
    if n.klog is None:
        return [n.error("gpu.xid", "kernel log", want, "kernel_log")]
    by_comp: dict[str, list[XidEvent]] = {}
    for ev in n.klog.xids:
        g = gpu_by_bdf(n, normalize_bdf(ev.bdf) or ev.bdf)
        by_comp.setdefault(gpu_name(g) if g is not None else f"GPU PCI:{ev.bdf}", []).append(ev)
    if not by_comp:
        return [
            n.verdict(
                "gpu.xid",
                Status.PASS,
                "kernel log",
                "none",
                want,
                f"no Xid in the last {hours} h",
                cmds=("kernel_log",),
            )
        ]
    return [_xid_verdict(n, comp, evs, xid, want) for comp, evs in sorted(by_comp.items())]


def _xid_verdict(
    n: GpuNode, comp: str, evs: list[XidEvent], xid: Mapping[str, Any], want: str
) -> Verdict:
    codes: Mapping[str, Mapping[str, Any]] = xid["codes"]
    counts = Counter(ev.xid for ev in evs)
    worst = "ignore"
    parts = []
    for code, cnt in sorted(counts.items()):
        entry = codes.get(str(code))
        action = str(entry["action"]) if entry else str(xid["unknown_action"])
        meaning = str(entry["meaning"]) if entry else "not in the profile's Xid table"
        parts.append(f"Xid {code} x{cnt} ({meaning}: {action})")
        worst = max(worst, action, key=lambda a: _RANK[a])
    got = ", ".join(f"{c}" for c in sorted(counts))
    return n.verdict(
        "gpu.xid",
        Status.PASS if worst == "ignore" else Status.FAIL,
        comp,
        got,
        want,
        "; ".join(parts),
        cmds=("kernel_log",),
        unit="Xid",
        remediation=ACTIONS[worst],
    )
