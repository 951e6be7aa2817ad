"""Who is to blame for what a traffic test measured, pure.

Incast, in this order (the first cause explains what follows from it):
- no ECN mark at the receiver although the port was congested: the switch in front of it does
  not mark (its leaf on the rail: an infrastructure finding, the nodes are not to blame);
- marks but no CNP sent: the receiver's notification point (that node's rail);
- a sender that handled no CNP, or took more than its share: that sender's reaction point;
- loss counters grew while no sender was paused: the switch drops instead of pausing (no PFC);
- what is left (aggregate, fairness, pauses, the victim) unexplained: the receiver's rail for
  the incast, the victim's sender for the victim.
Bisection: flows below the per-flow share of the reference that all cross one leaf: that
leaf's uplinks or routing (infrastructure); slow flows with no common leaf: their ends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from nodegate.core.thresholds import Threshold
from nodegate.stages.traffic.measure import STORMS, Measured, jain, median, pause_duration
from nodegate.stages.traffic.plan import TrafficTest
from nodegate.stages.traffic.profile import LOSS_COUNTERS, TrafficProfile

Area = Literal["incast", "fairness", "victim", "bisection", "counters"]
Status = Literal["pass", "fail", "error"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One judgement of a node's rail in one test."""

    area: Area
    node: str
    rail: int
    status: Status
    observed: float | str | None
    expected: str
    message: str
    reference: Threshold | None = None
    test_key: str = ""


@dataclass(frozen=True, slots=True)
class Infra:
    """A fault of the fabric's own parts: a switch (`leaf`, rail) or its uplinks."""

    component: str
    leaf: str
    rail: int
    at: str  # where it showed (a receiver, a flow): the repair item lists them all
    observed: str  # with `{at}`: where it showed, filled in once per item
    expected: str
    message: str
    remediation: str
    test_key: str = ""
    uplink: bool = False  # the leaf's uplinks or one of them (a re-test confirms the leaf)


# A leaf uplink as the fabric stage discovered it: (leaf LID, leaf port, far switch, its LID,
# its port)
Cable = tuple[int, int, str, int, int]
# A cable the slow flows share waits far more than the leaf's other uplinks: at least this many
# times their median (an idle port's XmitWait ticks a little; a shared one for a good part of
# the window)
CABLE_OUTLIER = 10


@dataclass
class Judged:
    findings: list[Finding] = field(default_factory=list)
    infra: list[Infra] = field(default_factory=list)
    # Bisection: leaves that each could explain every slow flow (re-tested one by one).
    suspects: tuple[str, ...] = ()


def switch_name(leaf: str, rail: int) -> str:
    """A leaf switch by its label and rail (where the fabric stage discovered the switches,
    the leaves are their names: `discovered_name`)."""
    return f"{leaf} rail {rail}"


def discovered_name(leaf: str, rail: int) -> str:
    """A leaf switch the fabric stage discovered: its own name (one per rail already)."""
    return leaf


Namer = Callable[[str, int], str]


def judge_incast(
    t: TrafficTest, m: Measured, prof: TrafficProfile, leaf: Mapping[str, str], prio: int | None,
    key: str, name: Namer = switch_name,
) -> Judged:  # fmt: skip
    out = Judged()
    nodes = t.nodes()

    def add(area: Area, node: str, status: Status, observed: float | str | None,
            expected: str, msg: str, ref: Threshold | None = None) -> None:  # fmt: skip
        out.findings.append(Finding(area, node, t.rail, status, observed, expected, msg, ref, key))

    if m.error is not None:
        for n in nodes:
            for area in ("incast", "victim", "counters"):
                add(area, n, "error", None, "a load test", m.error)
        add("fairness", t.receiver, "error", None, "a load test", m.error)
        return out
    line = prof.line_rate_gbps
    sender_bw = {s: m.flows[f"{s}->{t.receiver}"] for s in t.senders}
    agg = sum(sender_bw.values())
    fair = agg / len(t.senders)
    agg_share = round(agg / line, 3)
    fairness = round(jain(list(sender_bw.values())), 3)
    victim = None
    if t.victim is not None and m.alone:
        # What the victim should keep: its bandwidth alone less its sender's fair share of
        # the incast (1/k of the port under DCQCN); head-of-line blocking takes far more.
        keep = m.alone * (1 - 1 / len(t.senders))
        victim = round(m.flows[f"victim {t.victim[0]}->{t.victim[1]}"] / keep, 3) if keep else 0.0
    rx, where = t.receiver, f"incast {len(t.senders)}->1 to {t.receiver} (rail {t.rail})"
    c = prof.counters
    blamed: dict[str, str] = {}  # node -> why (it explains the rest)
    switch_cause = ""
    if c is not None and prio is not None:
        g = m.growth
        marks, cnps = g[rx]["np_ecn_marked_roce_packets"], g[rx]["np_cnp_sent"]
        paused = {s: g[s][pause_duration(prio)] / (prof.duration_s * 1e6) for s in t.senders}
        lost = {n: sum(g[n][k] for k in LOSS_COUNTERS) for n in nodes}
        if not c.ecn_marked.holds(marks):
            switch_cause = "no ECN mark"
            out.infra.append(Infra(
                name(leaf.get(rx, "?"), t.rail), leaf.get(rx, "?"), t.rail, rx,
                "no ECN-marked packet at {at} (each the receiver of an incast)",
                c.ecn_marked.expected() + " at every receiver",
                "the switch marked no packet of its congested ports although the hosts' ECN "
                "settings read back on",
                "enable ECN marking (WRED/ECN profile) on the RoCE priority's queues of this "
                "switch", key))  # fmt: skip
        elif not c.cnp_sent.holds(cnps):
            blamed[rx] = f"{rx} sent {cnps} CNPs for {marks} ECN-marked packets (its NP is off)"
            add("incast", rx, "fail", cnps, c.cnp_sent.expected(),
                f"{where}: {blamed[rx]}", c.cnp_sent)  # fmt: skip
        if not switch_cause and not blamed:
            for s in t.senders:
                handled = g[s]["rp_cnp_handled"]
                share = round(sender_bw[s] / fair, 3) if fair > 0 else None
                if not c.cnp_handled.holds(handled):
                    blamed[s] = (
                        f"{s} handled {handled} CNPs of {cnps} the receiver sent and took "
                        f"{share} fair shares (its RP is off)"
                    )
                    add("incast", s, "fail", handled, c.cnp_handled.expected(),
                        f"{where}: {blamed[s]}", c.cnp_handled)  # fmt: skip
                elif not prof.sender_share.holds(share):
                    blamed[s] = f"{s} took {share} fair shares"
                    add("incast", s, "fail", share, prof.sender_share.expected(),
                        f"{where}: {blamed[s]}", prof.sender_share)  # fmt: skip
        if lost[rx] > 0 and not any(paused.values()) and not blamed:
            switch_cause = (switch_cause + " and " if switch_cause else "") + "no PFC"
            out.infra.append(Infra(
                name(leaf.get(rx, "?"), t.rail), leaf.get(rx, "?"), t.rail, rx,
                "packets lost at {at} (each the receiver of an incast), no sender paused",
                "lossless (PFC pauses, no loss)",
                "the switch dropped RoCE packets instead of pausing the senders (PFC off on "
                "the RoCE priority)",
                "enable PFC on the RoCE priority of this switch's ports", key))  # fmt: skip
        cause = switch_cause and f"explained by the switch in front of {rx} ({switch_cause})"
        why_rest = cause or ("; ".join(blamed.values()) if blamed else "")
        for n in nodes:
            msgs = []
            if n in paused and not c.pause_share.holds(round(paused[n], 4)):
                msgs.append(f"paused {paused[n]:.1%} of the window")
            if not c.pause_storms.holds(g[n][STORMS]):
                msgs.append(f"{g[n][STORMS]} pause storm events")
            if lost[n] > 0:
                msgs.append(f"{lost[n]} packets lost or out of sequence")
            bad = "; ".join(msgs)
            if not bad:
                add("counters", n, "pass", 0, "no loss, pauses within share",
                    f"{where}: no loss, pauses within {c.pause_share.expected()}")  # fmt: skip
            elif cause or (blamed and n not in blamed and rx not in blamed):
                add("counters", n, "pass", bad, "explained", f"{where}: {n} {bad}: {why_rest}")
            elif rx in blamed and n != rx:
                # The receiver sends no CNPs: the senders' pauses are its fault, not theirs.
                add("counters", n, "pass", bad, "explained", f"{where}: {n} {bad}: {why_rest}")
                add("counters", rx, "fail", bad, c.pause_share.expected(),
                    f"{where}: {n} {bad} ({blamed[rx]})", c.pause_share)  # fmt: skip
            else:
                add("counters", n, "fail", bad, c.pause_share.expected(), f"{where}: {bad}",
                    c.pause_share)  # fmt: skip
    if c is None:  # InfiniBand: no host counters; a sender above its share is still its own
        for s in t.senders:
            share = round(sender_bw[s] / fair, 3) if fair > 0 else None
            if not prof.sender_share.holds(share):
                blamed[s] = f"{s} took {share} fair shares"
                add("incast", s, "fail", share, prof.sender_share.expected(),
                    f"{where}: {blamed[s]}", prof.sender_share)  # fmt: skip
    # The aggregate, fairness (the receiver's: one index per incast), then the victim.
    explained = switch_cause or (blamed and "; ".join(blamed.values()))
    ok_bw = prof.aggregate.holds(agg_share)
    detail = f"aggregate {agg_share:g} of line rate, Jain {fairness:g}"
    fmsg = f"{where}: Jain {fairness:g} over {len(t.senders)} senders"
    if prof.fairness.holds(fairness):
        add("fairness", rx, "pass", fairness, prof.fairness.expected(), fmsg, prof.fairness)
    elif explained:  # a sender over its share, or the switch
        add("fairness", rx, "pass", fairness, prof.fairness.expected(),
            f"{fmsg}: explained ({explained})", prof.fairness)  # fmt: skip
    else:
        add("fairness", rx, "fail", fairness, prof.fairness.expected(), fmsg, prof.fairness)
    if m.xmit_wait is not None:
        detail += f", PortXmitWait +{m.xmit_wait} ticks at {rx}'s switch port"
    for n in nodes:
        if n in blamed:
            continue
        if ok_bw:
            add("incast", n, "pass", agg_share, prof.aggregate.expected(),
                f"{where}: {detail}", prof.aggregate)  # fmt: skip
        elif explained:
            add("incast", n, "pass", agg_share, prof.aggregate.expected(),
                f"{where}: {detail}: explained ({explained})", prof.aggregate)  # fmt: skip
        elif n == rx:
            add("incast", n, "fail", agg_share, prof.aggregate.expected(), f"{where}: {detail}",
                prof.aggregate)  # fmt: skip
        else:
            add("incast", n, "pass", agg_share, prof.aggregate.expected(),
                f"{where}: {detail} (the receiver's rail is judged)", prof.aggregate)  # fmt: skip
    if t.victim is None or victim is None:
        for n in nodes:
            add("victim", n, "pass", None, "no victim flow", f"{where}: no victim flow planned")
        return out
    v, w = t.victim
    vmsg = (
        f"{where}: victim {v}->{w} at {victim:g} of what it keeps beside its incast flow "
        f"({m.alone:g} Gb/s alone)"
    )
    for n in nodes:
        if prof.victim.holds(victim):
            add("victim", n, "pass", victim, prof.victim.expected(), vmsg, prof.victim)
        elif rx in blamed and n == rx:
            add(
                "victim",
                n,
                "fail",
                victim,
                prof.victim.expected(),
                f"{vmsg}: head-of-line blocked by {rx}'s pauses ({blamed[rx]})",
                prof.victim,
            )
        elif explained or n != v:
            add(
                "victim",
                n,
                "pass",
                victim,
                prof.victim.expected(),
                f"{vmsg}: {explained or 'the victim sender is judged'}",
                prof.victim,
            )
        else:
            add("victim", n, "fail", victim, prof.victim.expected(), vmsg, prof.victim)
    return out


def judge_bisection(
    t: TrafficTest,
    m: Measured,
    prof: TrafficProfile,
    leaf: Mapping[str, str],
    key: str,
    name: Namer = switch_name,
    cables: Mapping[str, Sequence[Cable]] | None = None,
) -> Judged:
    out = Judged()

    def add(node: str, status: Status, observed: float | str | None,
            expected: str, msg: str, ref: Threshold | None = None) -> None:  # fmt: skip
        out.findings.append(
            Finding("bisection", node, t.rail, status, observed, expected, msg, ref, key)
        )

    where = f"bisection of {len(t.pairs)} flows (rail {t.rail})"
    if m.error is not None:
        for n in t.nodes():
            add(n, "error", None, "a load test", f"{where}: {m.error}")
        return out
    bws = {(a, b): m.flows[f"{a}->{b}"] for a, b in t.pairs}
    agg = round(sum(bws.values()) / (len(bws) * prof.line_rate_gbps), 3)
    med = median(list(bws.values()))
    # Half the flows or more slow: the median is slow too; line rate is the reference then.
    line = prof.line_rate_gbps
    ref = med if prof.bisection.holds(med / line) and not t.retest else line
    share = {p: round(v / ref, 3) if ref > 0 else 0.0 for p, v in bws.items()}
    slow = [p for p in bws if not prof.per_flow.holds(share[p])]
    leaves = None
    if slow:
        common = set.intersection(*({leaf.get(a, "?"), leaf.get(b, "?")} for a, b in slow))
        leaves = sorted(common)
    detail = f"aggregate {agg:g} of N/2 x line rate, {len(slow)} of {len(bws)} flows slow"
    if t.retest:
        # Two flows out of the suspect leaf and two into it, partners under a good leaf.
        leaves = [t.retest] if slow else []
    elif leaves and len(leaves) > 1:
        out.suspects = tuple(leaves)
    if leaves and len(leaves) == 1:
        (lf,) = leaves
        component, why = shared_cable(lf, m.port_waits, cables or {})
        out.infra.append(Infra(
            component or f"{name(lf, t.rail)} uplinks", lf, t.rail,
            ", ".join(f"{a}->{b}" for a, b in slow),
            "bisection flows {at} through it at half speed or less",
            prof.per_flow.expected() + " of the reference flow",
            f"the slow flows of the bisection all cross {lf}'s uplinks"
            + (f" and share {component}: {why}" if component else
               ": an uplink down or static routes putting several flows on one uplink"),
            "check the leaf's uplinks (link state, errors) and its routing (ECMP/adaptive "
            "routing, static routes)", key, uplink=True))  # fmt: skip
    for a, b in t.pairs:
        for n in (a, b):
            p = (a, b)
            msg = f"{where}: {a}->{b} {bws[p]:g} Gb/s, {share[p]:g} of the reference; {detail}"
            if t.retest and not slow:
                add(n, "pass", share[p], prof.per_flow.expected(),
                    f"{msg}: {t.retest}'s uplinks cleared", prof.per_flow)  # fmt: skip
            elif p not in slow and (prof.bisection.holds(agg) or leaves):
                add(n, "pass", share[p], prof.per_flow.expected(), msg, prof.per_flow)
            elif leaves and len(leaves) == 1:
                add(n, "pass", share[p], prof.per_flow.expected(),
                    f"{msg}: explained by {leaves[0]}'s uplinks", prof.per_flow)  # fmt: skip
            elif p in slow:
                add(n, "fail", share[p], prof.per_flow.expected(), msg, prof.per_flow)
            else:
                add(n, "fail", agg, prof.bisection.expected(), msg, prof.bisection)
    return out


def shared_cable(
    leaf: str, waits: Mapping[tuple[int, int], int], cables: Mapping[str, Sequence[Cable]]
) -> tuple[str, str]:
    """The one uplink cable of `leaf` the slow flows share, by both ends (`leaf03 P17 ->
    spine01 P1`), and why: its PortXmitWait growth (both ends) at least CABLE_OUTLIER times the
    median of the leaf's uplinks; and, where the leaf has fewer linked uplinks than most
    leaves, that one is missing (its flows moved here). ("", "") unless exactly one is."""
    mine = cables.get(leaf, ())
    if not waits or len(mine) < 2:
        return "", ""
    grew = {c: waits.get((c[0], c[1]), 0) + waits.get((c[3], c[4]), 0) for c in mine}
    mid = median(list(grew.values()))
    hot = [c for c, g in grew.items() if g >= CABLE_OUTLIER * max(mid, 1)]
    if len(hot) != 1:
        return "", ""
    (c,) = hot
    counts = sorted(len(v) for v in cables.values())
    usual = max(set(counts), key=counts.count)
    why = (f"PortXmitWait +{grew[c]} ticks at its ends, the leaf's uplinks {mid:g} at the "
           "median")  # fmt: skip
    if len(mine) < usual:
        why += (
            f"; {leaf} has {len(mine)} uplinks linked where most leaves have {usual}: "
            "the flows of the one down moved onto this one"
        )
    else:
        why += ": static routes putting several flows on it"
    return f"{leaf} P{c[1]} -> {c[2]} P{c[4]}", why
