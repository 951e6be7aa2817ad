"""Where each present HCA sits in the profile (a rail, another role, or nowhere) and how
verdicts name it: `mlx5_4 (rail 4)`, `mlx5_bond_0 (frontend)`, `mlx5_4 port 1 (rail 4)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error
from nodegate.parsers.ib_sysfs import IbSysfsDevice
from nodegate.stages.hca.commands import SYSFS
from nodegate.stages.hca.facts import HcaFacts
from nodegate.stages.hca.profile import COMPUTE, HcaProfile, Rail


@dataclass(frozen=True, slots=True)
class Placement:
    """One present device with its role (`compute` for rails; None when it matches none)."""

    device: IbSysfsDevice
    role: str | None
    rail: Rail | None

    @property
    def label(self) -> str:
        return device_label(self.device.name, self.rail, self.role)


def device_label(name: str, rail: Rail | None, role: str | None) -> str:
    """`mlx5_4 (rail 4)`, `mlx5_bond_0 (frontend)`, `mlx5_9 (no role)`."""
    if rail is not None:
        return f"{name} (rail {rail.rail})"
    return f"{name} ({role or 'no role'})"


def rail_label(rail: Rail) -> str:
    """`mlx5_4 (rail 4)`."""
    return device_label(rail.device, rail, COMPUTE)


def port_label(name: str, port: int, rail: Rail) -> str:
    """`mlx5_4 port 1 (rail 4)`."""
    return f"{name} port {port} (rail {rail.rail})"


def pci_id(f: HcaFacts, dev: str) -> str | None:
    link = f.pci.get(dev)
    return None if link is None else link.pci_id


def placements(f: HcaFacts, prof: HcaProfile) -> list[Placement]:
    """Every present device with its rail/role; a non-rail device takes the first role it
    matches by PCI id and PSID (roles in profile order)."""
    if f.sysfs is None:
        return []
    rails = {r.device: r for r in prof.rails}
    out = []
    for d in f.sysfs.devices:
        if d.name in rails:
            out.append(Placement(d, COMPUTE, rails[d.name]))
            continue
        role = next((r.name for r in prof.others if r.matches(pci_id(f, d.name), d.board_id)), None)
        out.append(Placement(d, role, None))
    return out


def no_sysfs(check: AnyCheck, f: HcaFacts) -> list[Verdict]:
    """ERROR: the sysfs listing, which every HCA check reads, is not there."""
    why = f.errors.get(SYSFS, "no /sys/class/infiniband listing")
    return [error(check, f.node, "hca", why, evidence=f.ev(SYSFS))]
