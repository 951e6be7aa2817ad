"""The `hca` section of a profile, typed once: roles, rails, firmware rules and thresholds.

Built from the schema-validated section (`HcaProfile.of(section, name)`); checks read these
fields and ask thresholds `holds(observed)`, never the section's keys. Other stages reach the
rail map through `hca_profile(profile).rails` (ib_pairs: device, GPU and NUMA node per rail).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from functools import partial
from types import MappingProxyType
from typing import Any

from nodegate.core.thresholds import Threshold
from nodegate.core.versions import VersionRule
from nodegate.profiles import Profile

SECTION = "hca"
COMPUTE = "compute"  # the role of the rail HCAs (those the profile's `rails` name)


def show_expected(t: Threshold, fmt: Callable[[Any], str] | None = None) -> Any:
    """What a verdict shows as expected: an `equal` threshold's value as is (`400`, `NDR`),
    other directions as `t.expected()`; `fmt` writes values like the observation.

    >>> show_expected(Threshold("equal", 5), lambda v: f"Gen{v}")
    'Gen5'
    >>> show_expected(Threshold("min", 4))
    '>= 4'
    """
    if fmt is None:
        return t.value if t.direction == "equal" else t.expected()
    if t.direction == "one_of":
        return replace(t, value=tuple(fmt(v) for v in t.value)).expected()
    return replace(t, value=fmt(t.value)).expected()


@dataclass(frozen=True, slots=True)
class Rail:
    """Rail `rail`: RDMA device `device` serves `gpu` (nvidia-smi topo -m name, `GPU4`);
    `numa_node` None = NUMA placement not judged."""

    rail: int
    device: str
    gpu: str
    numa_node: int | None

    @property
    def gpu_index(self) -> int | None:
        """4 for `GPU4` (for `--use_cuda`)."""
        digits = self.gpu[3:]
        return int(digits) if digits.isdigit() else None

    @property
    def numa(self) -> Threshold | None:
        """The NUMA node the rail's HCA must sit on; None when not judged."""
        return None if self.numa_node is None else Threshold("equal", self.numa_node)


@dataclass(frozen=True, slots=True)
class CountRule:
    """How many HCAs of a role: exact (`{equal: 1}`) or a range (`{min: 0, max: 1}`, `0..1`)."""

    bounds: tuple[Threshold, ...]
    unit: str | None

    @classmethod
    def of(cls, doc: Mapping[str, Any], where: str) -> CountRule:
        unit = None if doc.get("unit") is None else str(doc["unit"])
        if "min" in doc and "max" in doc:
            lo = Threshold.from_profile({"min": doc["min"]}, where)
            hi = Threshold.from_profile({"max": doc["max"]}, where)
            return cls((lo, hi), unit)
        return cls((Threshold.from_profile(doc, where),), unit)

    def holds(self, count: int) -> bool:
        return all(t.holds(count) for t in self.bounds)

    def expected(self) -> Any:
        """`1` for an exact count, `0..1` for a range."""
        if len(self.bounds) == 2:
            return f"{self.bounds[0].value}..{self.bounds[1].value}"
        return show_expected(self.bounds[0])


@dataclass(frozen=True, slots=True)
class PortRule:
    """What every port of a rail HCA reads when healthy. `state` is compared upper-case
    (sysfs prints `ACTIVE`)."""

    state: Threshold
    phys_state: Threshold
    width_lanes: Threshold
    speed: Threshold
    rate_gbps: Threshold


@dataclass(frozen=True, slots=True)
class PcieRule:
    gen: Threshold
    width_lanes: Threshold


@dataclass(frozen=True, slots=True)
class Role:
    """A kind of HCA: the compute rails, or storage/front-end HCAs matched by PCI id and PSID.

    `pcie` None: the PCIe link is not judged (a VF in a VM has none of its own).
    """

    name: str
    pci_ids: tuple[str, ...]
    psids: tuple[str, ...]  # shell-style globs
    pcie: PcieRule | None
    link_layer: Threshold | None

    def matches(self, pci_id: str | None, psid: str | None) -> bool:
        """PCI id listed and PSID matching one of the role's globs."""
        if pci_id not in self.pci_ids or psid is None:
            return False
        return any(fnmatch.fnmatchcase(psid, g) for g in self.psids)


@dataclass(frozen=True, slots=True)
class ComputeRole(Role):
    """The rail HCAs (counted against `rails`) and what each of their ports reads."""

    link_layer: Threshold
    port: PortRule


@dataclass(frozen=True, slots=True)
class CountedRole(Role):
    """A non-rail role (storage, front-end) with how many of it a node has."""

    count: CountRule


@dataclass(frozen=True, slots=True)
class CounterRule:
    """Error counters read twice `window_s` apart: deltas judged, absolute values warn only."""

    window_s: float
    max_delta: Mapping[str, Threshold]
    warn_absolute: Mapping[str, Threshold]


@dataclass(frozen=True, slots=True)
class GpuDirectRule:
    accept: Threshold  # one_of: peermem, dmabuf
    dmabuf_kernel: VersionRule  # DMA-BUF needs at least this kernel


@dataclass(frozen=True, slots=True)
class LinkHealthRule:
    """mlxlink per rail: BER after and before FEC, transceiver fault flags."""

    required: bool  # False: a node without mlxlink passes with a note
    effective_ber: Threshold
    raw_ber: Threshold
    fault_flags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HcaProfile:
    """A profile's `hca` section, typed; `name` groups nodes for firmware uniformity."""

    name: str
    compute: ComputeRole
    others: tuple[
        CountedRole, ...
    ]  # non-rail roles, in profile order (a device takes the first match)
    rails: tuple[Rail, ...]
    firmware: Mapping[str, VersionRule]  # PSID -> rule; '*' covers PSIDs not listed
    uniform_firmware: bool
    counters: CounterRule
    gpudirect: GpuDirectRule
    affinity: Threshold  # one_of: topo -m relations accepted between a rail HCA and its GPU
    link_health: LinkHealthRule | None  # None: mlxlink not run

    @classmethod
    def of(cls, sec: Mapping[str, Any], name: str) -> HcaProfile:
        where = f"profile {name}: hca"
        roles = sec["roles"]
        return cls(
            name=name,
            compute=_compute(roles[COMPUTE], f"{where}.roles.{COMPUTE}"),
            others=tuple(
                _counted(r, spec, f"{where}.roles.{r}") for r, spec in roles.items() if r != COMPUTE
            ),
            rails=tuple(
                Rail(int(r["rail"]), str(r["device"]), str(r["gpu"]), r["numa_node"])
                for r in sec["rails"]
            ),
            firmware=MappingProxyType({k: VersionRule.of(v) for k, v in sec["firmware"].items()}),
            uniform_firmware=bool(sec["uniform_firmware"]),
            counters=CounterRule(
                float(sec["counters"]["window_s"]),
                _thresholds(sec["counters"]["max_delta"], f"{where}.counters.max_delta"),
                _thresholds(sec["counters"]["warn_absolute"], f"{where}.counters.warn_absolute"),
            ),
            gpudirect=GpuDirectRule(
                Threshold.from_profile(sec["gpudirect"]["accept"], f"{where}.gpudirect.accept"),
                VersionRule(min=str(sec["gpudirect"]["dmabuf_min_kernel"])),
            ),
            affinity=Threshold.from_profile(
                sec["affinity"]["relations"], f"{where}.affinity.relations"
            ),
            link_health=_link_health(sec["link_health"], f"{where}.link_health"),
        )

    def role(self, name: str | None) -> Role | None:
        if name == COMPUTE:
            return self.compute
        return next((r for r in self.others if r.name == name), None)

    def firmware_rule(self, psid: str | None) -> VersionRule | None:
        """The firmware rule of a PSID; the `*` entry covers PSIDs the profile does not list."""
        return self.firmware.get(psid or "") or self.firmware.get("*")


def hca_profile(profile: Profile) -> HcaProfile:
    """The typed `hca` section of a profile, built once per profile."""
    return profile.typed(SECTION, partial(HcaProfile.of, name=profile.name))


def _pcie(doc: Mapping[str, Any] | None, where: str) -> PcieRule | None:
    if doc is None:
        return None
    return PcieRule(
        Threshold.from_profile(doc["gen"], f"{where}.gen"),
        Threshold.from_profile(doc["width_lanes"], f"{where}.width_lanes"),
    )


def _compute(doc: Mapping[str, Any], where: str) -> ComputeRole:
    return ComputeRole(
        name=COMPUTE,
        pci_ids=tuple(doc["pci_ids"]),
        psids=tuple(doc["psids"]),
        pcie=_pcie(doc["pcie"], f"{where}.pcie"),
        link_layer=Threshold.from_profile(doc["link_layer"], f"{where}.link_layer"),
        port=_port(doc["port"], f"{where}.port"),
    )


def _counted(name: str, doc: Mapping[str, Any], where: str) -> CountedRole:
    layer = doc.get("link_layer")
    return CountedRole(
        name=name,
        pci_ids=tuple(doc["pci_ids"]),
        psids=tuple(doc["psids"]),
        pcie=_pcie(doc["pcie"], f"{where}.pcie"),
        link_layer=None if layer is None else Threshold.from_profile(layer, f"{where}.link_layer"),
        count=CountRule.of(doc["count"], f"{where}.count"),
    )


def _port(doc: Mapping[str, Any], where: str) -> PortRule:
    t = {f.name: Threshold.from_profile(doc[f.name], f"{where}.{f.name}") for f in fields(PortRule)}
    state = t["state"]
    upper = tuple(str(v).upper() for v in state.value) if state.direction == "one_of" else None
    t["state"] = replace(state, value=upper if upper else str(state.value).upper())
    return PortRule(**t)


def _thresholds(doc: Mapping[str, Any], where: str) -> Mapping[str, Threshold]:
    return MappingProxyType({k: Threshold.from_profile(v, f"{where}.{k}") for k, v in doc.items()})


def _link_health(doc: Mapping[str, Any] | None, where: str) -> LinkHealthRule | None:
    if doc is None:
        return None
    return LinkHealthRule(
        bool(doc["required"]),
        Threshold.from_profile(doc["effective_ber"], f"{where}.effective_ber"),
        Threshold.from_profile(doc["raw_ber"], f"{where}.raw_ber"),
        tuple(doc["fault_flags"]),
    )
