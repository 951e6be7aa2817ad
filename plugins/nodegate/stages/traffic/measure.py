"""What one traffic test measured, pure: every flow's bandwidth, whether the flows overlapped,
and each node's counter growth (RoCE), or why the test cannot be judged (a tool error, a
counter not reported or not moving, flows that did not overlap: ERROR, never a pass)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nodegate.core.errors import ParseError
from nodegate.core.thresholds import Threshold
from nodegate.framework.active.campaign import Execution, Side
from nodegate.parsers.ethtool import parse_ethtool_stats
from nodegate.parsers.perfquery import parse_perfquery_extended
from nodegate.parsers.rdma_stat import parse_rdma_statistic
from nodegate.stages.ib_pairs.perftest import bandwidth_of
from nodegate.stages.traffic.plan import TrafficTest
from nodegate.stages.traffic.profile import LOSS_COUNTERS
from nodegate.stages.traffic.run import COUNTERS_SPLIT, XMIT_WAIT, Timing, client_result

RECEIVER = ("np_ecn_marked_roce_packets", "np_cnp_sent")
SENDER = ("rp_cnp_handled",)
STORMS = "tx_pause_storm_error_events"


def pause_duration(prio: int) -> str:
    return f"rx_prio{prio}_pause_duration"


def rx_bytes(prio: int) -> str:
    return f"rx_prio{prio}_bytes"


@dataclass(frozen=True, slots=True)
class Measured:
    """A test's numbers: Gb/s per flow name, the victim alone, the counters' growth per node,
    the share of the window all flows overlapped; `error` when it cannot be judged."""

    flows: Mapping[str, float] = field(default_factory=dict)
    alone: float | None = None
    growth: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    overlap: float | None = None
    error: str | None = None
    # PortXmitWait growth on the switch port facing the receiver (InfiniBand, read: `watch`)
    xmit_wait: int | None = None
    # a bisection's: PortXmitWait growth of every switch port read (its leaves and spines)
    port_waits: Mapping[tuple[int, int], int] = field(default_factory=dict)


def overlap_share(timings: Sequence[Timing], duration_s: float) -> float:
    """The share of the -D window during which every client of the load phase ran."""
    load = [t for t in timings if not t.flow.startswith("alone ")]
    if not load or duration_s <= 0:
        return 0.0
    together = min(t.end for t in load) - max(t.start for t in load)
    return max(0.0, min(1.0, together / duration_s))


def counters_of(stdout: str, device: str) -> dict[str, int]:
    """One read: ethtool -S and the rail's `rdma statistic` port, merged (ParseError)."""
    eth, sep, rdma = stdout.partition(COUNTERS_SPLIT)
    if not sep:
        raise ParseError("rdma statistic", "no `rdma statistic` output after ethtool -S")
    ports = parse_rdma_statistic(rdma)
    port = ports.get((device, 1))
    if port is None:
        raise ParseError("rdma statistic", f"printed no {device}/1")
    return {**port, **parse_ethtool_stats(eth)}


def read_failure(s: Side, where: str, stdout: bool = False) -> str | None:
    """Why a counter read gives nothing to judge (not started, timed out, a nonzero exit with
    the tool's own words: stderr's head, or stdout's tail), None if it ran."""
    r = s.result
    if r is None:
        return f"{where}: {s.detail}"
    if r.timed_out or r.rc != 0:
        said = r.stdout.strip()[-200:] if stdout else r.stderr.strip()[:200]
        return f"{where}: " + ("timed out" if r.timed_out else f"exited {r.rc}: {said}")
    return None


def growth(run: Execution, device: str, names: Sequence[str]) -> dict[str, dict[str, int]] | str:
    """Per node: how much each counter of `names` grew between the reads, or why not known."""
    reads: dict[str, dict[str, dict[str, int]]] = {}
    for s in run.sides:
        if not s.role.startswith("counters "):
            continue
        phase = s.role.split(" ", 1)[1]
        r = s.result
        failed = read_failure(s, f"{s.node}: counters {phase}")
        if failed is not None or r is None:
            return failed or ""
        try:
            reads.setdefault(s.node, {})[phase] = counters_of(r.stdout, device)
        except ParseError as exc:
            return f"{s.node}: counters {phase}: unrecognized output: {exc.reason}"
    out: dict[str, dict[str, int]] = {}
    for node, by in sorted(reads.items()):
        if set(by) != {"before", "after"}:
            return f"{node}: counters not read before and after"
        missing = [n for n in names if n not in by["before"] or n not in by["after"]]
        if missing:
            return f"{node}: counters not reported: {', '.join(missing)}"
        fell = [n for n in names if by["after"][n] < by["before"][n]]
        if fell:
            return f"{node}: counters went down between the reads: {', '.join(fell)}"
        out[node] = {n: by["after"][n] - by["before"][n] for n in names}
    return out


def port_waits(run: Execution) -> dict[tuple[int, int], int] | str:
    """PortXmitWait growth of every (LID, port) the `xmit_wait` reads printed (one read per
    LID and phase: role `xmit_wait before 27`), or why not known (a tool error, output not
    perfquery's, a switch read once only, a counter that fell)."""
    reads: dict[str, dict[tuple[int, int], int]] = {"before": {}, "after": {}}
    lids: dict[str, set[int]] = {"before": set(), "after": set()}
    for s in run.sides:
        if not s.role.startswith(XMIT_WAIT + " "):
            continue
        _, phase, shown = s.role.split(" ")
        lid = int(shown)
        r = s.result
        where = f"{s.node}: perfquery of LID {lid} {phase}"
        # infiniband-diags print their IBEXIT line on stdout
        failed = read_failure(s, where, stdout=True)
        if failed is not None or r is None:
            return failed or ""
        try:
            ports = parse_perfquery_extended(r.stdout)
        except ParseError as exc:
            return f"{where}: unrecognized output: {exc.reason}"
        lids[phase].add(lid)
        for p in ports:
            if p.lid == lid and "PortXmitWait" in p.counters:
                reads[phase][(p.lid, p.port)] = p.counters["PortXmitWait"]
    if lids["before"] != lids["after"]:
        gone = sorted(lids["before"] ^ lids["after"])
        return f"perfquery of LID {gone[0]}: not read before and after"
    out: dict[tuple[int, int], int] = {}
    for (sw, port), after in sorted(reads["after"].items()):
        before = reads["before"].get((sw, port))
        if before is None:
            return f"perfquery of LID {sw}: port {port} printed after the load only"
        if after < before:
            return f"perfquery of LID {sw} port {port}: PortXmitWait went down between the reads"
        out[(sw, port)] = after - before
    return out


def measure(
    test: TrafficTest,
    run: Execution,
    timings: Sequence[Timing],
    duration_s: float,
    device: str,
    prio: int | None,
    min_overlap: float,
    watch: tuple[int, int] | None = None,
    xmit_wait: Threshold | None = None,
) -> Measured:
    """Sanity of one test: every flow's number and, on RoCE, the counters' growth; on
    InfiniBand with `watch` (LID, port facing the receiver), its XmitWait growth, which must
    hold `xmit_wait` where two senders or more oversubscribe the port."""
    if run.error is not None:
        return Measured(error=run.error)
    flows: dict[str, float] = {}
    for name, src, _dst in test.flows():
        res = client_result(run, name)
        if res is None:
            return Measured(error=f"flow {name}: client on {src} did not run")
        bw, err = bandwidth_of(res, "client")
        if err is not None or bw is None:
            return Measured(error=f"flow {name} (on {src}): {err or 'no result'}")
        flows[name] = bw
        server = next((s.result for s in run.sides if s.role == f"server {name}"), None)
        if server is None or server.rc != 0:
            why = "did not end" if server is None or server.rc is None else f"exited {server.rc}"
            return Measured(error=f"flow {name}: server {why}")
    alone = None
    if test.victim is not None:
        v, w = test.victim
        res = client_result(run, f"alone {v}->{w}")
        if res is None:
            return Measured(error=f"victim alone {v}->{w}: did not run")
        alone, err = bandwidth_of(res, "client")
        if err is not None:
            return Measured(error=f"victim alone {v}->{w} (on {v}): {err}")
    share = overlap_share(timings, duration_s)
    if share < min_overlap:
        return Measured(
            flows, alone, overlap=share,
            error=f"the flows overlapped {share:.0%} of the {duration_s:g} s window "
            f"(at least {min_overlap:.0%} needed): not a load test",
        )  # fmt: skip
    if prio is None:
        if test.kind == "bisection" and any(s.role.startswith(XMIT_WAIT) for s in run.sides):
            waits = port_waits(run)
            if isinstance(waits, str):
                return Measured(flows, alone, overlap=share, error=waits)
            return Measured(flows, alone, overlap=share, port_waits=waits)
        if watch is None:
            return Measured(flows, alone, overlap=share)
        lid, port = watch
        waits = port_waits(run)
        if isinstance(waits, str):
            return Measured(flows, alone, overlap=share, error=waits)
        if (lid, port) not in waits:
            why = f"perfquery of LID {lid}: no PortXmitWait for port {port}"
            return Measured(flows, alone, overlap=share, error=why)
        ticks = waits[(lid, port)]
        if xmit_wait is not None and len(test.senders) > 1 and not xmit_wait.holds(ticks):
            return Measured(
                flows, alone, overlap=share, xmit_wait=ticks,
                error=f"{test.receiver}'s switch port (LID {lid} port {port}): PortXmitWait "
                f"grew {ticks} ticks under an incast of {len(test.senders)} senders, "
                f"{xmit_wait.expected()} expected (the counter does not show congestion that "
                "must exist: cannot judge it)",
            )  # fmt: skip
        return Measured(flows, alone, overlap=share, xmit_wait=ticks)
    names = (*RECEIVER, *SENDER, *LOSS_COUNTERS, pause_duration(prio), STORMS, rx_bytes(prio))
    got = growth(run, device, names)
    if isinstance(got, str):
        return Measured(flows, alone, overlap=share, error=got)
    # Counters that do not move under load are not counters one can gate on.
    receivers = {d for _n, _s, d in test.flows()}
    still = sorted(r for r in receivers if got[r][rx_bytes(prio)] <= 0)
    if still:
        return Measured(
            flows, alone, got, share,
            f"{', '.join(still)}: {rx_bytes(prio)} did not move under load (counters not "
            "counting: cannot judge congestion)",
        )  # fmt: skip
    return Measured(flows, alone, got, share)


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: (sum x)^2 / (n sum x^2), 1 when all equal.

    >>> round(jain([100, 100, 50]), 3)
    0.9
    """
    sq = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * sq) if sq > 0 else 0.0


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
