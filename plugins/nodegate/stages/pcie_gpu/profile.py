"""The typed `pcie_gpu` section of a profile, built once from the schema-validated mapping.

>>> pcie_gpu_profile(prof).pcie_width.holds(16)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, cast

from nodegate.core.thresholds import Threshold
from nodegate.core.versions import VersionRule
from nodegate.profiles import Profile

SECTION = "pcie_gpu"
XidAction = Literal["ignore", "reset", "reboot", "drain_rma"]
# Mildest first: a GPU's Xid verdict takes the most severe action among its codes.
XID_ACTIONS: tuple[XidAction, ...] = ("ignore", "reset", "reboot", "drain_rma")


@dataclass(frozen=True, slots=True)
class XidRule:
    """What one Xid code means and what it asks of the operator."""

    meaning: str
    action: XidAction


@dataclass(frozen=True, slots=True)
class XidTable:
    """Xid codes (NVIDIA's catalogue, via `extends: _nvidia-xid`) and the kernel-log window."""

    window_hours: int
    unknown_action: XidAction
    codes: Mapping[int, XidRule]

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> XidTable:
        codes = {
            int(code): XidRule(str(e["meaning"]), cast(XidAction, e["action"]))
            for code, e in doc["codes"].items()
        }
        return cls(
            int(doc["window_hours"]),
            cast(XidAction, doc["unknown_action"]),
            MappingProxyType(dict(sorted(codes.items()))),
        )

    def action(self, code: int) -> tuple[XidAction, str]:
        """(action, meaning) of one Xid code; unknown codes take `unknown_action`."""
        rule = self.codes.get(code)
        if rule is None:
            return self.unknown_action, "not in the profile's Xid table"
        return rule.action, rule.meaning


@dataclass(frozen=True, slots=True)
class SxidTable:
    """NVSwitch SXid codes (the fabric manager guide's catalogue, via `extends: _nvidia-xid`).

    The driver logs each SXid as `Non-fatal` or `Fatal`; a Fatal one needs at least
    `fatal_action` whatever its code's row says.
    """

    fatal_action: XidAction
    unknown_action: XidAction
    codes: Mapping[int, XidRule]

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> SxidTable:
        codes = {
            int(code): XidRule(str(e["meaning"]), cast(XidAction, e["action"]))
            for code, e in doc["codes"].items()
        }
        return cls(
            cast(XidAction, doc["fatal_action"]),
            cast(XidAction, doc["unknown_action"]),
            MappingProxyType(dict(sorted(codes.items()))),
        )

    def action(self, code: int, fatal: bool) -> tuple[XidAction, str]:
        """(action, meaning) of one SXid code; `fatal`: the driver logged it as Fatal."""
        rule = self.codes.get(code)
        action = rule.action if rule else self.unknown_action
        if fatal:
            action = max(action, self.fatal_action, key=XID_ACTIONS.index)
        return action, rule.meaning if rule else "not in the profile's SXid table"


@dataclass(frozen=True, slots=True)
class NvlinkSpec:
    """NVLink per GPU: how many links (`{equal: 18}`) and each link's speed (`{min: 26.562}`)."""

    links_per_gpu: Threshold
    speed: Threshold


@dataclass(frozen=True, slots=True)
class DcgmSettings:
    """How `dcgmi diag` runs (level, deadline) and what it may answer."""

    level: int
    timeout_s: float
    required: bool
    allow_warn: bool


@dataclass(frozen=True, slots=True)
class PcieGpuProfile:
    """What a good node's GPUs look like, per `schemas/profile.pcie_gpu.schema.json`."""

    gpu_count: Threshold
    pci_device_ids: tuple[str, ...]
    driver: VersionRule
    pcie_gen: Threshold
    pcie_width: Threshold
    switch_ports: bool  # judge the bridges above each GPU (a VM hides them)
    # From this performance state on a GPU is idle: its link may run below Max (PCIe cards).
    pcie_idle_pstate: Threshold | None
    ecc_enabled: bool
    ecc_volatile_uncorrectable: Threshold
    row_remap_required: bool
    retired_pages: Threshold
    xid: XidTable
    sxid: SxidTable
    nvlink: NvlinkSpec | None  # None: the SKU has no NVLink
    fabric_manager: bool
    # Hopper and later report each GPU's fabric state; Ampere prints it N/A.
    fabric_per_gpu_state: bool
    clock_fail_reasons: tuple[str, ...]
    persistence_mode: bool
    dcgm: DcgmSettings

    @classmethod
    def of(cls, sec: Mapping[str, Any]) -> PcieGpuProfile:
        """From the validated `pcie_gpu` section of a profile."""

        def th(*path: str) -> Threshold:
            doc: Any = sec
            for key in path:
                doc = doc[key]
            return Threshold.from_profile(doc, ".".join(("pcie_gpu", *path)))

        nvl, dcgm = sec["nvlink"], sec["dcgm"]
        return cls(
            gpu_count=th("gpu", "count"),
            pci_device_ids=tuple(str(x).lower() for x in sec["gpu"]["pci_device_ids"]),
            driver=VersionRule.of(sec["driver"]),
            pcie_gen=th("pcie", "gen"),
            pcie_width=th("pcie", "width"),
            switch_ports=bool(sec["pcie"]["switch_ports"]),
            pcie_idle_pstate=None
            if sec["pcie"].get("idle_pstate") is None
            else th("pcie", "idle_pstate"),
            ecc_enabled=bool(sec["ecc"]["enabled"]),
            ecc_volatile_uncorrectable=th("ecc", "volatile_uncorrectable"),
            row_remap_required=bool(sec["row_remap"]["required"]),
            retired_pages=th("retired_pages", "total"),
            xid=XidTable.of(sec["xid"]),
            sxid=SxidTable.of(sec["sxid"]),
            nvlink=None
            if nvl is None
            else NvlinkSpec(th("nvlink", "links_per_gpu"), th("nvlink", "speed")),
            fabric_manager=bool(sec["fabric"]["manager"]),
            fabric_per_gpu_state=bool(sec["fabric"]["per_gpu_state"]),
            clock_fail_reasons=tuple(str(r) for r in sec["clocks"]["fail_reasons"]),
            persistence_mode=bool(sec["persistence_mode"]),
            dcgm=DcgmSettings(
                int(dcgm["level"]),
                float(dcgm["timeout_s"]),
                bool(dcgm["required"]),
                bool(dcgm["allow_warn"]),
            ),
        )


def pcie_gpu_profile(profile: Profile) -> PcieGpuProfile:
    """The typed `pcie_gpu` section of a profile, built once per profile."""
    return profile.typed(SECTION, PcieGpuProfile.of)
