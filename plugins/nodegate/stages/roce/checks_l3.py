"""Checks of the `roce` stage per rail, L3: ECN and CNP marking, rdma_cm's RoCE mode and ToS,
the GID at the profile's index, the rail's address, routes and rules, ARP/rp_filter sysctls.
Pure (check, RoceFacts, RoceProfile) -> verdicts, one per rail.
"""

from __future__ import annotations

import ipaddress

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error
from nodegate.parsers.iproute_json import IpAddress
from nodegate.stages.roce.checks_l2 import outcome
from nodegate.stages.roce.commands import (
    FILES,
    GIDS,
    IP_ADDR,
    IP_ROUTE,
    IP_RULE,
    PORT,
    SYSCTLS,
    cnp_path,
    ecn_path,
    rdma_cm_path,
    sysctl_path,
)
from nodegate.stages.roce.facts import RailFacts, RoceFacts
from nodegate.stages.roce.profile import RoceProfile, RoceRail


class Unread(Exception):
    """A kernel file the check needs was not read (the verdict is an ERROR)."""


def _value(f: RoceFacts, path: str) -> str:
    if f.files is None:
        raise Unread(f.why(FILES))
    v = f.files.get(path)
    if v is None:
        raise Unread(f"{path} not readable (absent on the node)")
    return v


def _int(f: RoceFacts, path: str) -> int:
    v = _value(f, path)
    if not v.isdigit():
        raise Unread(f"{path} reads {v[:40]!r}, not a number")
    return int(v)


def ecn(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.ecn: ECN notification point and reaction point (DCQCN) on the RoCE priority."""
    p, ev = prof.qos.roce_priority, f.ev(FILES)
    points = [
        ("roce_np", prof.ecn_np, "notification point"),
        ("roce_rp", prof.ecn_rp, "reaction point"),
    ]
    try:
        got = {name: _int(f, ecn_path(r, point, p)) for point, want, name in points}
    except Unread as exc:
        return error(c, f.node, r.label, str(exc), evidence=ev)
    want = {name: int(on) for _, on, name in points}
    shown = ", ".join(f"{n} {'on' if v else 'off'}" for n, v in got.items())
    problems = [
        f"ECN {n} {'on' if v else 'off'} on prio {p}" for n, v in got.items() if v != want[n]
    ]
    exp = ", ".join(f"{n} {'on' if v else 'off'}" for n, v in want.items())
    fix = f"echo 1 > {ecn_path(r, 'roce_np', p)}; echo 1 > {ecn_path(r, 'roce_rp', p)}"
    return outcome(c, f, r, problems, f"prio {p}: {shown}", f"prio {p}: {exp}", fix, ev)


def cnp(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.cnp: CNPs leave in the profile's DSCP and 802.1p priority."""
    ev = f.ev(FILES)
    try:
        dscp, prio = _int(f, cnp_path(r, "cnp_dscp")), _int(f, cnp_path(r, "cnp_802p_prio"))
    except Unread as exc:
        return error(c, f.node, r.label, str(exc), evidence=ev)
    q = prof.qos
    problems = []
    if dscp != q.cnp_dscp:
        problems.append(f"CNP DSCP {dscp}")
    if prio != q.cnp_priority:
        problems.append(f"CNP prio {prio}")
    fix = f"echo {q.cnp_dscp} > {cnp_path(r, 'cnp_dscp')}; echo {q.cnp_priority} > " + cnp_path(
        r, "cnp_802p_prio"
    )
    want = f"CNP DSCP {q.cnp_dscp}, prio {q.cnp_priority}"
    return outcome(c, f, r, problems, f"CNP DSCP {dscp}, prio {prio}", want, fix, ev)


def roce_mode(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.mode: rdma_cm's default RoCE mode of the port is v2."""
    ev = f.ev(FILES)
    try:
        mode = _value(f, rdma_cm_path(r, "default_roce_mode"))
    except Unread as exc:
        why = f"{exc}; cma_roce_mode -d {r.device} -p {PORT} creates the rdma_cm group"
        return error(c, f.node, r.label, why, evidence=ev)
    t = prof.roce_mode
    problems = [] if t.holds(mode) else [f"default_roce_mode {mode}"]
    fix = f"cma_roce_mode -d {r.device} -p {PORT} -m 2"
    return outcome(c, f, r, problems, mode, str(t.expected()), fix, ev, reference=t)


def tos(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.tos: rdma_cm's default ToS equals the profile's traffic class (NCCL_IB_TC)."""
    ev = f.ev(FILES)
    try:
        got = _int(f, rdma_cm_path(r, "default_roce_tos"))
    except Unread as exc:
        return error(c, f.node, r.label, str(exc), evidence=ev)
    tc = prof.transport.traffic_class
    problems = [] if got == tc else [f"default_roce_tos {got}"]
    fix = f"cma_roce_tos -d {r.device} -t {tc}"
    return outcome(c, f, r, problems, f"default_roce_tos {got}", f"default_roce_tos {tc}", fix, ev)


def rail_addresses(f: RoceFacts, r: RoceRail) -> tuple[IpAddress, ...] | None:
    """The rail netdev's IPv4 addresses (None: `ip -j addr` unreadable or no such netdev)."""
    link = f.link(r.netdev)
    return None if link is None else link.ipv4()


def rail_address(f: RoceFacts, r: RoceRail) -> str | None:
    """The one address of the rail in its subnet, when there is exactly one."""
    inside = [a for a in rail_addresses(f, r) or () if a.interface.ip in r.subnet]
    return inside[0].local if len(inside) == 1 else None


def ip_address(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.ip.address: exactly one IPv4 address on the rail netdev, in the rail's subnet."""
    ev = f.ev(IP_ADDR)
    if f.links is None:
        return error(c, f.node, r.label, f.why(IP_ADDR), evidence=ev)
    addrs = rail_addresses(f, r)
    want = f"one IPv4 address in {r.subnet}"
    fix = f"give {r.netdev} one address in {r.subnet} (netplan/ifcfg of the rail)"
    if addrs is None:
        return outcome(c, f, r, [f"no netdev {r.netdev}"], "", want, fix, ev)
    shown = ", ".join(str(a.interface) for a in addrs) or "no IPv4 address"
    ok = len(addrs) == 1 and addrs[0].interface.ip in r.subnet
    return outcome(c, f, r, [] if ok else [shown], shown, want, fix, ev)


def gid(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.gid: the GID at the profile's index is RoCE v2 with the rail's IPv4 address."""
    ev, idx = f.ev(GIDS, IP_ADDR), prof.transport.gid_index
    if f.gids is None:
        return error(c, f.node, r.label, f.why(GIDS), evidence=ev)
    addr = rail_address(f, r)
    want = f"index {idx}: RoCE v2 IPv4 {addr or f'address in {r.subnet}'} on {r.netdev}"
    e = f.gids.at(r.device, PORT, idx)
    v2 = [g.index for g in f.gids.entries if g.device == r.device and g.roce_version == 2]
    v2_ipv4 = [
        g.index
        for g in f.gids.entries
        if g.device == r.device and g.roce_version == 2 and g.ipv4 is not None
    ]
    if e is None:
        got = f"index {idx}: no GID"
    else:
        got = f"index {idx}: RoCE v{e.roce_version} {e.ipv4 or e.gid} on {e.netdev or '-'}"
    in_subnet = e is not None and e.ipv4 is not None and ipaddress.ip_address(e.ipv4) in r.subnet
    ok = (
        e is not None
        and e.roce_version == 2
        and in_subnet
        and (addr is None or e.ipv4 == addr)
        and e.netdev == r.netdev
    )
    problems = []
    if not ok:
        where = (
            f"RoCE v2 IPv4 GID at index {','.join(map(str, v2_ipv4))}"
            if v2_ipv4
            else ("no RoCE v2 IPv4 GID" if v2 else "no RoCE v2 GID at all (v1 only)")
        )
        problems.append(f"{got} ({where})")
    fix = "fix the rail's address (the GID follows it) or the profile's gid_index; v2 GIDs "
    fix += "need RoCE v2 enabled in firmware (mlxconfig ROCE_CONTROL)"
    return outcome(c, f, r, problems, got, want, fix, ev)


def routing(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.ip.routing: the rail's subnet route (in its policy table) and its source rule."""
    ev = f.ev(IP_ROUTE, IP_RULE, IP_ADDR)
    if f.routes is None or f.rules is None or f.links is None:
        return error(c, f.node, r.label, f.why(IP_ROUTE, IP_RULE, IP_ADDR), evidence=ev)
    addr = rail_address(f, r)
    table = "main" if r.table is None else str(r.table)
    want = f"{r.subnet} dev {r.netdev} table {table}"
    if r.table is not None:
        want += f", rule from {addr or 'the rail address'} lookup {table}"
    problems = []
    if not any(x.dst == str(r.subnet) and x.dev == r.netdev and x.table == table for x in f.routes):
        problems.append(f"no route {r.subnet} dev {r.netdev} in table {table}")
    if r.table is not None:
        rule = any(x.src == addr and x.srclen in (None, 32) and x.table == table for x in f.rules)
        if addr is None or not rule:
            problems.append(f"no rule from {addr or '(no rail address)'} lookup {table}")
    fix = f"ip route add {r.subnet} dev {r.netdev} table {table}"
    if r.table is not None:
        fix += f"; ip rule add from {addr or '<rail address>'} lookup {table}"
    return outcome(c, f, r, problems, want, want, fix, ev)


def sysctl(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.sysctl: arp_ignore, arp_announce, rp_filter of the rail (max of all and <if>)."""
    ev = f.ev(FILES)
    try:
        eff = {
            s: max(_int(f, sysctl_path("all", s)), _int(f, sysctl_path(r.netdev, s)))
            for s in SYSCTLS
        }
    except Unread as exc:
        return error(c, f.node, r.label, str(exc), evidence=ev)
    rules = prof.sysctl.items()
    problems = [f"{s}={eff[s]}" for s, t in rules if not t.holds(eff[s])]
    shown = ", ".join(f"{s}={eff[s]}" for s in SYSCTLS)
    want = ", ".join(f"{s} {t.expected()}" for s, t in rules)
    fix = f"sysctl -w net.ipv4.conf.{r.netdev}.<key>=<value> and conf.all (effective = max)"
    return outcome(c, f, r, problems, shown, want, fix, ev)
