"""The engine keeps what it measured when a stage or parser breaks (fail closed, per node)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from pathlib import Path

from nodegate.core.checks import AnyCheck, Check, CheckTable
from nodegate.core.values import CommandResult, CommandSpec, NodeOutcome, Reach, Status, Verdict
from nodegate.framework.pool import Judged, judge_one
from nodegate.framework.stage import (
    IN_FLIGHT_PER_WORKER,
    NodeJudge,
    OutcomeReader,
    PassiveStage,
    Stage,
    StageContext,
)
from nodegate.inventory.nodes import Node, SSHSettings
from nodegate.profiles import Profile
from nodegate.session.engine import Engine
from nodegate.transport.base import Session, Transport


class NoTransport(Transport):
    async def _session(self, node: str, script_text: str, deadline_s: float) -> Session:
        raise AssertionError("not used")


class Broken(Stage):
    name = "broken"
    checks = CheckTable("broken", [Check("broken.x", "x", None, "node", "test_x", "pipeline")])

    async def run(self, ctx: StageContext) -> list[Verdict]:
        raise RuntimeError("boom")


class Fine(Stage):
    name = "fine"
    checks = CheckTable("fine", [Check("fine.y", "y", None, "node", "test_y", "pipeline")])

    async def run(self, ctx: StageContext) -> list[Verdict]:
        return [Verdict("fine.y", n.name, Status.PASS) for n in ctx.nodes]


def node(name: str) -> Node:
    from nodegate.inventory.nodes import FrozenMap

    return Node(name, ("all",), FrozenMap({}), "p", SSHSettings())


def test_stage_crash_becomes_errors_and_later_stages_run(tmp_path: Path) -> None:
    nodes = [node("n1"), node("n2")]
    prof = Profile("p", "p.yaml", {})
    eng = Engine(nodes, {"n1": prof, "n2": prof}, NoTransport(), tmp_path, [Broken(), Fine()])
    sel = [(c, n.name) for c in ("broken.x", "fine.y") for n in nodes]
    res = asyncio.run(eng.run(sel))
    bad = res.for_item("broken.x", "n1")
    assert bad[0].status is Status.ERROR and "RuntimeError: boom" in bad[0].message
    assert res.for_item("fine.y", "n2")[0].status is Status.PASS
    assert res.stages_run == ["broken", "fine"]


def test_parser_crash_is_an_error_for_that_node() -> None:
    out = NodeOutcome("n1", Reach.OK, {"c": CommandResult("c", "tool", 0, "x", "", 0.1)})
    f = OutcomeReader("s", out)

    def crashing(text: str) -> int:
        return [1][5]

    assert f.parse("c", crashing) is None
    assert "IndexError" in f.errors["c"]
    assert f.parse("missing", crashing) is None and "did not run" in f.errors["missing"]


class Failing(Stage):
    name = "failing"
    checks = CheckTable("failing", [Check("failing.z", "z", None, "node", "test_z", "pipeline")])

    async def run(self, ctx: StageContext) -> list[Verdict]:
        return [Verdict("failing.z", n.name, Status.FAIL, component="GPU2 0000:4c:00.0")
                for n in ctx.nodes]  # fmt: skip


class Traffic(Fine):
    """An active stage: only nodes nothing blocks take part."""

    name = "traffic"
    active = True
    checks = CheckTable("traffic", [Check("traffic.t", "t", None, "node", "test_t", "pipeline")])

    async def run(self, ctx: StageContext) -> list[Verdict]:
        return [Verdict("traffic.t", n.name, Status.PASS) for n in ctx.nodes]


def test_a_waived_failure_goes_on_into_active_stages_and_an_unwaived_one_does_not(
    tmp_path: Path,
) -> None:
    import datetime as dt

    from nodegate.admission.waivers import Waiver, WaiverSet

    nodes = [node("n1"), node("n2")]
    prof = Profile("p", "p.yaml", {})
    w = Waiver(1, "failing.z", "n1", frozenset({"n1"}), "RMA open", "ops", dt.date.max, "GPU2")
    eng = Engine(nodes, {"n1": prof, "n2": prof}, NoTransport(), tmp_path,
                 [Failing(), Traffic()], waivers=WaiverSet("w.yaml", (w,)))  # fmt: skip
    sel = [(c, n.name) for c in ("failing.z", "traffic.t") for n in nodes]
    res = asyncio.run(eng.run(sel))
    got = {n: [(v.status, v.message) for v in res.for_item("traffic.t", n)] for n in ("n1", "n2")}
    assert got == {
        "n1": [(Status.PASS, "")],  # waived: measured like a passing node
        "n2": [(Status.SKIP, "not run: failing.z fail in an earlier stage")],
    }


def test_after_failure_skip_takes_a_failed_node_out_of_later_passive_stages(
    tmp_path: Path,
) -> None:
    """`session.after_failure: skip` (the quick level): a node that failed is not read again by a
    passive stage; the default profile still examines it; a passing node runs either way."""

    class FailsN1(Failing):
        async def run(self, ctx: StageContext) -> list[Verdict]:
            return [Verdict("failing.z", n.name, Status.FAIL if n.name == "n1" else Status.PASS)
                    for n in ctx.nodes]  # fmt: skip

    nodes = [node("n1"), node("n2"), node("n3")]
    examine = Profile("p", "p.yaml", {})
    skip = Profile("q", "q.yaml", {"session": {"after_failure": "skip"}})
    for prof, n1 in (
        (skip, [(Status.SKIP, "not run: failing.z fail in an earlier stage")]),
        (examine, [(Status.PASS, "")]),
    ):
        profiles = {n.name: prof for n in nodes}
        eng = Engine(nodes, profiles, NoTransport(), tmp_path, [FailsN1(), Fine()])
        res = asyncio.run(eng.run([(c, n.name) for c in ("failing.z", "fine.y") for n in nodes]))
        got = {n.name: [(v.status, v.message) for v in res.for_item("fine.y", n.name)]
               for n in nodes}  # fmt: skip
        assert got == {"n1": n1, "n2": [(Status.PASS, "")], "n3": [(Status.PASS, "")]}, prof.name


class Counted(PassiveStage[tuple[str, int], None]):
    """A passive stage whose facts are the node and its output's length; `fleet` adds a
    fleet-scope check (every node's length, judged together)."""

    name = "counted"

    def __init__(self, fleet: bool) -> None:
        def length(c: AnyCheck, f: tuple[str, int], p: None) -> list[Verdict]:
            return [Verdict(c.id, f[0], Status.PASS, observed=f[1])]

        def same(c: AnyCheck, facts: dict[str, tuple[str, int]], p: object) -> list[Verdict]:
            ok = len({f[1] for f in facts.values()}) == 1
            return [Verdict(c.id, n, Status.PASS if ok else Status.FAIL) for n in facts]

        checks = [Check("counted.n", "n", length, "node", "test_n")]
        if fleet:
            checks.append(Check("counted.same", "same", same, "node", "test_same", "fleet"))
        self.checks = CheckTable("counted", checks)

    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]:
        return []

    def profile_of(self, profile: Profile) -> None:
        return None

    def facts(self, outcome: NodeOutcome, profile: None) -> tuple[str, int]:
        return outcome.node, len(outcome.results["c"].stdout)


def test_a_stage_keeps_its_nodes_facts_only_for_a_fleet_scope_check(tmp_path: Path) -> None:
    """A node's facts (its parsed output) are let go once its node-scope checks judged them,
    unless a fleet-scope check reads every node's facts at the stage's end."""
    prof = Profile("p", "p.yaml", {"counted": {}})
    nodes = [node("n1"), node("n2")]
    ctx = StageContext(nodes, {"n1": prof, "n2": prof}, NoTransport(), tmp_path)
    outs = [NodeOutcome(n, Reach.OK, {"c": CommandResult("c", "tool", 0, text, "", 0.1)})
            for n, text in (("n1", "abc"), ("n2", "abcd"))]  # fmt: skip
    kept, got = {}, {}
    for fleet in (False, True):
        judge = NodeJudge(Counted(fleet), ctx)
        for o in outs:
            judge.add(o)
        kept[fleet] = dict(judge.facts)
        got[fleet] = [(v.check, v.node, v.status, v.observed) for v in judge.verdicts()]
    assert kept == {False: {}, True: {"n1": ("n1", 3), "n2": ("n2", 4)}}
    node_verdicts = [("counted.n", "n1", Status.PASS, 3), ("counted.n", "n2", Status.PASS, 4)]
    assert got == {
        False: node_verdicts,
        True: [*node_verdicts, ("counted.same", "n1", Status.FAIL, None),
               ("counted.same", "n2", Status.FAIL, None)],
    }  # fmt: skip


class HeldPool:
    """A --jobs pool whose one worker judges nothing until `finish()`."""

    jobs = 1

    def __init__(self, stage: Counted, prof: Profile) -> None:
        self.stage, self.prof = stage, prof
        self.sent: list[tuple[NodeOutcome, Future[Judged]]] = []

    def takes(self, stage: object) -> bool:
        return stage is self.stage

    def submit(self, stage: str, profile: Profile, out: NodeOutcome) -> Future[Judged]:
        fut: Future[Judged] = Future()
        self.sent.append((out, fut))
        return fut

    def finish(self) -> None:
        for out, fut in self.sent:
            if not fut.done():
                fut.set_result(judge_one(self.stage, self.prof, out))


def test_nodes_the_workers_would_only_queue_are_judged_in_process_the_same(
    tmp_path: Path,
) -> None:
    """Outcomes arriving faster than the workers judge them: past IN_FLIGHT_PER_WORKER nodes
    sent and not judged, the next ones are judged in process (their raw output is not queued);
    as workers finish, nodes are sent again; the verdicts are those of one process."""
    n = 2 * IN_FLIGHT_PER_WORKER + 4
    names = [f"n{i:02d}" for i in range(n)]
    prof = Profile("p", "p.yaml", {"counted": {}})
    ctx = StageContext(
        [node(x) for x in names], dict.fromkeys(names, prof), NoTransport(), tmp_path
    )
    outs = [NodeOutcome(x, Reach.OK, {"c": CommandResult("c", "tool", 0, "x" * i, "", 0.1)})
            for i, x in enumerate(names)]  # fmt: skip
    stage = Counted(fleet=True)
    alone = NodeJudge(stage, ctx)
    for o in outs:
        alone.add(o)
    pool = HeldPool(stage, prof)
    judge = NodeJudge(stage, ctx, pool)  # type: ignore[arg-type]
    for o in outs[: n - 2]:
        judge.add(o)
    assert [o.node for o, _ in pool.sent] == names[:IN_FLIGHT_PER_WORKER]
    pool.finish()  # the worker caught up: the next nodes go to it again
    for o in outs[n - 2 :]:
        judge.add(o)
    assert [o.node for o, _ in pool.sent] == names[:IN_FLIGHT_PER_WORKER] + names[n - 2 :]
    pool.finish()
    asyncio.run(judge.settled())
    assert judge.verdicts() == alone.verdicts()
    assert len(judge.verdicts()) == 2 * n
