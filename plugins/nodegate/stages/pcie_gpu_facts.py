"""What the pcie_gpu checks judge: one node's parsed GPU facts, and the verdict builder."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodegate.errors import ParseError
from nodegate.model import Status, Verdict
from nodegate.parsers.dcgm import DcgmDiag, parse_dcgmi_diag_json
from nodegate.parsers.fabricmanager import FabricManagerStatus, parse_fabricmanager_status
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.parsers.kernel_log import KernelLogEvents, parse_kernel_log
from nodegate.parsers.lspci import LspciReport, PciDevice, normalize_bdf, parse_lspci
from nodegate.parsers.nvlink import NvlinkStatus, parse_nvlink_status
from nodegate.parsers.nvsmi_text import NvsmiTextReport, parse_nvsmi_text
from nodegate.stages.base import OutcomeReader

STAGE = "pcie_gpu"
_BUS_RANGE = re.compile(r"^\s+Bus: primary=[0-9a-f]+, secondary=(\w+), subordinate=(\w+)")
_HEADER = re.compile(r"^(?P<bdf>\S+) ")
# `journalctl` prints this instead of lines when the window holds no kernel message.
NO_ENTRIES = "-- No entries --"


@dataclass(frozen=True, slots=True)
class Bridge:
    """A PCI bridge (root or switch port) with the bus range behind it."""

    device: PciDevice
    domain: str
    secondary: int
    subordinate: int


@dataclass(frozen=True, slots=True)
class LspciView:
    """lspci facts plus the bridges each device sits behind (from `Bus:` lines)."""

    report: LspciReport
    bridges: tuple[Bridge, ...]

    def device(self, bdf: str) -> PciDevice | None:
        return next((d for d in self.report.devices if d.bdf == bdf), None)

    def path_to(self, bdf: str) -> tuple[Bridge, ...]:
        """Bridges above `bdf`, root port first (the narrower bus range is further down)."""
        dom, bus = bdf[:4], int(bdf[5:7], 16)
        above = [b for b in self.bridges if b.domain == dom and b.secondary <= bus <= b.subordinate]
        return tuple(sorted(above, key=lambda b: (b.subordinate - b.secondary, b.secondary))[::-1])


def parse_lspci_view(text: str) -> LspciView:
    """`lspci -vvv` -> devices and the bus ranges of their bridges."""
    report = parse_lspci(text)
    ranges: dict[str, tuple[int, int]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            m = _HEADER.match(line)
            current = normalize_bdf(m["bdf"]) if m else None
        elif current and (bm := _BUS_RANGE.match(line)):
            ranges[current] = (int(bm[1], 16), int(bm[2], 16))
    bridges = tuple(Bridge(d, d.bdf[:4], *ranges[d.bdf]) for d in report.devices if d.bdf in ranges)
    return LspciView(report, bridges)


def parse_kernel_window(text: str) -> KernelLogEvents:
    """The kernel log of the window; an empty window is no events, not an unknown output."""
    body = text.strip()
    if not body or body == NO_ENTRIES:
        return KernelLogEvents((), (), (), (), (), (), 0)
    return parse_kernel_log(text)


@dataclass
class GpuNode:
    """One node's pcie_gpu facts; a None fact has its reason in `errors[cmd_id]`."""

    node: str
    prof: Mapping[str, Any]
    facts: OutcomeReader
    nvsmi: NvsmiTextReport | None = None
    lspci: LspciView | None = None
    nvlink: NvlinkStatus | None = None
    klog: KernelLogEvents | None = None
    fm: FabricManagerStatus | None = None
    dcgm: DcgmDiag | None = None
    dcgm_rc: int | None = None
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> tuple[NvsmiGpu, ...]:
        return self.nvsmi.gpus if self.nvsmi is not None else ()

    def why(self, cmd_id: str) -> str:
        return self.facts.errors.get(cmd_id, f"no usable output of {cmd_id}")

    def verdict(
        self,
        check: str,
        status: Status,
        component: str,
        observed: Any,
        expected: Any,
        message: str,
        *,
        cmds: tuple[str, ...],
        unit: str | None = None,
        remediation: str | None = None,
    ) -> Verdict:
        return Verdict(
            check,
            self.node,
            status,
            component,
            observed,
            expected,
            unit=unit,
            message=message,
            remediation=remediation if status is Status.FAIL else None,
            evidence=self.facts.evidence(*cmds),
        )

    def error(self, check: str, component: str, expected: Any, cmd: str) -> Verdict:
        """Could not judge: the command's failure, never a pass."""
        return self.verdict(
            check, Status.ERROR, component, None, expected, self.why(cmd), cmds=(cmd,)
        )


def gpu_name(g: NvsmiGpu) -> str:
    """`GPU3 0000:5d:00.0 serial 1650124032506`: index, BDF and serial of one GPU."""
    parts = [f"GPU{g.index}", g.pci_bus_id or "bdf?"]
    if g.serial:
        parts.append(f"serial {g.serial}")
    return " ".join(parts)


def gpu_by_bdf(node: GpuNode, bdf: str) -> NvsmiGpu | None:
    return next((g for g in node.gpus if g.pci_bus_id == bdf), None)


def gather(node: str, prof: Mapping[str, Any], facts: OutcomeReader) -> GpuNode:
    """Parse every command of the stage for one node."""
    out = GpuNode(node, prof, facts)
    out.nvsmi = facts.parse("nvsmi", parse_nvsmi_text, absent_rcs=(127,))
    if out.nvsmi is not None and out.nvsmi.fragment:
        facts.errors["nvsmi"] = "`nvidia-smi -q` printed no `GPU <bus id>` block"
        out.nvsmi = None
    out.lspci = facts.parse("lspci", parse_lspci_view, absent_rcs=(127,))
    out.nvlink = facts.parse("nvlink", parse_nvlink_status, absent_rcs=(127,))
    out.klog = facts.parse("kernel_log", parse_kernel_window, absent_rcs=(127,))
    if prof["fabric"]["manager"]:
        out.fm = _fm(facts)
    out.dcgm, out.dcgm_rc = _dcgm(facts)
    return out


def _fm(facts: OutcomeReader) -> FabricManagerStatus | None:
    # `systemctl status` exits 3 for an inactive unit and 4 for an unknown one, with the
    # status text on stdout either way: judge the text, not the exit code.
    r = facts.result("fabricmanager")
    if r is None or r.timed_out or r.rc not in (0, 3, 4):
        return facts.parse("fabricmanager", parse_fabricmanager_status)
    try:
        return parse_fabricmanager_status(r.stdout or r.stderr)
    except ParseError as exc:
        facts.errors["fabricmanager"] = f"unrecognized output of `{r.cmd}`: {exc.reason}"
        return None


def _dcgm(facts: OutcomeReader) -> tuple[DcgmDiag | None, int | None]:
    # dcgmi exits non-zero (226) when a test fails, with the full JSON document on stdout.
    r = facts.result("dcgm")
    if r is None or r.timed_out or r.rc == 127 or not r.stdout.strip():
        return facts.parse("dcgm", parse_dcgmi_diag_json, absent_rcs=(127,)), None
    try:
        return parse_dcgmi_diag_json(r.stdout), r.rc
    except ParseError as exc:
        facts.errors["dcgm"] = f"unrecognized output of `{r.cmd}` (rc {r.rc}): {exc.reason}"
        return None, r.rc
