"""Facts of the `hca` stage for one node, and how HCAs map to rails and roles of the profile.

Pure data: the stage gathers and parses (nodegate.stages.hca), the checks judge
(nodegate.stages.hca_checks). Unit tests build HcaFacts directly.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodegate.model import Status, Verdict
from nodegate.parsers.ib_pci import IbPciLink
from nodegate.parsers.ib_sysfs import IbSysfs, IbSysfsDevice
from nodegate.parsers.mlxlink import MlxlinkReport
from nodegate.parsers.topo import TopoMatrix

# Command ids (stable: they name the evidence files raw/<node>/hca/<id>.json).
SYSFS = "ib_sysfs"
PCI = "ib_pci"  # not a command: parse errors of the PCI lines of SYSFS
# Reason recorded for SYSFS when the node has no RDMA device at all (a FAIL, not an ERROR).
NO_DEVICES = "no RDMA device under /sys/class/infiniband"
SLEEP = "counter_window"
SYSFS_AGAIN = "ib_sysfs_again"
TOPO = "topo"
PEERMEM = "peermem"
DRIVER = "nvidia_driver"
KERNEL = "kernel"


def mlxlink_id(device: str) -> str:
    """Command id of `mlxlink -d <device>` (ids are [A-Za-z0-9_.:-]+)."""
    return "mlxlink_" + re.sub(r"[^A-Za-z0-9_.:-]", "_", device)


@dataclass(frozen=True)
class HcaFacts:
    """Everything parsed for one node; a None fact has its reason in `errors[cmd id]`."""

    node: str
    sysfs: IbSysfs | None
    pci: Mapping[str, IbPciLink]
    sysfs_again: IbSysfs | None
    topo: TopoMatrix | None
    peermem_live: bool | None
    driver_open_module: bool | None
    kernel: str | None
    mlxlink: Mapping[str, MlxlinkReport] = field(default_factory=dict)  # rail device -> report
    errors: Mapping[str, str] = field(default_factory=dict)
    evidence: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def ev(self, *cmd_ids: str) -> tuple[str, ...]:
        return tuple(e for c in cmd_ids for e in self.evidence.get(c, ()))

    def device(self, name: str) -> IbSysfsDevice | None:
        if self.sysfs is None:
            return None
        return next((d for d in self.sysfs.devices if d.name == name), None)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one present HCA sits in the profile: a rail, another role, or nowhere."""

    device: IbSysfsDevice
    role: str | None  # 'compute' for rails; None when it matches no role
    rail: Mapping[str, Any] | None

    @property
    def label(self) -> str:
        return device_label(self.device.name, self.rail, self.role)


def device_label(name: str, rail: Mapping[str, Any] | None, role: str | None) -> str:
    """`mlx5_4 (rail 4)`, `mlx5_bond_0 (frontend)`, `mlx5_9 (no role)`."""
    if rail is not None:
        return f"{name} (rail {rail['rail']})"
    return f"{name} ({role or 'no role'})"


def port_label(name: str, port: int, rail: Mapping[str, Any]) -> str:
    """`mlx5_4 port 1 (rail 4)`."""
    return f"{name} port {port} (rail {rail['rail']})"


def pci_id(f: HcaFacts, dev: str) -> str | None:
    link = f.pci.get(dev)
    return None if link is None else link.pci_id


def matches(role: Mapping[str, Any], pci: str | None, psid: str | None) -> bool:
    """PCI id listed and PSID matching one of the role's PSID globs."""
    if pci not in role["pci_ids"] or psid is None:
        return False
    return any(fnmatch.fnmatchcase(psid, g) for g in role["psids"])


def firmware_rule(prof: Mapping[str, Any], psid: str | None) -> Mapping[str, Any] | None:
    """The firmware rule of a PSID; the `*` entry covers PSIDs the profile does not list."""
    rules = prof["firmware"]
    rule = rules.get(psid or "") or rules.get("*")
    return rule if isinstance(rule, Mapping) else None


def placements(f: HcaFacts, prof: Mapping[str, Any]) -> list[Placement]:
    """Every present device with its rail/role; a non-rail device takes the first role it
    matches by PCI id and PSID (roles in profile order)."""
    if f.sysfs is None:
        return []
    rails = {r["device"]: r for r in prof["rails"]}
    out = []
    for d in f.sysfs.devices:
        if d.name in rails:
            out.append(Placement(d, "compute", rails[d.name]))
            continue
        role = next(
            (
                name
                for name, spec in prof["roles"].items()
                if name != "compute" and matches(spec, pci_id(f, d.name), d.board_id)
            ),
            None,
        )
        out.append(Placement(d, role, None))
    return out


def role_spec(prof: Mapping[str, Any], role: str | None) -> Mapping[str, Any] | None:
    if role is None:
        return None
    spec = prof["roles"].get(role)
    return spec if isinstance(spec, Mapping) else None


def verdict(
    check: str,
    f: HcaFacts,
    ok: bool,
    component: str,
    observed: Any,
    expected: Any,
    message: str,
    *,
    unit: str | None = None,
    remediation: str | None = None,
    evidence: tuple[str, ...] = (),
) -> Verdict:
    """PASS or FAIL; the remediation only on a failure."""
    return Verdict(
        check,
        f.node,
        Status.PASS if ok else Status.FAIL,
        component,
        observed,
        expected,
        unit=unit,
        message=message,
        remediation=None if ok else remediation,
        evidence=evidence,
    )


def error(
    check: str, f: HcaFacts, component: str, message: str, evidence: tuple[str, ...] = ()
) -> Verdict:
    return Verdict(check, f.node, Status.ERROR, component, message=message, evidence=evidence)
