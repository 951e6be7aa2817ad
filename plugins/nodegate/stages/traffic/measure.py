"""What one traffic test measured, pure: every flow's bandwidth, whether the flows overlapped,
and each node's counter growth (RoCE), or why the test cannot be judged (a tool error, a
counter not reported or not moving, flows that did not overlap: ERROR, never a pass)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nodegate.core.errors import ParseError
from nodegate.framework.active.campaign import Execution
from nodegate.parsers.ethtool import parse_ethtool_stats
from nodegate.parsers.rdma_stat import parse_rdma_statistic
from nodegate.stages.ib_pairs.perftest import bandwidth_of
from nodegate.stages.traffic.plan import TrafficTest
from nodegate.stages.traffic.profile import LOSS_COUNTERS
from nodegate.stages.traffic.run import COUNTERS_SPLIT, Timing, client_result

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


def growth(run: Execution, device: str, names: Sequence[str]) -> dict[str, dict[str, int]] | str:
    """Per node: how much each counter of `names` grew between the reads, or why not known."""
    reads: dict[str, dict[str, dict[str, int]]] = {}
    for s in run.sides:
        if not s.role.startswith("counters "):
            continue
        phase = s.role.split(" ", 1)[1]
        r = s.result
        if r is None:
            return f"{s.node}: counters {phase}: {s.detail}"
        if r.timed_out or r.rc != 0:
            why = "timed out" if r.timed_out else f"exited {r.rc}: {r.stderr.strip()[:200]}"
            return f"{s.node}: counters {phase}: {why}"
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


def measure(
    test: TrafficTest,
    run: Execution,
    timings: Sequence[Timing],
    duration_s: float,
    device: str,
    prio: int | None,
    min_overlap: float,
) -> Measured:
    """Sanity of one test: every flow's number and, on RoCE, the counters' growth."""
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
        return Measured(flows, alone, overlap=share)
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
