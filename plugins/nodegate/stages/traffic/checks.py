"""The checks of stage `traffic` (judged by the active skeleton's phases) and the verdicts of
one node's rail from every test it took part in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from nodegate.core.checks import Chart, Check, CheckTable
from nodegate.core.values import Status, Verdict
from nodegate.core.verdicts import marked
from nodegate.stages.traffic.blame import Area, Finding, Infra
from nodegate.stages.traffic.profile import TrafficProfile

INCAST: Check[None, TrafficProfile] = Check(
    "traffic.incast",
    "the rail as an incast's receiver or sender: the aggregate; on RoCE ECN marks and CNPs "
    "sent at the receiver, CNPs handled and no more than its share at every sender; on "
    "InfiniBand with the fabric stage, XmitWait on the receiver's switch port.",
    None, "rail", "test_traffic_incast", "pipeline", chart=Chart(0, by_rail=True),
)  # fmt: skip
FAIRNESS: Check[None, TrafficProfile] = Check(
    "traffic.fairness",
    "the incast the rail receives: Jain's fairness index over its senders' bandwidths (one "
    "observed index per rail, its own incast).",
    None, "rail", "test_traffic_fairness", "pipeline", chart=Chart(3, by_rail=True),
)  # fmt: skip
VICTIM: Check[None, TrafficProfile] = Check(
    "traffic.victim",
    "a flow away from the incast keeps its share of its bandwidth alone (no head-of-line "
    "blocking).",
    None, "rail", "test_traffic_victim", "pipeline", chart=Chart(1, by_rail=True),
)  # fmt: skip
BISECTION: Check[None, TrafficProfile] = Check(
    "traffic.bisection",
    "the rail's bisection flow across the spine reaches its share of the median flow, and the "
    "bisection its share of N/2 x line rate.",
    None, "rail", "test_traffic_bisection", "pipeline", chart=Chart(2, by_rail=True),
)  # fmt: skip
COUNTERS: Check[None, TrafficProfile] = Check(
    "traffic.counters",
    "on RoCE, under load: no loss or sequence error, pauses within the profile's share of the "
    "window, no pause storm.",
    None, "rail", "test_traffic_counters", "pipeline",
)  # fmt: skip
FABRIC: Check[None, TrafficProfile] = Check(
    "traffic.fabric",
    "no switch or uplink fault under load behind the node (a fault there is a repair-list item "
    "and rejects no node).",
    None, "switch", "test_traffic_fabric", "pipeline", infrastructure=True,
)  # fmt: skip
CLEANUP: Check[None, TrafficProfile] = Check(
    "traffic.cleanup",
    "no ib_write_bw process is left on the node after the stage.",
    None, "process", "test_no_stray_traffic", "pipeline",
)  # fmt: skip

CHECKS: CheckTable[None, TrafficProfile] = CheckTable(
    "traffic", [INCAST, FAIRNESS, VICTIM, BISECTION, COUNTERS, FABRIC, CLEANUP]
)
BY_AREA: Mapping[Area, Check[None, TrafficProfile]] = {
    "incast": INCAST, "fairness": FAIRNESS, "victim": VICTIM, "bisection": BISECTION,
    "counters": COUNTERS,
}  # fmt: skip
Refs = Callable[[str, str], tuple[str, ...]]  # (test key, node) -> evidence refs


def rail_component(device: str, rail: int) -> str:
    return f"{device} (rail {rail})"


def area_verdict(
    area: Area, node: str, rail: int, device: str, found: Sequence[Finding], refs: Refs,
    roce: bool,
) -> Verdict:  # fmt: skip
    """One check on one node's rail: FAIL if a test blamed it, ERROR if a test could not be
    judged, PASS if it passed in every test it took part in, ERROR if it took part in none."""
    check = BY_AREA[area]
    comp = rail_component(device, rail)
    if area == "counters" and not roce:
        return Verdict(
            check.id,
            node,
            Status.PASS,
            comp,
            expected="not applicable",
            message="InfiniBand rail: no RoCE counters (traffic.counters: null)",
        )
    ev = tuple(dict.fromkeys(r for f in found for r in refs(f.test_key, node)))
    for status, st in (("fail", Status.FAIL), ("error", Status.ERROR)):
        bad = [f for f in found if f.status == status]
        if bad:
            f = bad[0]
            more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
            hint = _hint(area) if st is Status.FAIL else None
            return Verdict(check.id, node, st, comp, f.observed, f.expected,
                           message=f.message + more, remediation=hint, evidence=ev,
                           reference=f.reference)  # fmt: skip
    if not found:
        return Verdict(
            check.id,
            node,
            Status.ERROR,
            comp,
            None,
            "tested",
            message=f"not in any {area} test on rail {rail}",
            evidence=ev,
        )
    f = found[0]
    return Verdict(check.id, node, Status.PASS, comp, f.observed, f.expected,
                   message="; ".join(x.message for x in found[:3]), evidence=ev,
                   reference=f.reference)  # fmt: skip


def _hint(area: Area) -> str:
    return {
        "incast": "check the NIC's DCQCN (ECN notification and reaction points: firmware "
        "settings, mlxconfig ROCE_CC_PRIO_MASK) and its port; retest",
        "fairness": "check the congestion control of the incast's senders (DCQCN reaction "
        "points, or IB congestion control) and the receiver's port; retest",
        "victim": "check PFC/ECN on the receiver whose pauses block this port; retest",
        "bisection": "check the rail's cable and port; retest against other partners",
        "counters": "check the port's counters, cable and the congestion control settings",
    }[area]


def fabric_verdicts(
    node: str, leaf_on: Callable[[int], str], infra: Sequence[Infra], refs: Refs,
    switch_label: str,
) -> list[Verdict]:  # fmt: skip
    """`traffic.fabric` for a node: one mark per infrastructure fault of the leaf its rail
    lands on (`leaf_on(rail)`), else a plain PASS."""
    mine = [i for i in infra if leaf_on(i.rail) == i.leaf]
    if not mine:
        return [
            Verdict(
                FABRIC.id,
                node,
                Status.PASS,
                switch_label,
                "no fault",
                "no fault",
                message=f"no switch or uplink fault found under load behind {switch_label}",
            )
        ]
    return [mark_infrastructure(node, i, refs(i.test_key, node)) for i in mine]


def mark_infrastructure(node: str, i: Infra, evidence: tuple[str, ...]) -> Verdict:
    """A node behind an infrastructure fault: PASS for the node, marked with the fault
    (`core.verdicts.marked`): one item of admission.json's `infrastructure` repair list per
    fault, listing the nodes it marks."""
    return marked(FABRIC, node, i.component, i.observed, i.expected,
                  f"infrastructure: {i.message}", remediation=i.remediation,
                  evidence=evidence)  # fmt: skip
