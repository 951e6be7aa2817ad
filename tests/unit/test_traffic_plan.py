"""The traffic plan (pure) and its judgement: every node a receiver once per rail, a node in
one test per rail per round, a bisection across leaves; tool errors, counters that do not move
and flows that did not overlap are ERRORs, never a pass."""

from __future__ import annotations

from collections import Counter

import pytest
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Status
from nodegate.framework.active.campaign import Execution, Side
from nodegate.profiles import ProfileLibrary
from nodegate.sim.perftest_sim import LINE, addresses, header
from nodegate.sim.perftest_sim import table as sim_table
from nodegate.stages.traffic.blame import judge_incast
from nodegate.stages.traffic.measure import Measured, jain, measure, overlap_share
from nodegate.stages.traffic.plan import TrafficPlan, TrafficTest, bisection, incast_rounds
from nodegate.stages.traffic.profile import traffic_profile
from nodegate.stages.traffic.run import Timing, channels
from nodegate.transport.process import ProcessResult

from tests.integration.conftest import REPO

NODES = [f"gpu{i:03d}" for i in range(1, 17)]
LEAF = {n: f"leaf{(i // 4) + 1:02d}" for i, n in enumerate(NODES)}
PROF = traffic_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("hgx-h100-roce"))


@pytest.mark.parametrize(("n", "k"), [(16, 3), (12, 3), (7, 2), (64, 8)])
def test_every_node_receives_once_per_rail_and_holds_one_test_per_round(n: int, k: int) -> None:
    nodes = [f"n{i:03d}" for i in range(n)]
    leaf = {x: f"l{i // 8}" for i, x in enumerate(nodes)}
    rounds = incast_rounds(nodes, leaf, [0, 1], k, seed=3)
    for rail in (0, 1):
        got = Counter(t.receiver for r in rounds for t in r.tests if t.rail == rail)
        assert set(got) == set(nodes) and set(got.values()) == {1}
    for r in rounds:
        for rail in (0, 1):
            held = [x for t in r.tests if t.rail == rail for x in t.nodes()]
            assert len(held) == len(set(held))  # one test per node and rail at a time
        for t in r.tests:
            assert 1 <= len(t.senders) <= k and t.victim is not None
            assert t.victim[0] == t.senders[0] and t.victim[1] not in t.senders
    assert rounds == incast_rounds(nodes, leaf, [0, 1], k, seed=3)  # deterministic for a seed


def test_bisection_crosses_the_spine_and_is_seeded() -> None:
    (t,) = bisection(NODES, LEAF, [2], seed=0, number=9).tests
    assert len(t.pairs) == 8 and t.rail == 2
    assert all(LEAF[a] != LEAF[b] for a, b in t.pairs)
    assert {a for a, _ in t.pairs} == set(NODES[:8]) and {b for _, b in t.pairs} == set(NODES[8:])
    assert bisection(NODES, LEAF, [2], seed=1, number=9) != bisection(NODES, LEAF, [2], 0, 9)


def test_plan_channels_and_a_leaf_retest() -> None:
    plan = TrafficPlan(tuple(NODES), LEAF, (0,), 3, 0)
    first = plan.planned
    assert [r.id.number for r in first] == list(range(1, len(first) + 1))
    assert plan.first_rounds() == first[:1]
    t = first[0].tests[0]
    assert channels(t, counters=True) == 2 * len(t.nodes()) + 2 * (len(t.senders) + 2)
    plan.leaf_suspects.append((0, ("leaf01", "leaf04")))
    from nodegate.framework.active.rounds import Outcome

    for r in first[:-1]:
        plan.add(Outcome(r.tests[0], r.id, True))
        assert plan.next_round() == first[r.id.number]  # the next planned round, as planned
    plan.add(Outcome(first[-1].tests[0], first[-1].id, False))
    nxt = plan.next_round()
    assert nxt is not None and [x.retest for x in nxt.tests] == ["leaf01", "leaf04"]
    for x in nxt.tests:  # two flows up the suspect's uplinks, two down, partners elsewhere
        ups = [(a, b) for a, b in x.pairs if LEAF[a] == x.retest]
        downs = [(a, b) for a, b in x.pairs if LEAF[b] == x.retest]
        assert len(ups) == 2 and len(downs) == 2
        assert all(LEAF[b] not in ("leaf01", "leaf04") for _, b in ups)
    assert plan.next_round() is None


def test_a_lost_node_leaves_the_later_rounds_and_its_receiver_is_retested() -> None:
    plan = TrafficPlan(tuple(NODES), LEAF, (0,), 3, 0)
    from nodegate.framework.active.rounds import Outcome

    (t, *_) = plan.planned[0].tests
    gone = t.senders[0]
    plan.add(Outcome(t, plan.planned[0].id, False, lost=((gone, "connection lost"),)))
    for r in plan.planned[1:]:
        nxt = plan.next_round()
        assert nxt is not None and nxt.id == r.id
        assert all(gone not in x.nodes() for x in nxt.tests)
        for x in nxt.tests:
            plan.add(Outcome(x, nxt.id, True))
    retest = plan.next_round()
    assert retest is not None
    assert [(x.receiver, x.retest) for x in retest.tests] == [(t.receiver, t.receiver)]
    assert gone not in retest.tests[0].senders and len(retest.tests[0].senders) == 3


def test_jain_and_overlap() -> None:
    assert jain([100, 100, 100]) == 1.0 and round(jain([300, 50, 50]), 3) == 0.561
    t = [Timing("a", 0.0, 2.0), Timing("b", 1.5, 3.5), Timing("alone x", -9, -7)]
    assert overlap_share(t, 2.0) == 0.25


INCAST = TrafficTest("incast", 0, "gpu001", ("gpu005", "gpu009"), ("gpu005", "gpu013"))


def _client(out: str) -> ProcessResult:
    return ProcessResult("n", "ib_write_bw", 0, out, "", False, False, 2.0)


def test_a_tool_error_and_flows_that_did_not_overlap_are_errors() -> None:
    run = Execution((), "server gpu001: exited 1 before it listened")
    m = measure(INCAST, run, [], 2, "mlx5_0", 3, 0.8)
    assert m.error == "server gpu001: exited 1 before it listened"
    j = judge_incast(INCAST, m, PROF, LEAF, 3, "k")
    assert {f.status for f in j.findings} == {"error"}
    assert sorted((f.area, f.node) for f in j.findings) == sorted(
        [(a, n) for n in INCAST.nodes() for a in ("incast", "victim", "counters")]
        + [("fairness", "gpu001")]
    )
    assert not j.infra
    # every flow ran, but one after the other: not a load test
    o = {"qps": 1, "size": 65536, "iters": 1000, "duration": 2, "gbits": True}
    me = {"lid": 0x101}
    table = "\n".join(  # what the simulated ib_write_bw -D prints (perftest's layout)
        [header("mlx5_0", o, False), addresses(me, me, 1), LINE, sim_table(o, 190.0, False)]
    )
    sides = []
    for name, src, _dst in INCAST.flows():
        sides += [Side(src, f"client {name}", "", _client(table)),
                  Side(_dst, f"server {name}", "", _client(table))]  # fmt: skip
    sides.append(Side("gpu005", "client alone gpu005->gpu013", "", _client(table)))
    times = [Timing(f, 3.0 * i, 3.0 * i + 2) for i, (f, _s, _d) in enumerate(INCAST.flows())]
    m = measure(INCAST, Execution(tuple(sides)), times, 2, "mlx5_0", None, 0.8)
    assert m.error is not None and m.error.startswith("the flows overlapped 0% of the 2 s window")
    assert m.flows["gpu005->gpu001"] == 190.0


def test_counters_that_do_not_move_are_an_error() -> None:
    m = Measured(
        flows={"gpu005->gpu001": 190.0, "gpu009->gpu001": 190.0, "victim gpu005->gpu013": 200.0},
        alone=380.0, overlap=1.0,
        error="gpu001: rx_prio3_bytes did not move under load (counters not counting: cannot "
        "judge congestion)",
    )  # fmt: skip
    j = judge_incast(INCAST, m, PROF, LEAF, 3, "k")
    assert {(f.status, f.message) for f in j.findings} == {("error", m.error)}
    assert Status.ERROR.value == "error"


def test_discovered_leaves_per_rail_name_the_retests_and_the_marks() -> None:
    """Where the fabric stage discovered each rail's switch, a rail's re-tests and marks go by
    that switch (`leaf_on`), the other rails' and the labels untouched."""
    from nodegate.framework.active.rounds import Outcome
    from nodegate.stages.traffic.blame import Infra
    from nodegate.stages.traffic.checks import fabric_verdicts

    nodes = tuple(NODES[:8])
    on = {r: {n: f"leaf-r{(i // 4) + 1:02d}-rail{r}" for i, n in enumerate(nodes)} for r in (0, 1)}
    plan = TrafficPlan(nodes, LEAF, (0, 1), 3, 1, on)
    assert (
        plan.leaf_on(1)["gpu005"] == "leaf-r02-rail1"
        and TrafficPlan(nodes, LEAF, (0, 1), 3, 1).leaf_on(1)["gpu005"] == "leaf02"
    )
    plan.leaf_suspects.append((1, ("leaf-r02-rail1",)))
    for planned in plan.planned:
        plan.add(Outcome(planned.tests[0], planned.id, True))
    r = plan.next_round()
    assert r is not None and {(t.rail, t.retest) for t in r.tests} == {(1, "leaf-r02-rail1")}
    assert {n for t in r.tests for n in t.nodes()} & set(NODES[4:8])
    i = Infra("leaf-r02-rail1 uplinks", "leaf-r02-rail1", 1, "a->b", "slow", "fast", "m", "fix")

    def marks(n: str) -> list[tuple[str, str | None]]:
        def leaf_on(rail: int) -> str:
            return on[rail][n]

        def refs(key: str, node: str) -> tuple[str, ...]:
            return ()

        return [(v.component, v.remediation) for v in fabric_verdicts(
            n, leaf_on, [i], refs, "x (leaf)")]  # fmt: skip

    got = {n: marks(n) for n in ("gpu004", "gpu005")}
    assert got == {"gpu004": [("x (leaf)", None)], "gpu005": [("leaf-r02-rail1 uplinks", "fix")]}


PERFQUERY_PORT = """# Port extended counters: Lid 27 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)
PortSelect:......................1
CounterSelect:...................0x0000
"""


def _perfquery(ticks: int) -> str:
    """perfquery -x of LID 27 port 1 in the sim's layout (sim/tools/fabric.py, built on the
    corpus capture perfquery__x-extended-edr-switch-allports), PortXmitWait = ticks."""
    from nodegate.parsers.perfquery import EXT_ERRORS, EXT_TRAFFIC

    def line(name: str, v: int) -> str:
        return f"{name}:".ljust(33, ".") + str(v)

    rows = [line(n, ticks if n == "PortXmitWait" else 1000) for n in EXT_TRAFFIC]
    rows.append("CounterSelect2:".ljust(33, ".") + "0x00000000")
    rows += [line(n, ticks if n == "PortXmitWait" else 0) for n in EXT_ERRORS]
    return PERFQUERY_PORT + "\n".join(rows) + "\n"


def _incast_run(before: int, after: int, rc: int = 0, bw: tuple[float, ...] = (190.0, 190.0)
                ) -> tuple[Execution, list[Timing]]:  # fmt: skip
    """The incast's flows (`bw`: its senders'; the victim 190 Gb/s, 380 alone) and two
    perfquery reads of the receiver's switch."""
    o: dict[str, object] = {"qps": 1, "size": 65536, "iters": 1000, "duration": 2, "gbits": True}
    me: dict[str, object] = {"lid": 0x101}
    sides = []
    flows = list(INCAST.flows()) + [("alone gpu005->gpu013", "gpu005", "gpu013")]
    for (name, src, dst), g in zip(flows, (*bw, 190.0, 380.0), strict=True):
        table = "\n".join([header("mlx5_0", o, False), addresses(me, me, 1), LINE,
                           sim_table(o, g, False)])  # fmt: skip
        sides += [Side(src, f"client {name}", "", _client(table)),
                  Side(dst, f"server {name}", "", _client(table))]  # fmt: skip
    for phase, v in (("before", before), ("after", after)):
        out = _perfquery(v) if rc == 0 else "perfquery: iberror: failed: smp query nodeinfo failed"
        res = ProcessResult("gpu001", "perfquery", rc, out, "", False, False, 0.1)
        sides.append(Side("gpu001", f"xmit_wait {phase} 27", "", res))
    times = [Timing(f, 0.0, 2.0) for f, _s, _d in INCAST.flows()]
    return Execution(tuple(sides)), times


IB = PROF.__class__(**{
    **{k: getattr(PROF, k) for k in PROF.__slots__}, "counters": None,
    "xmit_wait": Threshold.from_profile({"min": 1, "unit": "ticks"}, "traffic.xmit_wait"),
})  # fmt: skip


def _ib(run: Execution, times: list[Timing]) -> Measured:
    return measure(INCAST, run, times, 2, "mlx5_0", None, 0.8, (27, 1), IB.xmit_wait)


def test_xmit_wait_on_the_receivers_switch_port_under_an_incast() -> None:
    """InfiniBand with the fabric stage: PortXmitWait of the switch port facing the receiver
    (LID 27 port 1, read through the receiver's own port before and after) must move where two
    senders oversubscribe it; not moving, a perfquery error, a counter that fell: ERROR."""
    m = _ib(*_incast_run(5_000, 60_005_000))
    assert (m.error, m.xmit_wait) == (None, 60_000_000)
    j = judge_incast(INCAST, m, IB, LEAF, None, "k")
    mine = {(f.area, f.node): (f.status, f.message) for f in j.findings}
    assert mine[("incast", "gpu001")] == (
        "pass",
        "incast 2->1 to gpu001 (rail 0): aggregate "
        "0.95 of line rate, Jain 1, PortXmitWait +60000000 ticks at gpu001's switch port",
    )
    still = _ib(*_incast_run(5_000, 5_000))
    assert still.error == (
        "gpu001's switch port (LID 27 port 1): PortXmitWait grew 0 ticks under an incast of 2 "
        "senders, >= 1 expected (the counter does not show congestion that must exist: cannot "
        "judge it)"
    )
    j = judge_incast(INCAST, still, IB, LEAF, None, "k")
    assert {f.status for f in j.findings} == {"error"} and len(j.findings) == 3 * 4 + 1
    fell = _ib(*_incast_run(9_000, 5_000))
    assert fell.error == "perfquery of LID 27 port 1: PortXmitWait went down between the reads"
    broken = _ib(*_incast_run(0, 0, rc=255))
    assert broken.error == (
        "gpu001: perfquery of LID 27 before: exited 255: perfquery: iberror: failed: smp query "
        "nodeinfo failed"
    )
    # another switch's port printed only: not this receiver's counter
    assert (
        measure(INCAST, *_incast_run(1, 2), 2, "mlx5_0", None, 0.8, (27, 2), IB.xmit_wait).error
        == "perfquery of LID 27: no PortXmitWait for port 2"
    )
    # read before the load only (the after read lost): not a growth
    run, times = _incast_run(1, 2)
    run = Execution(tuple(x for x in run.sides if x.role != "xmit_wait after 27"))
    assert _ib(run, times).error == "perfquery of LID 27: not read before and after"
    # no discovered port (the fabric stage did not run): not read, not judged
    m = measure(INCAST, *_incast_run(0, 0), 2, "mlx5_0", None, 0.8, None, IB.xmit_wait)
    assert (m.error, m.xmit_wait) == (None, None)


def test_fairness_is_the_receivers_own_check() -> None:
    """One Jain index per incast, on its receiver's rail: unfair shares that no sender's
    share explains fail the receiver's traffic.fairness, not traffic.incast (the aggregate
    holds); a sender over its share explains it (the sender is blamed)."""
    run, times = _incast_run(0, 0, bw=(280.0, 100.0))  # Jain 0.817 < 0.9; 1.47 fair shares
    m = measure(INCAST, run, times, 2, "mlx5_0", None, 0.8)
    j = judge_incast(INCAST, m, IB, LEAF, None, "k")
    got = {(f.area, f.node): (f.status, f.observed) for f in j.findings if f.area != "victim"}
    assert got == {
        ("fairness", "gpu001"): ("fail", 0.817),
        ("incast", "gpu001"): ("pass", 0.95),
        ("incast", "gpu005"): ("pass", 0.95),
        ("incast", "gpu009"): ("pass", 0.95),
        ("incast", "gpu013"): ("pass", 0.95),
    }
    # the sender above its share (here: 1.4 at most) is blamed and explains the unfairness
    tight = IB.__class__(**{**{k: getattr(IB, k) for k in IB.__slots__},
                            "sender_share": Threshold.from_profile(
                                {"max": 1.4, "unit": "fair shares"}, "x")})  # fmt: skip
    j = judge_incast(INCAST, m, tight, LEAF, None, "k")
    status = {(f.area, f.node): f.status for f in j.findings if f.area != "victim"}
    assert status == {("fairness", "gpu001"): "pass", ("incast", "gpu001"): "pass",
                   ("incast", "gpu005"): "fail", ("incast", "gpu009"): "pass",
                   ("incast", "gpu013"): "pass"}  # fmt: skip
    (f,) = [f for f in j.findings if f.area == "fairness"]
    assert f.message == (
        "incast 2->1 to gpu001 (rail 0): Jain 0.817 over 2 senders: explained "
        "(gpu005 took 1.474 fair shares)"
    )


def test_the_one_cable_the_slow_flows_share_is_named_by_both_ends() -> None:
    """Where the fabric stage discovered the uplinks and their XmitWait was read around the
    bisection: the slow flows' leaf's uplink whose two ends waited far more than its others
    is named (`leaf02 P5 -> spine01 P3`), with why; without the reads, or with no single
    outlier, the leaf's uplinks as before."""
    from nodegate.stages.traffic.blame import judge_bisection, shared_cable

    t = TrafficTest(
        "bisection",
        1,
        pairs=(
            ("gpu005", "gpu001"),
            ("gpu006", "gpu009"),
            ("gpu007", "gpu013"),
            ("gpu008", "gpu002"),
        ),
    )
    flows = {"gpu005->gpu001": 193.0, "gpu006->gpu009": 193.0, "gpu007->gpu013": 386.0,
             "gpu008->gpu002": 386.0}  # fmt: skip
    # leaf02 (LID 12): uplinks P5-P8 to spine01/02 (LIDs 1, 2); leaf01 (LID 11) likewise
    cables = {
        lf: [(lid, 5 + k, f"spine0{k % 2 + 1}", 1 + k % 2, 4 * j + k + 1) for k in range(4)]
        for j, (lf, lid) in enumerate((("leaf01", 11), ("leaf02", 12), ("leaf03", 13)))
    }
    waits = {(12, p): 400 for p in (5, 6, 7, 8)} | {(1, p): 300 for p in range(1, 13)}
    waits[(12, 5)] = 50_000_000
    waits[(1, 5)] = 40_000_000  # the same cable's spine end (flows into leaf02)
    m = Measured(flows=flows, port_waits=waits)
    on = {**LEAF, "gpu005": "leaf02", "gpu006": "leaf02", "gpu007": "leaf02", "gpu008": "leaf02"}
    (i,) = judge_bisection(t, m, PROF, on, "k", cables=cables).infra
    assert (i.component, i.leaf, i.uplink) == ("leaf02 P5 -> spine01 P5", "leaf02", True)
    assert i.message == (
        "the slow flows of the bisection all cross leaf02's uplinks and share leaf02 P5 -> "
        "spine01 P5: PortXmitWait +90000000 ticks at its ends, the leaf's uplinks 550 at the "
        "median: static routes putting several flows on it"
    )
    # leaf02 with one uplink fewer linked than the other leaves: the one down is said
    fewer = {**cables, "leaf02": cables["leaf02"][:3]}
    assert shared_cable("leaf02", waits, fewer)[1].endswith(
        "leaf02 has 3 uplinks linked where most leaves have 4: the flows of the one down "
        "moved onto this one"
    )
    # no reads (RoCE, labels), or two cables as hot: the leaf's uplinks
    (i,) = judge_bisection(t, Measured(flows=flows), PROF, on, "k", cables=cables).infra
    assert i.component == "leaf02 rail 1 uplinks"
    assert shared_cable("leaf02", {**waits, (12, 6): 50_000_000}, cables) == ("", "")
