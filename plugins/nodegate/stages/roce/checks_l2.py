"""Checks of the `roce` stage per rail, link and L2 QoS: rail map and link, MTU, trust mode,
PFC, the DSCP map, ETS. Pure (check, RoceFacts, RoceProfile) -> verdicts, one per rail.
"""

from __future__ import annotations

from collections.abc import Callable

from nodegate.core.checks import AnyCheck
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.stages.roce.commands import IP_ADDR, PORT, RDMA_LINK, rail_id
from nodegate.stages.roce.facts import RailFacts, RoceFacts
from nodegate.stages.roce.profile import RoceProfile, RoceRail

RailJudge = Callable[[AnyCheck, RoceFacts, RoceProfile, RoceRail, RailFacts], Verdict]
ACTIVE, LINK_UP = 4, 5  # IBTA port state and physical state codes


def per_rail(judge: RailJudge) -> Callable[[AnyCheck, RoceFacts, RoceProfile], list[Verdict]]:
    """A node check from a one-rail judge: one verdict per rail of the profile."""

    def check(c: AnyCheck, f: RoceFacts, prof: RoceProfile) -> list[Verdict]:
        return [judge(c, f, prof, r, f.rails[r.rail]) for r in prof.rails]

    check.__name__ = check.__qualname__ = judge.__name__
    return check


def outcome(
    c: AnyCheck,
    f: RoceFacts,
    r: RoceRail,
    problems: list[str],
    ok_text: str,
    expected: str,
    fix: str,
    ev: tuple[str, ...],
    reference: Threshold | None = None,
) -> Verdict:
    """PASS with `ok_text` when there is no problem, else FAIL naming every one; `reference`:
    the one threshold judged, when one was."""
    got = "; ".join(problems) or ok_text
    msg = f"{r.device} {r.netdev}: {got}" + (f", expected {expected}" if problems else "")
    return judged(
        c, f.node, not problems, r.label, got, expected, msg, remediation=fix, evidence=ev,
        reference=reference,
    )  # fmt: skip


def rail_link(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.rail.link: the RDMA port maps to the rail's netdev, ACTIVE/LINK_UP, link at speed."""
    eth = rail_id("ethtool", r)
    ev = f.ev(RDMA_LINK, eth)
    if f.rdma_links is None or rf.ethtool is None:
        return error(c, f.node, r.label, f.why(RDMA_LINK, eth), evidence=ev)
    speed = prof.link.speed_mbps
    want = f"{r.device}/{PORT} -> {r.netdev} ACTIVE/LINK_UP, link detected, {speed.describe()}"
    link = next((x for x in f.rdma_links.links if (x.device, x.port) == (r.device, PORT)), None)
    problems = []
    if link is None:
        problems.append(f"no RDMA link {r.device}/{PORT}")
    else:
        if link.netdev != r.netdev:
            problems.append(f"{r.device}/{PORT} is netdev {link.netdev}")
        if (link.state_code, link.phys_state_code) != (ACTIVE, LINK_UP):
            problems.append(f"port {link.state}/{link.phys_state}")
    if rf.ethtool.link_detected is not True:
        problems.append("no link detected")
    elif not speed.holds(rf.ethtool.speed_mbps):
        problems.append(f"speed {rf.ethtool.speed_mbps} {speed.unit or ''}".rstrip())
    fix = "check the rail map (udev names), cable and switch port; then the port's speed"
    return outcome(c, f, r, problems, want, want, fix, ev)


def mtu(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.mtu: the netdev MTU and the RDMA port's active MTU."""
    dev = rail_id("devinfo", r)
    ev = f.ev(IP_ADDR, dev)
    link = f.link(r.netdev)
    if f.links is None or rf.port is None:
        return error(c, f.node, r.label, f.why(IP_ADDR, dev), evidence=ev)
    want = f"netdev MTU {prof.link.mtu.expected()}, RDMA MTU {prof.link.rdma_mtu.expected()}"
    if link is None:
        return outcome(c, f, r, [f"no netdev {r.netdev}"], "", want, "fix the rail map", ev)
    active = rf.port.active_mtu_bytes
    problems = []
    if not prof.link.mtu.holds(link.mtu):
        problems.append(f"netdev MTU {link.mtu}")
    if not prof.link.rdma_mtu.holds(active):
        problems.append(f"RDMA active MTU {active}")
    fix = f"ip link set {r.netdev} mtu <profile MTU> (and in the netplan/ifcfg of the rail)"
    return outcome(c, f, r, problems, f"netdev MTU {link.mtu}, RDMA MTU {active}", want, fix, ev)


def _qos(c: AnyCheck, f: RoceFacts, r: RoceRail, rf: RailFacts) -> Verdict | None:
    """The ERROR verdict of a rail whose mlnx_qos is unreadable (None when it is readable)."""
    q = rail_id("mlnx_qos", r)
    if rf.qos is None:
        return error(c, f.node, r.label, f.why(q), evidence=f.ev(q))
    return None


def qos_trust(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.qos.trust: the port trusts DSCP (a node on `trust pcp` ignores the DSCP marking)."""
    bad = _qos(c, f, r, rf)
    if bad is not None or rf.qos is None:
        return bad or error(c, f.node, r.label, "no mlnx_qos")
    t = prof.qos.trust
    problems = [] if t.holds(rf.qos.trust) else [f"trust {rf.qos.trust}"]
    fix = f"mlnx_qos -i {r.netdev} --trust {t.value}"
    ev = f.ev(rail_id("mlnx_qos", r))
    shown = f"trust {rf.qos.trust}"
    return outcome(c, f, r, problems, shown, f"trust {t.expected()}", fix, ev, reference=t)


def pfc_shown(prios: tuple[int, ...]) -> str:
    """`on 3`, `on 3,4`, `off`."""
    return "on " + ",".join(map(str, prios)) if prios else "off"


def _prios(prios: tuple[int, ...]) -> str:
    return "PFC " + pfc_shown(prios)


def qos_pfc(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.qos.pfc: PFC on exactly the profile's priorities (the RoCE one), nowhere else."""
    bad = _qos(c, f, r, rf)
    if bad is not None or rf.qos is None:
        return bad or error(c, f.node, r.label, "no mlnx_qos")
    want, got = prof.qos.pfc_priorities, rf.qos.pfc_enabled
    problems = [] if got == want else [_prios(got)]
    mask = ",".join("1" if p in want else "0" for p in range(8))
    fix = f"mlnx_qos -i {r.netdev} --pfc {mask}"
    ev = f.ev(rail_id("mlnx_qos", r))
    return outcome(c, f, r, problems, _prios(got), _prios(want), fix, ev)


def qos_dscp_map(
    c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts
) -> Verdict:
    """roce.qos.dscp_map: RoCE DSCP -> the RoCE priority, CNP DSCP -> the CNP priority."""
    bad = _qos(c, f, r, rf)
    if bad is not None or rf.qos is None:
        return bad or error(c, f.node, r.label, "no mlnx_qos")
    ev = f.ev(rail_id("mlnx_qos", r))
    if not rf.qos.dscp_to_prio:
        why = f"not judged: no DSCP map (trust {rf.qos.trust}, roce.qos.trust)"
        return error(c, f.node, r.label, why, evidence=ev)
    q = prof.qos
    want = {prof.transport.dscp: q.roce_priority, q.cnp_dscp: q.cnp_priority}
    got = {d: rf.qos.dscp_to_prio.get(d) for d in want}

    def shown(m: dict[int, int | None]) -> str:
        return ", ".join(f"DSCP {d} -> prio {p}" for d, p in m.items())

    problems = [f"DSCP {d} -> prio {got[d]}" for d in want if got[d] != want[d]]
    fix = " ; ".join(f"mlnx_qos -i {r.netdev} --dscp2prio set,{d},{p}" for d, p in want.items())
    return outcome(c, f, r, problems, shown(got), shown(dict(want)), fix, ev)


def qos_ets(c: AnyCheck, f: RoceFacts, prof: RoceProfile, r: RoceRail, rf: RailFacts) -> Verdict:
    """roce.qos.ets: the RoCE priority's traffic class is ETS with at least its share."""
    bad = _qos(c, f, r, rf)
    if bad is not None or rf.qos is None:
        return bad or error(c, f.node, r.label, "no mlnx_qos")
    p, share = prof.qos.roce_priority, prof.qos.roce_tc_bw
    want = f"prio {p} in an ETS class with bw {share.describe()}"
    tc = rf.qos.tc_of(p)
    ev = f.ev(rail_id("mlnx_qos", r))
    if tc is None:
        return outcome(c, f, r, [f"prio {p} in no traffic class"], "", want, "set ETS", ev)
    got = f"prio {p} in tc {tc.tc} tsa {tc.tsa}" + (
        "" if tc.bw_percent is None else f" bw {tc.bw_percent}%"
    )
    ok = tc.tsa == "ets" and share.holds(tc.bw_percent)
    fix = f"mlnx_qos -i {r.netdev} --tsa/--tcbw: give tc {tc.tc} ETS with {share.describe()}"
    return outcome(c, f, r, [] if ok else [got], got, want, fix, ev)
