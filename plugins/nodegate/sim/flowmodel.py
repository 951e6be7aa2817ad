"""The simulated fabric under load: a flow-level model (standard library only).

Every active flow's rate comes from every flow running at that moment: weighted max-min fair
share (progressive filling) over the capacities of the links each flow crosses — the sender's
NIC, its leaf's uplinks when it leaves the leaf, the receiver's leaf downlinks, the receiver's
NIC — on the flow's rail (each rail its own plane). Then the congestion regime of every
saturated link:

- ECN marked by the switch, CNPs sent by the receiver (NP) and handled by the sender (RP):
  DCQCN — fair shares, ECN marks and CNPs counted, few pauses;
- a sender with its RP off ignores the CNPs: it takes `RP_OFF_WEIGHT` shares of the link;
- no effective ECN (the switch does not mark, or the receiver's NP sends no CNPs) with PFC:
  the switch pauses the senders' ports; head-of-line blocking caps every other flow of a paused
  sender at its congested flow's rate (a victim flow slows), pause time counted at the senders;
- no PFC at the switch (`pfc_off`): with ECN the burst at the incast's onset drops a few
  packets (sequence errors at the receiver); without ECN too the drops collapse the aggregate
  (`COLLAPSE`) and the senders retransmit;
- a leaf's uplinks (one per host unless `uplinks` says, each at `uplink_gbps`): flows through
  a leaf take one uplink each; an uplink the fabric has down (its `uplinks` entry, from the
  fabric's `uplink_down`, sim/fabric.py) passes its flow to the next uplink that is up, and
  `static_route_collision` routes the first two flows over uplink 0: those two share it.

XmitWait: a saturated switch egress port shared by several flows (where the queue builds: the
leaf port facing an incast's receiver, an uplink two flows collide on, the spine port down to a
leaf) has data it cannot send for the share of the time its offered load exceeds its capacity,
1 - capacity / offered (offered: each flow's sender line rate, split over that sender's flows);
it counts `XMIT_WAIT_TICKS_PER_S` ticks per second of that. A port whose flows fit counts none.
Only switches with hosts on the InfiniBand fabric count (perfquery reads them: RoCE leaves are
Ethernet switches).

Counters per flow (marks, CNPs, pauses, sequence errors, retransmission timeouts) follow from
its rate over each interval. `flow_average` integrates one flow's rate over its own lifetime,
from the start and end times of every flow that overlapped it (sim/perftest_sim.py).

Topology document (`traffic.json`, written at fleet build, sim/tools/traffic.py):
  {"nodes": {name: {"leaf": str, "rate_gbps": {rail: float}, "np_off": [rails],
                     "rp_off": [rails]}},
   "leaf_nodes": {leaf: count}, "uplinks": int,
   "switch_faults": [{"kind": str, "leaf": str, "rail": int | None}],
   "switches": {"LEAF|RAIL": {"lid": int, "hosts": {node: port},
                              "uplinks": [[port, spine LID, spine port, up], ...]}}}
(`switches` only where the fleet has a fabric: the fabric's switch of each leaf and rail.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

EFFICIENCY = 0.965  # large-message RDMA write goodput on a 400G link
RP_OFF_WEIGHT = 3.0  # a sender that ignores CNPs takes about three fair shares
COLLAPSE = 0.3  # goodput left of a congested port that drops without PFC or ECN
ONSET_LOSS = 0.97  # goodput left with ECN but no PFC: the incast's onset burst drops
MTU_BYTES = 4096
MARK_SHARE = 0.02  # of a congested flow's packets the switch marks (DCQCN's Kmin..Kmax band)
CNP_PER_MARK = 0.5  # the NP coalesces marks into CNPs (one per QP per interval)
PAUSE_SHARE_DCQCN = 0.002  # of the window a DCQCN sender is paused (bursts only)
PAUSE_FRAMES_PER_S = 20_000  # pause frames a paused port receives per second paused
DROP_SHARE = 0.01  # of a lossy flow's packets lost (out of sequence at the receiver)
# PortXmitWait ticks per second of a port that has data and cannot send the whole time (the
# sim's tick; its starved uplink, sim/fabric_spec.py, ticks at 90 % of this)
XMIT_WAIT_TICKS_PER_S = 50_000_000


@dataclass(frozen=True, slots=True)
class Flow:
    """One flow: `src` sends to `dst` on `rail`; `weight` > 1 for a sender that ignores CNPs."""

    id: str
    src: str
    dst: str
    rail: int


@dataclass
class Counters:
    """What one flow adds to the NIC counters of its ends over an interval."""

    sender: dict[str, float] = field(default_factory=dict)
    receiver: dict[str, float] = field(default_factory=dict)
    # "LID:PORT" of a switch port -> the PortXmitWait ticks this flow's share of its wait adds
    switch: dict[str, float] = field(default_factory=dict)

    def add(self, other: Counters) -> None:
        for mine, theirs in (
            (self.sender, other.sender), (self.receiver, other.receiver),
            (self.switch, other.switch),
        ):  # fmt: skip
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0.0) + v


class Fabric:
    """The fabric's links and faults, from the topology document."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.nodes: Mapping[str, Mapping[str, Any]] = doc["nodes"]
        self.leaf_nodes: Mapping[str, int] = doc["leaf_nodes"]
        self.uplinks = int(doc.get("uplinks") or 0)  # 0: one per host of the leaf
        self.uplink_gbps = float(doc.get("uplink_gbps", 400.0))
        self.switches: Mapping[str, Mapping[str, Any]] = doc.get("switches") or {}
        self.faults: dict[tuple[str, str, int], bool] = {}
        for f in doc.get("switch_faults", ()):
            rails = range(64) if f.get("rail") is None else (int(f["rail"]),)
            for r in rails:
                self.faults[(str(f["kind"]), str(f["leaf"]), r)] = True

    def leaf(self, node: str) -> str:
        return str(self.nodes[node]["leaf"])

    def rate(self, node: str, rail: int) -> float:
        rates = self.nodes[node]["rate_gbps"]
        return float(rates.get(str(rail), rates.get("default", 400.0)))

    def fault(self, kind: str, leaf: str, rail: int) -> bool:
        return self.faults.get((kind, leaf, rail), False)

    def np_on(self, node: str, rail: int) -> bool:
        return rail not in self.nodes[node].get("np_off", ())

    def rp_on(self, node: str, rail: int) -> bool:
        return rail not in self.nodes[node].get("rp_off", ())

    def uplinks_of(self, leaf: str) -> int:
        """Uplinks per leaf and rail: as many as hosts (non-blocking) unless the model says."""
        return self.uplinks or max(1, int(self.leaf_nodes.get(leaf, 1)))

    def up(self, leaf: str, rail: int, k: int) -> bool:
        """Uplink k of the leaf on the rail has a link (the fabric's, where it has one)."""
        ups = self.switches.get(f"{leaf}|{rail}", {}).get("uplinks") or ()
        return k >= len(ups) or bool(ups[k][3])

    def uplink(self, leaf: str, rail: int, i: int) -> int:
        """The uplink the `i`-th flow through a leaf (by id) takes: spread one per uplink; an
        uplink that is down passes its flow to the next one up; `static_route_collision` puts
        the first two flows on uplink 0."""
        n = self.uplinks_of(leaf)
        if self.fault("static_route_collision", leaf, rail):
            return max(0, i - 1) % n
        k = i % n
        for step in range(n):
            if self.up(leaf, rail, (k + step) % n):
                return (k + step) % n
        return k

    def port_of(self, link: tuple[str, ...]) -> str | None:
        """The switch egress port ("LID:PORT") that transmits onto a model link, where the
        switch is on the InfiniBand fabric; None for a host's own port or no fabric."""
        kind = link[0]
        if kind == "tx":
            return None
        leaf = self.leaf(link[1]) if kind == "rx" else link[1]
        sw = self.switches.get(f"{leaf}|{link[2]}")
        if not sw or not sw.get("hosts"):
            return None
        if kind == "rx":
            port = sw["hosts"].get(link[1])
            return None if port is None else f"{sw['lid']}:{port}"
        ups = sw.get("uplinks") or ()
        k = int(link[3])
        if k >= len(ups):
            return None
        lp, spine_lid, spine_port = ups[k][0], ups[k][1], ups[k][2]
        return f"{sw['lid']}:{lp}" if kind == "up" else f"{spine_lid}:{spine_port}"

    def links(self, flows: Sequence[Flow]) -> dict[str, list[tuple[str, ...]]]:
        """The links each flow crosses, as keys: ("tx", node, rail), ("up", leaf, rail, k),
        ("down", leaf, rail, k), ("rx", node, rail)."""
        out: dict[str, list[tuple[str, ...]]] = {}
        through: dict[tuple[str, str, int], list[str]] = {}
        for f in sorted(flows, key=lambda f: (f.src, f.dst, f.id)):
            ls, ld = self.leaf(f.src), self.leaf(f.dst)
            out[f.id] = [("tx", f.src, str(f.rail))]
            if ls != ld:
                for way, leaf in (("up", ls), ("down", ld)):
                    ids = through.setdefault((way, leaf, f.rail), [])
                    k = self.uplink(leaf, f.rail, len(ids))
                    ids.append(f.id)
                    out[f.id].append((way, leaf, str(f.rail), str(k)))
        for f in flows:
            out[f.id].append(("rx", f.dst, str(f.rail)))
        return out

    def capacity(self, link: tuple[str, ...]) -> float:
        kind, name, rail = link[0], link[1], int(link[2])
        if kind in ("tx", "rx"):
            return self.rate(name, rail)
        return self.uplink_gbps

    def switch_of(self, link: tuple[str, ...], f: Flow) -> str:
        """The leaf whose egress queue builds on this link (it marks ECN, sends pauses)."""
        if link[0] in ("rx", "down"):
            return self.leaf(f.dst)
        return self.leaf(f.src)


def max_min(
    flows: Sequence[Flow],
    links: Mapping[str, list[tuple[str, ...]]],
    capacity: Mapping[tuple[str, ...], float],
    weight: Mapping[str, float],
    cap: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Weighted max-min fair rates by progressive filling; `cap` bounds single flows."""
    rate = dict.fromkeys((f.id for f in flows), 0.0)
    left = dict(capacity)
    active = {f.id for f in flows}
    by_link: dict[tuple[str, ...], set[str]] = {}
    for f in flows:
        for lk in links[f.id]:
            by_link.setdefault(lk, set()).add(f.id)
    caps = dict(cap or {})
    while active:
        # The smallest fill level at which a link saturates or a flow reaches its cap.
        step = float("inf")
        for lk, ids in by_link.items():
            w = sum(weight[i] for i in ids if i in active)
            if w > 0:
                step = min(step, left[lk] / w)
        for i in active:
            if i in caps:
                step = min(step, (caps[i] - rate[i]) / weight[i])
        if step == float("inf"):
            break
        step = max(step, 0.0)
        for i in active:
            rate[i] += step * weight[i]
        for lk, ids in by_link.items():
            left[lk] -= step * sum(weight[i] for i in ids if i in active)
        done = {i for i in active if i in caps and rate[i] >= caps[i] - 1e-9}
        for lk, ids in by_link.items():
            if left[lk] <= 1e-9:
                done |= ids & active
        active -= done
    return rate


@dataclass(frozen=True, slots=True)
class Regime:
    """How congestion is handled on one saturated link for one flow."""

    congested: bool = False
    ecn: bool = False  # marks reach a working NP and the CNPs a working RP
    marked: bool = False  # the switch marks
    cnps: bool = False  # the receiver sends CNPs
    pfc: bool = True
    lossy: bool = False  # dropped packets (no PFC)


def solve(fab: Fabric, flows: Sequence[Flow]) -> tuple[dict[str, float], dict[str, Regime]]:
    """Every flow's goodput (Gb/s) and congestion regime while exactly `flows` run."""
    rates, regime, _ = solve_waits(fab, flows)
    return rates, regime


def solve_waits(
    fab: Fabric, flows: Sequence[Flow]
) -> tuple[dict[str, float], dict[str, Regime], dict[str, dict[str, float]]]:
    """`solve`, and per flow the XmitWait ticks per second it adds at each switch port that
    waits on its path ("LID:PORT": its share of the port's wait, split over the port's flows)."""
    links = fab.links(flows)
    capacity = {lk: fab.capacity(lk) for ls in links.values() for lk in ls}
    weight = {f.id: 1.0 for f in flows}
    first = max_min(flows, links, capacity, weight)
    load: dict[tuple[str, ...], list[Flow]] = {}
    for f in flows:
        for lk in links[f.id]:
            load.setdefault(lk, []).append(f)
    # Saturated links shared by several flows: where queues build (an incast's last hop).
    hot = {
        lk for lk, fs in load.items()
        if len(fs) > 1 and sum(first[f.id] for f in fs) >= capacity[lk] - 1e-6
        and lk[0] != "tx"
    }  # fmt: skip
    waits: dict[str, dict[str, float]] = {f.id: {} for f in flows}
    if fab.switches:
        per_sender: dict[tuple[str, int], int] = {}
        for f in flows:
            per_sender[(f.src, f.rail)] = per_sender.get((f.src, f.rail), 0) + 1
        for lk in hot:
            port = fab.port_of(lk)
            if port is None:
                continue
            fs = load[lk]
            offered = sum(fab.rate(f.src, f.rail) / per_sender[(f.src, f.rail)] for f in fs)
            share = max(0.0, 1.0 - capacity[lk] / offered) if offered > 0 else 0.0
            for f in fs:
                waits[f.id][port] = XMIT_WAIT_TICKS_PER_S * share / len(fs)
    regime: dict[str, Regime] = {}
    for f in flows:
        mine = [lk for lk in links[f.id] if lk in hot]
        if not mine:
            regime[f.id] = Regime()
            continue
        sw = fab.switch_of(mine[-1], f)
        marked = not fab.fault("ecn_not_marked", sw, f.rail)
        cnps = marked and fab.np_on(f.dst, f.rail)
        pfc = not fab.fault("pfc_off", sw, f.rail)
        regime[f.id] = Regime(True, cnps and fab.rp_on(f.src, f.rail), marked, cnps, pfc,
                              lossy=not pfc)  # fmt: skip
    # A sender that ignores CNPs (its RP off) on a link where the others back off.
    for f in flows:
        r = regime[f.id]
        if r.congested and r.cnps and not fab.rp_on(f.src, f.rail):
            weight[f.id] = RP_OFF_WEIGHT
    rate = max_min(flows, links, capacity, weight)
    # PFC without effective ECN: the paused sender's port blocks its other flows too.
    hol: dict[str, float] = {}
    for f in flows:
        r = regime[f.id]
        if r.congested and not r.cnps and r.pfc:
            hol[f.src + "/" + str(f.rail)] = min(
                hol.get(f.src + "/" + str(f.rail), float("inf")), rate[f.id]
            )
    if hol:
        cap = {
            f.id: hol[f.src + "/" + str(f.rail)]
            for f in flows
            if f.src + "/" + str(f.rail) in hol and not regime[f.id].congested
        }
        rate = max_min(flows, links, capacity, weight, cap)
    out = {}
    for f in flows:
        r = regime[f.id]
        g = rate[f.id] * EFFICIENCY
        if r.lossy:
            g *= ONSET_LOSS if r.cnps else COLLAPSE
        out[f.id] = g
    return out, regime, waits


def counters(
    fab: Fabric, f: Flow, goodput: float, r: Regime, sender_tx: float, seconds: float
) -> Counters:
    """What `f` adds to its ends' counters over `seconds` at `goodput` (its sender's total
    goodput `sender_tx`)."""
    c = Counters()
    pkts = goodput * 1e9 / 8 / MTU_BYTES * seconds
    moved = goodput * 1e9 / 8 * seconds
    c.sender["tx_prio3_bytes"], c.receiver["rx_prio3_bytes"] = moved, moved
    c.sender["tx_prio3_packets"], c.receiver["rx_prio3_packets"] = pkts, pkts
    if not r.congested:
        return c
    line = fab.rate(f.src, f.rail) * EFFICIENCY
    share = goodput / sender_tx if sender_tx > 0 else 0.0
    if r.marked:
        c.receiver["np_ecn_marked_roce_packets"] = pkts * MARK_SHARE
        if r.cnps:
            cnp = pkts * MARK_SHARE * CNP_PER_MARK
            c.receiver["np_cnp_sent"] = cnp
            key = "rp_cnp_handled" if fab.rp_on(f.src, f.rail) else "rp_cnp_ignored"
            c.sender[key] = cnp
    if r.pfc:
        paused = PAUSE_SHARE_DCQCN if r.cnps else max(0.0, 1.0 - sender_tx / line)
        c.sender["rx_prio3_pause_duration"] = paused * seconds * 1e6 * share  # microseconds
        c.sender["rx_prio3_pause"] = paused * seconds * PAUSE_FRAMES_PER_S * share

    else:
        lost = pkts * (DROP_SHARE if r.cnps else 20 * DROP_SHARE)
        c.receiver["out_of_sequence"] = lost
        c.receiver["packet_seq_err"] = lost / 4
        if not r.cnps:
            c.sender["local_ack_timeout_err"] = lost / 50
    return c


def flow_average(
    fab: Fabric, me: str, spans: Mapping[str, tuple[Flow, float, float | None]], now: float
) -> tuple[float, Counters, float]:
    """Flow `me`'s average goodput over its own span, the counters it adds, and the share of
    its span during which it shared a link with any other flow."""
    mine, t0, t1 = spans[me]
    end = now if t1 is None else t1
    cuts = {t0, end}
    for _, (_, s, e) in spans.items():
        for t in (s, now if e is None else e):
            if t0 < t < end:
                cuts.add(t)
    times = sorted(cuts)
    total, got, shared = Counters(), 0.0, 0.0
    for a, b in zip(times, times[1:], strict=False):
        mid = (a + b) / 2
        live = [fl for fl, s, e in spans.values() if s <= mid < (now if e is None else e)]
        rates, regimes, waits = solve_waits(fab, live)
        tx = sum(rates[fl.id] for fl in live if fl.src == mine.src and fl.rail == mine.rail)
        got += rates[me] * (b - a)
        total.add(counters(fab, mine, rates[me], regimes[me], tx, b - a))
        total.add(Counters(switch={p: w * (b - a) for p, w in waits[me].items()}))
        if len(live) > 1:
            shared += b - a
    span = end - t0
    return (got / span if span > 0 else 0.0), total, (shared / span if span > 0 else 0.0)


def flows_of(docs: Iterable[Mapping[str, Any]]) -> dict[str, tuple[Flow, float, float | None]]:
    """Registry records -> spans."""
    out = {}
    for d in docs:
        f = Flow(str(d["id"]), str(d["src"]), str(d["dst"]), int(d["rail"]))
        out[f.id] = (f, float(d["start"]), None if d.get("end") is None else float(d["end"]))
    return out
