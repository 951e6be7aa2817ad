"""The `fabric` section of a profile, typed once: subnets and their SM, observers, expected
cabling, switch-side link and counter thresholds, switch firmware and partition keys.

`fabric: null` is a SKU whose nodes cannot query the fabric (a VM's virtual functions have no
subnet-management access; a RoCE fabric has no subnet manager): the stage's checks pass as
not applicable and the SKU's admission does not need them.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.core.versions import VersionRule
from nodegate.profiles import Profile
from nodegate.stages.hca import hca_profile
from nodegate.stages.hca.profile import Rail

SECTION = "fabric"


@dataclass(frozen=True, slots=True)
class SmRule:
    priority: Threshold
    guid: str | None  # the port GUID the MASTER must run on; None: any


@dataclass(frozen=True, slots=True)
class Subnet:
    """One InfiniBand subnet: the rails on it (the observer queries from `rails[0]`)."""

    name: str
    rails: tuple[int, ...]
    sm: SmRule


@dataclass(frozen=True, slots=True)
class NamingRule:
    """The leaf a rail lands on, from the node's labels: `leaf-{rack}-rail{rail}`."""

    switch: str

    def fields(self) -> tuple[str, ...]:
        return tuple(f for _, f, _, _ in string.Formatter().parse(self.switch) if f)

    def switch_for(self, labels: Mapping[str, str], rail: int) -> str | None:
        """The switch's name, or None when the node lacks a label the template names."""
        values: dict[str, object] = {"rail": rail}
        for f in self.fields():
            if f != "rail":
                if f not in labels:
                    return None
                values[f] = labels[f]
        return self.switch.format(**values)


@dataclass(frozen=True, slots=True)
class LinkRule:
    width: Threshold
    speed: Threshold


@dataclass(frozen=True, slots=True)
class UplinkRule:
    count: Threshold | None  # None: as many as most leaves of the subnet have
    link: LinkRule


@dataclass(frozen=True, slots=True)
class CounterRule:
    """Switch port counters read twice `window_s` apart: the most each may rise, and the most
    PortXmitWait ticks per second."""

    window_s: float
    max_delta: Mapping[str, Threshold]
    xmit_wait_rate: Threshold


@dataclass(frozen=True, slots=True)
class PkeyRule:
    required: tuple[int, ...]  # 15-bit partitions
    full_member: bool


@dataclass(frozen=True, slots=True)
class FabricProfile:
    """A profile's `fabric` section, typed, with the hca rails it observes from."""

    name: str
    rails: tuple[Rail, ...]  # hca.rails
    subnets: tuple[Subnet, ...]
    observers_per_subnet: int
    observer_nodes: tuple[str, ...]
    cabling_required: bool
    naming: NamingRule | None
    link: LinkRule
    uplinks: UplinkRule
    counters: CounterRule
    switch_firmware: VersionRule
    uniform_firmware: bool
    pkeys: PkeyRule
    discover_timeout_s: float
    query_timeout_s: float

    def rail(self, number: int) -> Rail | None:
        return next((r for r in self.rails if r.rail == number), None)

    def subnet_of(self, rail: int) -> Subnet | None:
        return next((s for s in self.subnets if rail in s.rails), None)

    @classmethod
    def of(cls, sec: Mapping[str, Any], name: str, rails: tuple[Rail, ...]) -> FabricProfile:
        where = f"profile {name}: fabric"

        def th(doc: Any, key: str) -> Threshold:
            return Threshold.from_profile(doc, f"{where}.{key}")

        known = {r.rail for r in rails}
        subnets: list[Subnet] = []
        seen: set[int] = set()
        for i, s in enumerate(sec["subnets"]):
            missing = [r for r in s["rails"] if r not in known]
            if missing:
                raise ConfigError(f"{where}.subnets[{i}].rails: {missing} not in hca.rails")
            if seen & set(s["rails"]):
                raise ConfigError(f"{where}.subnets[{i}].rails: a rail is on two subnets")
            seen |= set(s["rails"])
            sm = SmRule(th(s["sm"]["priority"], f"subnets[{i}].sm.priority"), s["sm"].get("guid"))
            subnets.append(Subnet(str(s["name"]), tuple(int(r) for r in s["rails"]), sm))
        if len({s.name for s in subnets}) != len(subnets):
            raise ConfigError(f"{where}.subnets: a subnet name appears twice")
        naming = sec["cabling"].get("naming")
        rule = None if naming is None else NamingRule(str(naming["switch"]))
        if rule is not None:
            try:
                rule.switch.format(**{f: "x" for f in rule.fields()})
            except (ValueError, IndexError, KeyError) as exc:
                raise ConfigError(f"{where}.cabling.naming.switch: {exc}") from None
        c, up, fw = sec["counters"], sec["uplinks"], sec["switch_firmware"]
        return cls(
            name=name,
            rails=rails,
            subnets=tuple(subnets),
            observers_per_subnet=int(sec["observers"]["per_subnet"]),
            observer_nodes=tuple(sec["observers"].get("nodes") or ()),
            cabling_required=bool(sec["cabling"]["required"]),
            naming=rule,
            link=LinkRule(
                th(sec["link"]["width"], "link.width"), th(sec["link"]["speed"], "link.speed")
            ),
            uplinks=UplinkRule(
                None if up.get("count") is None else th(up["count"], "uplinks.count"),
                LinkRule(th(up["width"], "uplinks.width"), th(up["speed"], "uplinks.speed")),
            ),
            counters=CounterRule(
                float(c["window_s"]),
                MappingProxyType(
                    {k: th(v, f"counters.max_delta.{k}") for k, v in c["max_delta"].items()}
                ),
                th(c["xmit_wait_rate"], "counters.xmit_wait_rate"),
            ),
            switch_firmware=VersionRule(required=True, min=str(fw["min"])),
            uniform_firmware=bool(fw["uniform"]),
            pkeys=PkeyRule(
                tuple(int(k, 16) for k in sec["pkeys"]["required"]),
                bool(sec["pkeys"]["full_member"]),
            ),
            discover_timeout_s=float(sec["timeouts"]["discover_s"]),
            query_timeout_s=float(sec["timeouts"]["query_s"]),
        )


def has_fabric(profile: Profile) -> bool:
    """The profile describes a fabric its nodes can query (a mapping, not `fabric: null`)."""
    return isinstance(profile.data.get(SECTION), Mapping)


def fabric_profile(profile: Profile) -> FabricProfile:
    """The typed `fabric` section of a profile, built once per profile."""
    rails = hca_profile(profile).rails if isinstance(profile.data.get("hca"), Mapping) else ()
    return profile.typed(SECTION, partial(FabricProfile.of, name=profile.name, rails=rails))
