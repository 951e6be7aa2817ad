"""The simulated fabric's flow model (sim/flowmodel.py): each congestion regime's rates and the
counters that follow, pinned on a 3-leaf rail."""

from __future__ import annotations

from typing import Any

import pytest
from nodegate.sim.flowmodel import (
    EFFICIENCY,
    XMIT_WAIT_TICKS_PER_S,
    Fabric,
    Flow,
    counters,
    flow_average,
    solve,
    solve_waits,
)

GOOD = 400 * EFFICIENCY  # 386 Gb/s: one flow alone on a 400G link


def switches(down: str = "") -> dict[str, Any]:
    """The fabric's switch of each leaf on rail 0 (LID 10 + leaf): host n<i> on port i % 4 + 1,
    uplinks on ports 5-8 to spine LID 1, port 4 * leaf + k + 1; `down`'s uplink 0 has no link."""
    return {
        f"l{j}|0": {
            "lid": 10 + j,
            "hosts": {f"n{i}": i % 4 + 1 for i in range(4 * j, 4 * j + 4)},
            "uplinks": [[5 + k, 1, 4 * j + k + 1, not (f"l{j}" == down and k == 0)]
                        for k in range(4)],
        }
        for j in range(3)
    }  # fmt: skip


def fabric(**faults: str) -> Fabric:
    nodes: dict[str, Any] = {
        f"n{i}": {"leaf": f"l{i // 4}", "rate_gbps": {"default": 400}} for i in range(12)
    }
    switch = []
    down = ""
    for kind, where in faults.items():
        if kind in ("np_off", "rp_off"):
            nodes[where][kind] = [0]
        elif kind == "uplink_down":  # the fabric's fault: its switch table says so
            down = where
        else:
            switch.append({"kind": kind, "leaf": where, "rail": 0})
    return Fabric({"nodes": nodes, "leaf_nodes": {"l0": 4, "l1": 4, "l2": 4},
                   "switch_faults": switch, "switches": switches(down)})  # fmt: skip


INCAST = [Flow("a", "n4", "n0", 0), Flow("b", "n5", "n0", 0), Flow("c", "n8", "n0", 0)]
VICTIM = Flow("v", "n4", "n1", 0)


def rates(fab: Fabric, flows: list[Flow]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in solve(fab, flows)[0].items()}


@pytest.mark.parametrize(
    ("faults", "want"),
    [
        ({}, {"a": 128.7, "b": 128.7, "c": 128.7, "v": 257.3}),  # DCQCN: fair, victim keeps 2/3
        ({"np_off": "n0"}, {"a": 128.7, "b": 128.7, "c": 128.7, "v": 128.7}),  # PFC: HOL
        ({"ecn_not_marked": "l0"}, {"a": 128.7, "b": 128.7, "c": 128.7, "v": 128.7}),
        ({"rp_off": "n5"}, {"a": 77.2, "b": 231.6, "c": 77.2, "v": 308.8}),  # takes 3 shares
        ({"pfc_off": "l0"}, {"a": 124.8, "b": 124.8, "c": 124.8, "v": 257.3}),  # onset loss
    ],
)
def test_incast_regimes(faults: dict[str, str], want: dict[str, float]) -> None:
    assert rates(fabric(**faults), [*INCAST, VICTIM]) == want


def test_no_pfc_and_no_ecn_collapses_the_aggregate() -> None:
    fab = fabric(pfc_off="l0", ecn_not_marked="l0")
    assert rates(fab, INCAST) == {"a": 38.6, "b": 38.6, "c": 38.6}


@pytest.mark.parametrize("fault", ["uplink_down", "static_route_collision"])
def test_an_uplink_fault_halves_two_flows_through_the_leaf(fault: str) -> None:
    flows = [Flow(f"f{i}", f"n{i}", f"n{i + 8}", 0) for i in range(4)]  # l0 -> l2, 4 uplinks
    assert rates(fabric(), flows) == dict.fromkeys(("f0", "f1", "f2", "f3"), 386.0)
    got = rates(fabric(**{fault: "l2"}), flows)
    assert got == {"f0": 193.0, "f1": 193.0, "f2": 386.0, "f3": 386.0}


def test_counters_follow_the_regime() -> None:
    healthy, fab_np = fabric(), fabric(np_off="n0")
    r, g = solve(healthy, INCAST)
    c = counters(healthy, INCAST[0], r["a"], g["a"], r["a"], 1.0)
    assert c.receiver["np_ecn_marked_roce_packets"] > 0 and c.receiver["np_cnp_sent"] > 0
    assert c.sender["rp_cnp_handled"] == c.receiver["np_cnp_sent"]
    assert c.sender["rx_prio3_pause_duration"] == pytest.approx(0.002 * 1e6)
    r, g = solve(fab_np, INCAST)
    c = counters(fab_np, INCAST[0], r["a"], g["a"], r["a"], 1.0)
    assert "np_cnp_sent" not in c.receiver and "rp_cnp_handled" not in c.sender
    assert c.receiver["np_ecn_marked_roce_packets"] > 0
    assert c.sender["rx_prio3_pause_duration"] == pytest.approx((1 - 128.67 / GOOD) * 1e6, rel=1e-3)
    fab_rp = fabric(rp_off="n5")
    r, g = solve(fab_rp, INCAST)
    c = counters(fab_rp, INCAST[1], r["b"], g["b"], r["b"], 1.0)
    assert c.sender["rp_cnp_ignored"] > 0 and "rp_cnp_handled" not in c.sender
    fab_loss = fabric(pfc_off="l0")
    r, g = solve(fab_loss, INCAST)
    c = counters(fab_loss, INCAST[0], r["a"], g["a"], r["a"], 1.0)
    assert c.receiver["out_of_sequence"] > 0 and "rx_prio3_pause" not in c.sender


def test_a_flow_averages_over_the_flows_it_overlapped() -> None:
    """a runs 0-2 s; b joins at 1 s towards the same receiver: a gets 386 then 193."""
    fab = fabric()
    spans = {"a": (Flow("a", "n4", "n0", 0), 0.0, 2.0), "b": (Flow("b", "n8", "n0", 0), 1.0, 3.0)}
    bw, _c, shared = flow_average(fab, "a", spans, now=2.0)
    assert round(bw, 1) == round((GOOD + GOOD / 2) / 2, 1) and shared == 0.5


def test_xmit_wait_ticks_where_the_queue_builds_and_nowhere_else() -> None:
    """The incast's receiver port (leaf l0, LID 10, port 1) has three 400G senders for one
    400G port: it waits 2/3 of the time, each flow adding a third of that; the victim's port
    (n1: LID 10 port 2) and every uplink (one flow each) wait not at all."""
    _r, _g, waits = solve_waits(fabric(), [*INCAST, VICTIM])
    third = XMIT_WAIT_TICKS_PER_S * (1 - 400 / (200 + 400 + 400)) / 3
    assert waits == {
        "a": {"10:1": pytest.approx(third)}, "b": {"10:1": pytest.approx(third)},
        "c": {"10:1": pytest.approx(third)}, "v": {},
    }  # fmt: skip
    # two bisection flows on one uplink (static routes): that uplink's leaf port waits half
    flows = [Flow(f"f{i}", f"n{i}", f"n{i + 8}", 0) for i in range(4)]
    _r, _g, waits = solve_waits(fabric(static_route_collision="l0"), flows)
    assert {k: {p: round(w) for p, w in v.items()} for k, v in waits.items()} == {
        "f0": {"10:5": XMIT_WAIT_TICKS_PER_S // 4}, "f1": {"10:5": XMIT_WAIT_TICKS_PER_S // 4},
        "f2": {}, "f3": {},
    }  # fmt: skip
    # an uplink down: the spine port down to l2 that carries two flows waits
    _r, _g, waits = solve_waits(fabric(uplink_down="l2"), flows)
    assert {p for w in waits.values() for p in w} == {"1:10"}
    # the flow's own counters carry its share over its span: 2 s of a third of 2/3 waiting
    spans = {f.id: (f, 0.0, 2.0) for f in INCAST}
    _bw, c, _s = flow_average(fabric(), "a", spans, now=2.0)
    assert c.switch == {"10:1": pytest.approx(2 * XMIT_WAIT_TICKS_PER_S * (2 / 3) / 3)}
    # no fabric (RoCE: Ethernet leaves): no XmitWait anywhere
    roce = Fabric({"nodes": fabric().nodes, "leaf_nodes": {"l0": 4, "l1": 4, "l2": 4}})
    assert solve_waits(roce, INCAST)[2] == {"a": {}, "b": {}, "c": {}}
