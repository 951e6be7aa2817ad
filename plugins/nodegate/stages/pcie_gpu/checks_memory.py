"""pcie_gpu checks on GPU memory health: ECC mode and errors, row remapping, retired pages."""

from __future__ import annotations

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Verdict
from nodegate.core.verdicts import against, error, judged
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.stages.pcie_gpu.commands import NVSMI
from nodegate.stages.pcie_gpu.facts import PcieGpuFacts
from nodegate.stages.pcie_gpu.judging import gpu_name, per_gpu
from nodegate.stages.pcie_gpu.profile import PcieGpuProfile

REMAP_OK = "pending No, failure No"


def check_ecc_mode(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.ecc.mode: ECC current and pending mode as the profile wants."""
    want = p.ecc_enabled
    label = "Enabled" if want else "Disabled"
    ev = f.evidence(NVSMI)

    def one(g: NvsmiGpu) -> Verdict:
        mode = g.ecc.mode if g.ecc is not None else None
        if mode is None or (mode.current is None and mode.current_raw is None):
            return error(
                check,
                f.node,
                gpu_name(g),
                "no ECC mode in nvidia-smi -q",
                expected=label,
                evidence=ev,
            )
        ok = mode.current is want and mode.pending in (want, None)
        return judged(
            check,
            f.node,
            ok,
            gpu_name(g),
            mode.current_raw or str(mode.current),
            label,
            f"ECC current {mode.current_raw}, pending {mode.pending_raw}",
            remediation=f"set ECC {label.lower()} (nvidia-smi -i {g.index} -e "
            f"{int(want)}) and reset the GPU; 'Unknown Error' after an Xid 48 needs a reset",
            evidence=ev,
        )

    return per_gpu(f, check, label, one)


def check_ecc_uncorrectable(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.ecc.uncorrectable: volatile uncorrectable ECC errors at most the profile's maximum."""
    limit = p.ecc_volatile_uncorrectable
    ev = f.evidence(NVSMI)

    def one(g: NvsmiGpu) -> Verdict:
        vol = g.ecc.volatile if g.ecc is not None else None
        if vol is None or vol.uncorrectable is None:
            return error(
                check,
                f.node,
                gpu_name(g),
                "no volatile uncorrectable ECC count",
                expected=limit.expected(),
                evidence=ev,
            )
        got = vol.uncorrectable
        fields = ", ".join(f"{k} {v}" for k, v in sorted(vol.fields.items()) if v)
        return against(
            check,
            f.node,
            gpu_name(g),
            got,
            limit,
            f"{got} volatile uncorrectable ECC errors" + (f" ({fields})" if fields else ""),
            remediation="drain; reset the GPU so the row remapper applies, then requalify; "
            "RMA if it repeats",
            evidence=ev,
        )

    return per_gpu(f, check, limit.expected(), one)


def check_remap(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.remap: no row remap pending (needs reset) and no remapping failure (needs RMA)."""
    ev = f.evidence(NVSMI)

    def one(g: NvsmiGpu) -> Verdict:
        rr = g.remapped_rows
        if rr is None or (rr.pending is None and rr.failure is None):
            if p.row_remap_required:
                return error(
                    check,
                    f.node,
                    gpu_name(g),
                    "no row remapper state in nvidia-smi",
                    expected=REMAP_OK,
                    evidence=ev,
                )
            return judged(
                check,
                f.node,
                True,
                gpu_name(g),
                "n/a",
                "n/a",
                "no row remapper (pre-Ampere): see gpu.retired_pages",
                evidence=ev,
            )
        got = f"pending {_yn(rr.pending)}, failure {_yn(rr.failure)}"
        if rr.failure:
            fix = "row remapping failed: drain the node and RMA the GPU"
        elif rr.pending:
            fix = "drain and reset the GPU to apply the pending row remap, then requalify"
        else:
            fix = None
        return judged(
            check,
            f.node,
            fix is None,
            gpu_name(g),
            got,
            REMAP_OK,
            f"remapped rows: uncorrectable {rr.uncorrectable}, correctable {rr.correctable}, {got}",
            remediation=fix,
            evidence=ev,
        )

    return per_gpu(f, check, REMAP_OK, one)


def _yn(v: bool | None) -> str:
    return "?" if v is None else ("Yes" if v else "No")


def check_retired_pages(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.retired_pages: (pre-Ampere) retired pages under NVIDIA's limit, none pending."""
    limit = p.retired_pages
    ev = f.evidence(NVSMI)

    def one(g: NvsmiGpu) -> Verdict:
        rp = g.retired_pages
        counts = (rp.single_bit_count, rp.double_bit_count) if rp is not None else (None, None)
        if rp is None or (counts == (None, None) and rp.pending is None):
            if g.remapped_rows is not None and g.remapped_rows.pending is not None:
                return judged(
                    check,
                    f.node,
                    True,
                    gpu_name(g),
                    "n/a",
                    "n/a",
                    "no page retirement: this GPU remaps rows (gpu.remap)",
                    evidence=ev,
                )
            return error(
                check,
                f.node,
                gpu_name(g),
                "neither retired pages nor remapped rows reported",
                expected=limit.expected(),
                evidence=ev,
            )
        total = sum(c or 0 for c in counts)
        return judged(
            check,
            f.node,
            limit.holds(total) and not rp.pending,
            gpu_name(g),
            total,
            f"{limit.expected()}, none pending",
            f"retired pages SBE {counts[0]}, DBE {counts[1]}, pending {_yn(rp.pending)}",
            unit=limit.unit,
            reference=limit,
            remediation="pending retirement: reset the GPU; at the limit: RMA the GPU",
            evidence=ev,
        )

    return per_gpu(f, check, limit.expected(), one)
