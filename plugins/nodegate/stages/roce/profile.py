"""The `roce` section of a profile, typed once: RoCE rails, L2 QoS, L3 and the congestion
counters' window. `roce: null` is a SKU without RoCE rails (InfiniBand fabric).

Other stages read the transport keys through `roce_transport(profile)`: the GID index and the
traffic class (ib_pairs: `ib_write_bw -x <gid_index> --tclass <traffic_class>`; nccl:
`NCCL_IB_GID_INDEX`, `NCCL_IB_TC`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.profiles import Profile

SECTION = "roce"


@dataclass(frozen=True, slots=True)
class RoceTransport:
    """What a RoCE traffic generator needs: GID index and IP traffic class (ToS byte)."""

    gid_index: int
    traffic_class: int

    @property
    def dscp(self) -> int:
        """The DSCP of RoCE traffic: the ToS byte's upper six bits (106 -> 26)."""
        return self.traffic_class >> 2


@dataclass(frozen=True, slots=True)
class RoceRail:
    """Rail `rail`: RDMA device `device` over netdev `netdev`, addressed in `subnet`; `table`
    is its policy routing table (None: the main table)."""

    rail: int
    device: str
    netdev: str
    subnet: ipaddress.IPv4Network
    table: int | None

    @property
    def label(self) -> str:
        """`mlx5_3 enp92s0np0 (rail 3)`: how verdicts name the rail."""
        return f"{self.device} {self.netdev} (rail {self.rail})"


@dataclass(frozen=True, slots=True)
class LinkRule:
    speed_mbps: Threshold
    mtu: Threshold
    rdma_mtu: Threshold


@dataclass(frozen=True, slots=True)
class QosRule:
    """mlnx_qos: trust mode, PFC exactly on `pfc_priorities`, the DSCP map of RoCE and CNP
    traffic, the ETS share of the RoCE priority's traffic class."""

    trust: Threshold
    pfc_priorities: tuple[int, ...]
    roce_priority: int
    cnp_dscp: int
    cnp_priority: int
    roce_tc_bw: Threshold


@dataclass(frozen=True, slots=True)
class SysctlRule:
    arp_ignore: Threshold
    arp_announce: Threshold
    rp_filter: Threshold

    def items(self) -> tuple[tuple[str, Threshold], ...]:
        return (
            ("arp_ignore", self.arp_ignore),
            ("arp_announce", self.arp_announce),
            ("rp_filter", self.rp_filter),
        )


@dataclass(frozen=True, slots=True)
class CounterRule:
    """Counters read twice `window_s` apart; each group maps a counter (its name with the RoCE
    priority substituted for `{p}`) to the most it may rise."""

    window_s: float
    groups: Mapping[str, Mapping[str, Threshold]]  # pause | cnp | retransmits -> counters


@dataclass(frozen=True, slots=True)
class RoceProfile:
    """A profile's `roce` section, typed."""

    name: str
    transport: RoceTransport
    rails: tuple[RoceRail, ...]
    link: LinkRule
    qos: QosRule
    ecn_np: bool
    ecn_rp: bool
    roce_mode: Threshold
    sysctl: SysctlRule
    policy_routing: bool
    counters: CounterRule

    @classmethod
    def of(cls, sec: Mapping[str, Any], name: str) -> RoceProfile:
        where = f"profile {name}: roce"
        q, link, s, c = sec["qos"], sec["link"], sec["sysctl"], sec["counters"]
        prio = int(q["roce_priority"])
        policy = sec["routing"] == "policy"
        rails = tuple(_rail(r, policy, f"{where}.rails") for r in sec["rails"])
        if len({r.rail for r in rails}) != len(rails):
            raise ConfigError(f"{where}.rails: a rail number appears twice")

        def th(doc: Any, key: str) -> Threshold:
            return Threshold.from_profile(doc, f"{where}.{key}")

        return cls(
            name=name,
            transport=RoceTransport(int(sec["gid_index"]), int(sec["traffic_class"])),
            rails=rails,
            link=LinkRule(
                th(link["speed_mbps"], "link.speed_mbps"),
                th(link["mtu"], "link.mtu"),
                th(link["rdma_mtu"], "link.rdma_mtu"),
            ),
            qos=QosRule(
                th(q["trust"], "qos.trust"),
                tuple(sorted(int(p) for p in q["pfc_priorities"])),
                prio,
                int(q["cnp_dscp"]),
                int(q["cnp_priority"]),
                th(q["roce_tc_bw"], "qos.roce_tc_bw"),
            ),
            ecn_np=bool(sec["ecn"]["notification_point"]),
            ecn_rp=bool(sec["ecn"]["reaction_point"]),
            roce_mode=th(sec["roce_mode"], "roce_mode"),
            sysctl=SysctlRule(
                th(s["arp_ignore"], "sysctl.arp_ignore"),
                th(s["arp_announce"], "sysctl.arp_announce"),
                th(s["rp_filter"], "sysctl.rp_filter"),
            ),
            policy_routing=policy,
            counters=CounterRule(
                float(c["window_s"]),
                MappingProxyType(
                    {
                        g: MappingProxyType(
                            {
                                k.replace("{p}", str(prio)): th(v, f"counters.{g}.{k}")
                                for k, v in c[g].items()
                            }
                        )
                        for g in ("pause", "cnp", "retransmits")
                    }
                ),
            ),
        )


def _rail(doc: Mapping[str, Any], policy: bool, where: str) -> RoceRail:
    try:
        subnet = ipaddress.IPv4Network(str(doc["subnet"]))
    except ValueError as exc:
        raise ConfigError(f"{where}: rail {doc['rail']} subnet: {exc}") from None
    table = doc["table"]
    if policy and table is None:
        raise ConfigError(f"{where}: rail {doc['rail']} needs a table (routing: policy)")
    return RoceRail(int(doc["rail"]), str(doc["device"]), str(doc["netdev"]), subnet, table)


def has_roce(profile: Profile) -> bool:
    """The profile describes RoCE rails (a `roce` mapping, not `roce: null`)."""
    return isinstance(profile.data.get(SECTION), Mapping)


def roce_profile(profile: Profile) -> RoceProfile:
    """The typed `roce` section of a profile, built once per profile."""
    return profile.typed(SECTION, partial(RoceProfile.of, name=profile.name))


def roce_transport(profile: Profile) -> RoceTransport | None:
    """GID index and traffic class for RoCE traffic; None for a profile without RoCE rails."""
    return roce_profile(profile).transport if has_roce(profile) else None
