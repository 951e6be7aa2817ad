"""What every pcie_gpu check shares: GPU component names, per-GPU judging, command errors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from nodegate.core.checks import AnyCheck
from nodegate.core.remediation import tool_failure
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.stages.pcie_gpu.commands import NVSMI
from nodegate.stages.pcie_gpu.facts import PcieGpuFacts


def gpu_name(g: NvsmiGpu) -> str:
    """`GPU3 0000:5d:00.0 serial 1650124032506`: index, BDF and serial of one GPU."""
    parts = [f"GPU{g.index}", g.pci_bus_id or "bdf?"]
    if g.serial:
        parts.append(f"serial {g.serial}")
    return " ".join(parts)


def cmd_error(f: PcieGpuFacts, check: AnyCheck, component: str, expected: Any, cmd: str) -> Verdict:
    """Could not judge: the command's failure, never a pass; a known cause names its fix."""
    why = f.why(cmd)
    known = tool_failure(why)
    return error(
        check,
        f.node,
        component,
        why,
        expected=expected,
        evidence=f.evidence(cmd),
        remediation=known.remediation if known else None,
        remediation_class=known.remediation_class if known else None,
    )


def per_gpu(
    f: PcieGpuFacts, check: AnyCheck, expected: Any, one: Callable[[NvsmiGpu], Verdict]
) -> list[Verdict]:
    """`one` for every GPU nvidia-smi reported; ERROR when there is none to judge."""
    if f.nvsmi is None:
        return [cmd_error(f, check, "GPUs", expected, NVSMI)]
    out = [one(g) for g in f.gpus]
    if not out:
        none = error(
            check,
            f.node,
            "GPUs",
            "nvidia-smi reported no GPU",
            expected=expected,
            evidence=f.evidence(NVSMI),
        )
        out.append(replace(none, observed=0))  # it answered, listing zero GPUs
    return out
