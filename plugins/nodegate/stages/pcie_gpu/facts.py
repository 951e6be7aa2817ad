"""One node's pcie_gpu facts, read through the parsers; a None fact has its reason in `errors`."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from nodegate.core.errors import ParseError
from nodegate.core.values import NodeOutcome
from nodegate.framework.stage import OutcomeReader
from nodegate.parsers.dcgm import DcgmDiag, parse_dcgmi_diag
from nodegate.parsers.dcgm_json import parse_dcgmi_diag_json
from nodegate.parsers.fabricmanager import FabricManagerStatus, parse_fabricmanager_status
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.parsers.journalctl import parse_kernel_window
from nodegate.parsers.kernel_log import KernelLogEvents
from nodegate.parsers.lspci_bridges import LspciView, parse_lspci_view
from nodegate.parsers.nvlink import NvlinkStatus, parse_nvlink_status
from nodegate.parsers.nvsmi_text import NvsmiTextReport, parse_nvsmi_text
from nodegate.stages.pcie_gpu.commands import DCGM, FABRICMANAGER, KERNEL_LOG, LSPCI, NVLINK, NVSMI
from nodegate.stages.pcie_gpu.profile import PcieGpuProfile

STAGE_NAME = "pcie_gpu"
NOT_INSTALLED = 127  # the shell's "command not found"
# nvidia-smi exits 6 (NVML_ERROR_NOT_FOUND) with "No devices were found" when it sees no GPU.
NVSMI_NO_DEVICES = 6
# `systemctl status` exits 3 for an inactive unit and 4 for an unknown one, with the status
# text on stdout (or stderr, for an unknown unit) either way: the text is the answer.
SYSTEMCTL_STATUS_RCS = (0, 3, 4)


@dataclass(frozen=True, slots=True)
class PcieGpuFacts:
    """What the pcie_gpu checks judge on one node."""

    node: str
    nvsmi: NvsmiTextReport | None
    nvsmi_no_devices: bool  # nvidia-smi answered "No devices were found"
    lspci: LspciView | None
    nvlink: NvlinkStatus | None
    klog: KernelLogEvents | None
    fm: FabricManagerStatus | None  # None too when the profile has no fabric manager
    dcgm: DcgmDiag | None
    dcgm_rc: int | None  # dcgmi's exit status when its document was read (226: a test failed)
    errors: Mapping[str, str]  # command id -> why its fact is None
    evidence_of: Mapping[str, str]  # command id -> its raw evidence path

    @property
    def gpus(self) -> tuple[NvsmiGpu, ...]:
        return self.nvsmi.gpus if self.nvsmi is not None else ()

    def why(self, cmd_id: str) -> str:
        return self.errors.get(cmd_id, f"no usable output of {cmd_id}")

    def absent(self, cmd_id: str) -> bool:
        """The command's tool is not installed (exit 127)."""
        return self.errors.get(cmd_id, "").startswith("absent:")

    def evidence(self, *cmd_ids: str) -> tuple[str, ...]:
        return tuple(self.evidence_of[c] for c in cmd_ids if c in self.evidence_of)

    def gpu_by_bdf(self, bdf: str) -> NvsmiGpu | None:
        return next((g for g in self.gpus if g.pci_bus_id == bdf), None)


def build_facts(outcome: NodeOutcome, profile: PcieGpuProfile) -> PcieGpuFacts:
    """Parse every command of the stage for one reachable node."""
    reader = OutcomeReader(STAGE_NAME, outcome)
    nvsmi = reader.parse(NVSMI, parse_nvsmi_text, absent_rcs=(NOT_INSTALLED,))
    if nvsmi is not None and nvsmi.fragment:
        reader.errors[NVSMI] = "`nvidia-smi -q` printed no `GPU <bus id>` block"
        nvsmi = None
    res = reader.result(NVSMI)
    lspci = reader.parse(LSPCI, parse_lspci_view, absent_rcs=(NOT_INSTALLED,))
    nvlink = reader.parse(NVLINK, parse_nvlink_status, absent_rcs=(NOT_INSTALLED,))
    klog = reader.parse(KERNEL_LOG, parse_kernel_window, absent_rcs=(NOT_INSTALLED,))
    fm = _fabric_manager(reader) if profile.fabric_manager else None
    dcgm = _dcgm(reader)
    dcgm_res = reader.result(DCGM)
    return PcieGpuFacts(
        node=outcome.node,
        nvsmi=nvsmi,
        nvsmi_no_devices=nvsmi is None and res is not None and res.rc == NVSMI_NO_DEVICES,
        lspci=lspci,
        nvlink=nvlink,
        klog=klog,
        fm=fm,
        dcgm=dcgm,
        dcgm_rc=dcgm_res.rc if dcgm is not None and dcgm_res is not None else None,
        errors=MappingProxyType(dict(reader.errors)),
        evidence_of=MappingProxyType(
            {c: r.evidence for c, r in outcome.results.items() if r.evidence}
        ),
    )


def _fabric_manager(reader: OutcomeReader) -> FabricManagerStatus | None:
    """`systemctl status nvidia-fabricmanager`: its text, whatever the unit's state."""
    r = reader.result(FABRICMANAGER)
    if r is None or r.timed_out or r.truncated or r.rc not in SYSTEMCTL_STATUS_RCS:
        return reader.parse(FABRICMANAGER, parse_fabricmanager_status)
    try:
        return parse_fabricmanager_status(r.stdout or r.stderr)
    except ParseError as exc:
        reader.errors[FABRICMANAGER] = f"unrecognized output of `{r.cmd}`: {exc.reason}"
        return None


def _dcgm(reader: OutcomeReader) -> DcgmDiag | None:
    """`dcgmi diag -j`: it exits non-zero (226) when a test fails, with the whole JSON document;
    a text table in its place is read by the text parser (the fallback when -j is not honoured)."""
    r = reader.result(DCGM)
    if r is None or r.timed_out or r.truncated or r.rc == NOT_INSTALLED or not r.stdout.strip():
        return reader.parse(DCGM, parse_dcgmi_diag_json, absent_rcs=(NOT_INSTALLED,))
    try:
        return parse_dcgmi_diag_json(r.stdout)
    except ParseError as exc:
        if not r.stdout.lstrip().startswith(("{", "[")):
            # A text table where JSON was asked for (a dcgmi or a wrapper that does not honour
            # -j): the text parser reads the same results, or the JSON reason stands.
            with contextlib.suppress(ParseError):
                return parse_dcgmi_diag(r.stdout)
        reader.errors[DCGM] = f"unrecognized output of `{r.cmd}` (rc {r.rc}): {exc.reason}"
        return None
