"""The `roce` stage's check table, in report order, with the congestion counter checks and the
fleet checks (duplicate addresses; trust, PFC, DSCP map, MTU and GID index against the fleet
majority). Per-rail L2 checks: checks_l2; L3: checks_l3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from nodegate.core.checks import AnyCheck, Check, CheckTable
from nodegate.core.majority import Majority
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.stages.roce import checks_l2 as l2
from nodegate.stages.roce import checks_l3 as l3
from nodegate.stages.roce.checks_l2 import outcome, per_rail
from nodegate.stages.roce.commands import (
    GIDS,
    IP_ADDR,
    RDMA_STAT,
    RDMA_STAT_AGAIN,
    rail_id,
)
from nodegate.stages.roce.facts import RailFacts, RoceFacts
from nodegate.stages.roce.profile import RoceProfile, RoceRail

_FIX = {
    "pause": "a PFC storm: find the port sending pause (a stuck receiver), check buffers and "
    "the switch's PFC watchdog",
    "cnp": "congestion on an idle node: check the switch's ECN marking and the rail's traffic",
    "retransmits": "a lossy path: check PFC on the RoCE priority end to end, cable and optics",
}


def counters(group: str) -> Callable[[AnyCheck, RoceFacts, RoceProfile], list[Verdict]]:
    """`roce.counters.<group>`: each counter of the group read twice, judged on its rise."""

    def judge(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
        ids = (rail_id("stats", r), RDMA_STAT, rail_id("stats_again", r), RDMA_STAT_AGAIN)
        ev = f.ev(*ids)
        first, again = rf.counters
        if first is None or again is None:
            why = next((f.errors[k] for k in f.errors if k.split(":")[0] in ids), "no counters")
            return error(c, f.node, r.label, why, evidence=ev)
        rule, window = prof.counters.groups[group], prof.counters.window_s
        unread = [k for k in rule if k not in first or k not in again]
        if unread:
            why = f"counters not reported: {', '.join(unread)}"
            return error(c, f.node, r.label, why, evidence=ev)
        rise = {k: again[k] - first[k] for k in rule}
        fell = [f"{k} {first[k]} -> {again[k]}" for k, v in rise.items() if v < 0]
        if fell:  # a counter only climbs: reset between the reads (driver reload) or not one
            why = f"counters went down between the reads: {', '.join(fell)}"
            return error(c, f.node, r.label, why, evidence=ev)
        problems = [f"{k} +{v}" for k, v in rise.items() if not rule[k].holds(v)]
        want = ", ".join(f"{k} <= +{t.value}" for k, t in rule.items())
        ok = f"no rise in {window:g} s"
        verdict = outcome(c, f, r, problems, ok, want, _FIX[group], ev)
        if problems:
            return replace(verdict, message=verdict.message + f" in {window:g} s")
        return verdict

    judge.__name__ = f"counters_{group}"
    return per_rail(judge)


def ip_unique(
    c: AnyCheck, facts: Mapping[str, RoceFacts], profiles: Mapping[str, RoceProfile]
) -> list[Verdict]:
    """roce.ip.unique: no rail address is held twice in the fleet (any node, any rail)."""
    holders: dict[str, list[str]] = {}
    for n, f in facts.items():
        for r in profiles[n].rails:
            for a in l3.rail_addresses(f, r) or ():
                holders.setdefault(a.local, []).append(f"{n} {r.device}")
    out = []
    for n, f in facts.items():
        for r in profiles[n].rails:
            ev = f.ev(IP_ADDR)
            addrs = l3.rail_addresses(f, r)
            if addrs is None:
                why = f.why(IP_ADDR) if f.links is None else f"no netdev {r.netdev}"
                out.append(error(c, n, r.label, why, evidence=ev))
                continue
            me = f"{n} {r.device}"
            dup = {
                a.local: [h for h in holders[a.local] if h != me]
                for a in addrs
                if len(holders[a.local]) > 1
            }
            got = "; ".join(f"{a} also on {', '.join(hs)}" for a, hs in dup.items())
            shown = ", ".join(a.local for a in addrs) or "no address"
            out.append(
                judged(
                    c,
                    n,
                    not dup,
                    r.label,
                    got or shown,
                    "unique in the fleet",
                    f"{r.device} {r.netdev}: " + (got or f"{shown} unique in the fleet"),
                    remediation="give each rail of each node its own address (IPAM)",
                    evidence=ev,
                )
            )
    return out


def _attributes(f: RoceFacts, prof: RoceProfile, r: RoceRail) -> dict[str, str | None]:
    """What must match the fleet on one rail (None: could not be read)."""
    q, rf = prof.qos, f.rails[r.rail]
    link = f.link(r.netdev)
    gid: str | None = None
    if f.gids is not None:
        v2 = [
            g.index
            for g in f.gids.entries
            if g.device == r.device and g.roce_version == 2 and g.ipv4 is not None
        ]
        gid = ",".join(map(str, v2)) or "none"
    dscp = None
    if rf.qos is not None:
        m = rf.qos.dscp_to_prio
        dscp = ", ".join(f"{d}->{m.get(d, '-')}" for d in (prof.transport.dscp, q.cnp_dscp))
    return {
        "trust": None if rf.qos is None else rf.qos.trust,
        "PFC": None if rf.qos is None else l2.pfc_shown(rf.qos.pfc_enabled),
        "DSCP map": dscp,
        "MTU": None if link is None else str(link.mtu),
        "RoCE v2 GID index": gid,
    }


def fleet_uniform(
    c: AnyCheck, facts: Mapping[str, RoceFacts], profiles: Mapping[str, RoceProfile]
) -> list[Verdict]:
    """roce.fleet.uniform: per rail, trust, PFC, DSCP map, MTU and RoCE v2 GID index equal the
    majority of the same profile's nodes (a tie is no majority: every node in it fails)."""
    seen: dict[tuple[str, int, str], list[str | None]] = {}
    mine: dict[tuple[str, int], dict[str, str | None]] = {}
    for n, f in facts.items():
        prof = profiles[n]
        for r in prof.rails:
            attrs = mine[(n, r.rail)] = _attributes(f, prof, r)
            for k, v in attrs.items():
                seen.setdefault((prof.name, r.rail, k), []).append(v)
    fleet = {key: Majority.of(values) for key, values in seen.items()}
    out = []
    for n, f in facts.items():
        prof = profiles[n]
        for r in prof.rails:
            attrs = mine[(n, r.rail)]
            major = {k: fleet[(prof.name, r.rail, k)] for k in attrs}
            diff = [k for k, v in attrs.items() if v is not None and not major[k].agrees(v)]
            unread = [k for k, v in attrs.items() if v is None]
            ev = f.ev(rail_id("mlnx_qos", r), IP_ADDR, GIDS)
            if unread and not diff:
                why = f"cannot compare {', '.join(unread)}: not read"
                out.append(error(c, n, r.label, why, evidence=ev))
                continue
            got = "; ".join(f"{k} {attrs[k]}" for k in diff) or "as the fleet"
            want = "; ".join(
                f"{k} {major[k].top or 'no majority'} ({major[k].top_count}/{major[k].total})"
                for k in (diff or attrs)
            )
            msg = f"{r.device} {r.netdev}: " + (
                f"{got} differs from the fleet: {want}" if diff else f"as the fleet: {want}"
            )
            out.append(
                judged(
                    c,
                    n,
                    not diff,
                    r.label,
                    got,
                    "; ".join(f"{k} {major[k].top or 'fleet majority'}" for k in (diff or attrs)),
                    msg,
                    remediation="align the rail's RoCE configuration with the fleet",
                    evidence=ev,
                )
            )
    return out


CHECKS: CheckTable[RoceFacts, RoceProfile] = CheckTable(
    "roce",
    [
        Check("roce.rail.link", "each RoCE rail's RDMA port maps to its netdev, is ACTIVE/LINK_UP "
              "and links at the profile's speed", per_rail(l2.rail_link), "RoCE rail",
              "test_roce_rail_link"),
        Check("roce.mtu", "netdev MTU and RDMA active MTU of each rail", per_rail(l2.mtu),
              "RoCE rail", "test_roce_mtu"),
        Check("roce.qos.trust", "each rail trusts DSCP", per_rail(l2.qos_trust), "RoCE rail",
              "test_roce_qos_trust"),
        Check("roce.qos.pfc", "PFC on exactly the profile's priorities", per_rail(l2.qos_pfc),
              "RoCE rail", "test_roce_qos_pfc"),
        Check("roce.qos.dscp_map", "RoCE and CNP DSCPs map to their priorities",
              per_rail(l2.qos_dscp_map), "RoCE rail", "test_roce_qos_dscp_map"),
        Check("roce.qos.ets", "the RoCE priority's traffic class is ETS with its share",
              per_rail(l2.qos_ets), "RoCE rail", "test_roce_qos_ets"),
        Check("roce.ecn", "ECN notification and reaction point (DCQCN) on the RoCE priority",
              per_rail(l3.ecn), "RoCE rail", "test_roce_ecn"),
        Check("roce.cnp", "CNP DSCP and 802.1p priority", per_rail(l3.cnp), "RoCE rail",
              "test_roce_cnp"),
        Check("roce.mode", "rdma_cm default RoCE mode is v2", per_rail(l3.roce_mode), "RoCE rail",
              "test_roce_mode"),
        Check("roce.tos", "rdma_cm default ToS equals the profile's traffic class (NCCL_IB_TC)",
              per_rail(l3.tos), "RoCE rail", "test_roce_tos"),
        Check("roce.gid", "a RoCE v2 GID with the rail's IPv4 address at the profile's GID index",
              per_rail(l3.gid), "RoCE rail", "test_roce_gid"),
        Check("roce.ip.address", "one IPv4 address per rail, in the rail's subnet",
              per_rail(l3.ip_address), "RoCE rail", "test_roce_ip_address"),
        Check("roce.ip.unique", "no rail address is duplicated in the fleet", ip_unique,
              "RoCE rail", "test_roce_ip_unique", "fleet"),
        Check("roce.ip.routing", "per-rail route and source policy rule", per_rail(l3.routing),
              "RoCE rail", "test_roce_ip_routing"),
        Check("roce.sysctl", "arp_ignore, arp_announce, rp_filter of each rail",
              per_rail(l3.sysctl), "RoCE rail", "test_roce_sysctl"),
        Check("roce.counters.pause", "no PFC pause storm on the RoCE priority over the window",
              counters("pause"), "RoCE rail", "test_roce_counters_pause"),
        Check("roce.counters.cnp", "no CNPs sent or handled over the window", counters("cnp"),
              "RoCE rail", "test_roce_counters_cnp"),
        Check("roce.counters.retransmits", "no RDMA retransmission signal or discard over the "
              "window", counters("retransmits"), "RoCE rail", "test_roce_counters_retransmits"),
        Check("roce.fleet.uniform", "trust, PFC, DSCP map, MTU and GID index equal the fleet "
              "majority", fleet_uniform, "RoCE rail", "test_roce_fleet_uniform", "fleet"),
    ],
)  # fmt: skip
