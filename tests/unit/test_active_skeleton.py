"""The active-stage skeleton with a toy stage (no ib_pairs code): plan -> run -> sanity ->
performance -> localize -> cleanup over the local transport, interrupts included.

Toy units are nodes; a toy test runs one command per node of a group and reads `value N`
from each; round 1 tests the nodes in pairs, round 2 every member of a failing pair alone
(how an NCCL stage splits groups).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nodegate.core.checks import Check, CheckTable
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Part, Shell, Status, Verdict
from nodegate.framework.active import (
    ActiveStage,
    Campaign,
    EvidenceRefs,
    Execution,
    Outcome,
    Round,
    RoundId,
    Sanity,
    Side,
    Spawner,
    failure_status,
)
from nodegate.framework.stage import StageContext, StageOptions
from nodegate.inventory import Node, SSHSettings
from nodegate.session.engine import LoopThread
from nodegate.transport.evidence import EvidenceWriter, resolve_evidence
from nodegate.transport.local import LocalTransport
from nodegate.transport.process import RemoteProcess, SpawnError

NODES = ("n1", "n2", "n3", "n4")
GOOD = "sleep 0.1; echo value 9"
SLOW = "sleep 0.1; echo value 2"
BROKEN = "echo garbage; echo 'toy: no such device' >&2; exit 3"


@dataclass(frozen=True)
class GroupTest:
    nodes: tuple[str, ...]


class ToyLocalizer:
    """Round 1: pairs; round 2: each member of a failing pair alone; then stop."""

    def __init__(self, nodes: Sequence[str]) -> None:
        self.outcomes: list[Outcome[GroupTest]] = []
        pairs = [tuple(nodes[i : i + 2]) for i in range(0, len(nodes), 2)]
        self._first = [Round(RoundId(1), tuple(GroupTest(p) for p in pairs))]

    def first_rounds(self) -> list[Round[GroupTest]]:
        return self._first

    def add(self, outcome: Outcome[GroupTest]) -> None:
        self.outcomes.append(outcome)

    def next_round(self) -> Round[GroupTest] | None:
        if any(o.round.number == 2 for o in self.outcomes):
            return None
        failing = [n for o in self.outcomes if not o.passed for n in o.test.nodes]
        return Round(RoundId(2), tuple(GroupTest((n,)) for n in failing)) if failing else None

    def of(self, node: str) -> list[Outcome[GroupTest]]:
        return [o for o in self.outcomes if node in o.test.nodes]


class ToyCampaign(Campaign[GroupTest]):
    def __init__(self, commands: dict[str, str], launcher: bool = False) -> None:
        self.name = "toy-profile"
        self.nodes = tuple(commands)
        self.commands = commands
        self.localizer: ToyLocalizer = ToyLocalizer(self.nodes)
        self.performance = Threshold("min", 5, "units")
        self.spawned: list[RemoteProcess] = []
        self.launcher = launcher  # one process per test, on its first node (like mpirun)

    def doc_of(self, test: GroupTest) -> dict[str, Any]:
        return {"nodes": list(test.nodes)}

    def nodes_of(self, test: GroupTest) -> tuple[str, ...]:
        return test.nodes

    def key_of(self, test: GroupTest) -> str:
        return "+".join(test.nodes)

    async def execute(self, test: GroupTest, spawn: Spawner) -> Execution:
        procs = []
        for n in test.nodes[:1] if self.launcher else test.nodes:
            p = await spawn.spawn(n, (Shell(self.commands[n]),), 600)
            self.spawned.append(p)
            procs.append(p)
        results = [await p.wait() for p in procs]
        return Execution(
            tuple(Side(p.node, "rank", p.cmd, r) for p, r in zip(procs, results, strict=True))
        )

    def sanity(self, test: GroupTest, run: Execution) -> Sanity:
        values = []
        for s in run.sides:
            assert s.result is not None
            if s.result.rc != 0:
                return Sanity(
                    None, f"{s.node}: toy exited {s.result.rc}: {s.result.stderr.strip()}"
                )
            got = [float(w[6:]) for w in s.result.stdout.splitlines() if w.startswith("value ")]
            if not got:
                return Sanity(None, f"{s.node}: output not understood")
            values.append(got[0])
        return Sanity(min(values))

    def verdicts(self, evidence: EvidenceRefs[GroupTest]) -> list[Verdict]:
        out = []
        for n in self.nodes:
            rs = self.localizer.of(n)
            ev = tuple(r for o in rs for r in evidence.refs(o, n))
            last = rs[-1]
            status = Status.PASS if last.passed else failure_status([last])
            msg = last.error or ""
            out.append(
                Verdict("toy.value", n, status, "toy", last.value, ">= 5", None, msg, None, ev)
            )
        return out

    def localization_doc(self) -> dict[str, Any]:
        return {"blamed": [n for n in self.nodes if not self.localizer.of(n)[-1].passed]}


class ToyStage(ActiveStage[GroupTest]):
    name = "toy"
    tool = "toy"
    cleanup_check = "toy.cleanup"
    checks = CheckTable(
        "toy",
        [
            Check("toy.value", "value reaches the floor", None, "node", "test_value", "pipeline"),
            Check("toy.cleanup", "nothing left", None, "process", "test_clean", "pipeline"),
        ],
    )

    def __init__(self, campaign: ToyCampaign) -> None:
        self.campaign = campaign

    def plan(self, ctx: StageContext) -> tuple[list[Campaign[GroupTest]], list[Verdict]]:
        return [self.campaign], []


def _ctx(tmp_path: Path, log: list[str] | None = None) -> StageContext:
    nodes = [Node(n, ("all",), {}, None, SSHSettings()) for n in NODES]
    transport = LocalTransport(evidence=EvidenceWriter(tmp_path / "raw", "local"))
    return StageContext(
        nodes,
        {},
        transport,
        tmp_path,
        StageOptions(log=log.append if log is not None else None),
    )


def _by(verdicts: list[Verdict], check: str) -> dict[str, Verdict]:
    return {v.node: v for v in verdicts if v.check == check}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pids: Sequence[int], within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_plan_run_localize_cleanup_with_a_decoy_of_the_same_name(tmp_path: Path) -> None:
    # Another run's process with the same name (even another run's tag) on the same machine:
    # the old `pgrep sleep` check would have reported it; the ledger's check must not.
    decoys = [
        subprocess.Popen(["sleep", "300"]),
        subprocess.Popen(["sleep", "300"], env={**os.environ, "NODEGATE_SPAWN": "@@other-pid"}),
    ]
    try:
        camp = ToyCampaign({"n1": GOOD, "n2": GOOD, "n3": GOOD, "n4": SLOW})
        lines: list[str] = []
        verdicts = asyncio.run(ToyStage(camp).run(_ctx(tmp_path, lines)))
        assert all(d.poll() is None for d in decoys)
    finally:
        for d in decoys:
            d.kill()
            d.wait()
    values = _by(verdicts, "toy.value")
    assert {n: v.status for n, v in values.items()} == {
        "n1": Status.PASS, "n2": Status.PASS, "n3": Status.PASS, "n4": Status.FAIL,
    }  # fmt: skip
    assert (values["n4"].observed, values["n3"].observed) == (2.0, 9.0)
    assert lines == ["toy toy-profile: round 1: 2 tests", "toy toy-profile: round 2: 2 tests"]
    plan = json.loads((tmp_path / "toy" / "plan-toy-profile.json").read_text())
    assert [(r["round"], r["id"], [t["nodes"] for t in r["tests"]]) for r in plan["rounds"]] == [
        ("1", {"number": 1, "sub": 0, "label": "1"}, [["n1", "n2"], ["n3", "n4"]]),
        ("2", {"number": 2, "sub": 0, "label": "2"}, [["n3"], ["n4"]]),
    ]
    loc = json.loads((tmp_path / "toy" / "localization-toy-profile.json").read_text())
    assert loc == {"blamed": ["n4"]}
    # one evidence format: the node's own processes, peers pointing at the others
    assert values["n4"].evidence == ("raw/n4/toy.json#r1-n3+n4", "raw/n4/toy.json#r2-n4")
    doc = json.loads((tmp_path / "raw" / "n4" / "toy.json").read_text())
    assert (doc["bundle_version"], doc["kind"], doc["stage"], sorted(doc["commands"])) == (
        3, "processes", "toy", ["r1-n3+n4", "r2-n4"],
    )  # fmt: skip
    first = resolve_evidence(tmp_path, values["n4"].evidence[0])
    assert (first["cmd"], first["rc"], first["stdout"], first["role"], first["peers"]) == (
        SLOW, 0, "value 2\n", "rank", ["raw/n3/toy.json#r1-n3+n4"],
    )  # fmt: skip
    assert first["round"] == {"number": 1, "sub": 0, "label": "1"} and first["pid"] > 0
    cleanup = _by(verdicts, "toy.cleanup")
    assert {n: (v.status, v.observed, v.message) for n, v in cleanup.items()} == {
        n: (Status.PASS, 0, "no toy left") for n in NODES
    }
    assert cleanup["n1"].evidence == ("raw/n1/toy-cleanup.json#stray",)
    assert all(p.result is not None and not p.killed for p in camp.spawned)


def test_tool_error_is_error_and_low_number_is_fail(tmp_path: Path) -> None:
    camp = ToyCampaign({"n1": GOOD, "n2": BROKEN, "n3": GOOD, "n4": SLOW})
    values = _by(asyncio.run(ToyStage(camp).run(_ctx(tmp_path))), "toy.value")
    got = {n: (v.status, v.observed, v.message) for n, v in values.items()}
    assert got == {
        "n1": (Status.PASS, 9.0, ""),
        "n2": (Status.ERROR, None, "n2: toy exited 3: toy: no such device"),
        "n3": (Status.PASS, 9.0, ""),
        "n4": (Status.FAIL, 2.0, ""),
    }


class _Refusing(LocalTransport):
    """n3 cannot be reached: every spawn there fails as an SSH connect would."""

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        if node == "n3":
            raise SpawnError(node, "unreachable", "connection to root@10.0.0.3:22 refused")
        return await super().spawn(node, command, timeout_s)


def test_a_node_that_cannot_start_its_side_is_its_error_not_the_stage(tmp_path: Path) -> None:
    # The toy campaign lets SpawnError through (as any campaign might): the skeleton makes it
    # that node's error in that test, and sanity never sees a side that did not run.
    camp = ToyCampaign({"n1": GOOD, "n2": GOOD, "n3": GOOD, "n4": GOOD})
    ctx = _ctx(tmp_path)
    ctx.transport = _Refusing(evidence=ctx.transport.evidence)
    values = _by(asyncio.run(ToyStage(camp).run(ctx)), "toy.value")
    why = "unreachable: connection to root@10.0.0.3:22 refused"
    assert {n: (v.status, v.observed, v.message) for n, v in values.items()} == {
        "n1": (Status.PASS, 9.0, ""),
        "n2": (Status.PASS, 9.0, ""),
        "n3": (Status.ERROR, None, why),
        "n4": (Status.PASS, 9.0, ""),  # alone in round 2, once n3's test said nothing of it
    }
    lost = [o for o in camp.localizer.outcomes if o.lost]
    assert [(o.test.nodes, o.lost) for o in lost] == [
        (("n3", "n4"), (("n3", why),)),
        (("n3",), (("n3", why),)),
    ]
    rec = resolve_evidence(tmp_path, "raw/n3/toy.json#r1-n3+n4")
    assert (rec["started"], rec["detail"], rec["role"]) == (False, f"not started: {why}", "spawn")


class _Dropping(LocalTransport):
    """n2's connection drops as its first process ends: the transport says so (`lost_why`),
    and every later spawn there fails as the SSH transport's would."""

    DROPPED = "connection to n2 lost (closed by the other end)"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.dropped = False

    def lost_why(self, node: str) -> str | None:
        return self.DROPPED if node == "n2" and self.dropped else None

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        if node == "n2":
            raise SpawnError(node, "error", self.DROPPED)
        self.dropped = True  # n1's launcher ran n2's rank, whose connection dropped under it
        return await super().spawn(node, command, timeout_s)


def test_a_rank_node_whose_connection_drops_is_lost_not_judged(tmp_path: Path) -> None:
    # mpirun-like: one process per test on its first node; n2 runs only a rank, so it has no
    # side of its own. Its connection dropping under the test makes the test lost (n2's
    # error, no judgement of n1), though the launcher's own side reads fine.
    camp = ToyCampaign({n: GOOD for n in NODES}, launcher=True)
    ctx = _ctx(tmp_path)
    ctx.transport = _Dropping(evidence=ctx.transport.evidence)
    values = _by(asyncio.run(ToyStage(camp).run(ctx)), "toy.value")
    why = _Dropping.DROPPED
    assert {n: (v.status, v.message) for n, v in values.items()} == {
        "n1": (Status.PASS, ""),  # alone in round 2
        "n2": (Status.ERROR, why),
        "n3": (Status.PASS, ""),
        "n4": (Status.PASS, ""),
    }
    first = camp.localizer.outcomes[0]
    assert (first.test.nodes, first.passed, first.lost) == (("n1", "n2"), False, (("n2", why),))


def test_failure_status_rule() -> None:
    t = GroupTest(("a",))
    err = Outcome(t, RoundId(1), False, None, "tool failed")
    low = Outcome(t, RoundId(2), False, 2.0, None)
    assert failure_status([err]) is Status.ERROR
    assert failure_status([low]) is Status.FAIL
    assert failure_status([err, low]) is Status.FAIL  # it measured once: a low number


def _hung(tmp_path: Path) -> tuple[dict[str, str], list[Path]]:
    pidfiles = [tmp_path / f"{n}.pid" for n in NODES]
    return {
        n: f"echo $$ > {pf}; exec sleep 300" for n, pf in zip(NODES, pidfiles, strict=True)
    }, pidfiles


def test_cancel_mid_round_kills_by_pid_and_reraises(tmp_path: Path) -> None:
    cmds, pidfiles = _hung(tmp_path)
    camp = ToyCampaign(cmds)
    lines: list[str] = []

    async def go() -> None:
        task = asyncio.ensure_future(ToyStage(camp).run(_ctx(tmp_path, lines)))
        while not all(pf.exists() and pf.read_text().strip() for pf in pidfiles):
            await asyncio.sleep(0.05)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
    pids = [int(pf.read_text()) for pf in pidfiles]
    assert _gone(pids), "cleanup left the hung processes running"
    assert camp.spawned and all(p.killed and p.pid for p in camp.spawned)
    # the ledger holds all four, even a spawn still opening when the cancel came
    assert lines == [
        "toy toy-profile: round 1: 2 tests",
        "toy toy-profile: cleanup killed 4 process(es) by PID",
    ]
    # the plan of the interrupted round was written before it ran; no verdicts, no strays check
    assert (tmp_path / "toy" / "plan-toy-profile.json").exists()
    assert not (tmp_path / "raw" / "n1" / "toy-cleanup.json").exists()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.run handles Ctrl-C from 3.11")
def test_ctrl_c_still_kills_what_the_stage_started(tmp_path: Path, python_signals) -> None:
    cmds, pidfiles = _hung(tmp_path)
    camp = ToyCampaign(cmds)
    main = threading.main_thread().ident
    assert main is not None

    def interrupt_when_up() -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if all(pf.exists() and pf.read_text().strip() for pf in pidfiles):
                break
            time.sleep(0.05)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt_when_up, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(ToyStage(camp).run(_ctx(tmp_path)))
    pids = [int(pf.read_text()) for pf in pidfiles]
    assert _gone(pids) and camp.spawned and all(p.killed for p in camp.spawned)


def test_stray_check_reports_only_what_the_stage_left(tmp_path: Path) -> None:
    # n2's command leaves a child in its own session (out of reach of the group kill); the
    # stray check finds it by the spawn's tag, and reports nothing on the other nodes.
    escape = "setsid sleep 301 >/dev/null 2>&1 </dev/null & echo value 9"
    camp = ToyCampaign({"n1": GOOD, "n2": escape, "n3": GOOD, "n4": GOOD})
    verdicts = asyncio.run(ToyStage(camp).run(_ctx(tmp_path)))
    cleanup = _by(verdicts, "toy.cleanup")
    left = cleanup["n2"]
    pid = int(left.message.removeprefix("still running: ").split()[0])
    try:
        assert (left.status, left.observed, left.message, left.remediation) == (
            Status.FAIL, 1, f"still running: {pid} sleep 301", "kill the listed processes",
        )  # fmt: skip
        assert {n: v.status for n, v in cleanup.items() if n != "n2"} == {
            "n1": Status.PASS, "n3": Status.PASS, "n4": Status.PASS,
        }  # fmt: skip
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_launchers_leftovers_are_looked_for_on_its_whole_group(tmp_path: Path) -> None:
    # One process per group, on its first node (mpirun-like): what it leaves carries its tag,
    # and the group's other node is checked for it too. (Here every "node" shares this
    # machine's /proc, so both see it; on a cluster, the rank's own node does.)
    escape = "setsid sleep 302 >/dev/null 2>&1 </dev/null & echo value 9"
    camp = ToyCampaign({"n1": escape, "n2": GOOD, "n3": GOOD, "n4": GOOD}, launcher=True)
    verdicts = asyncio.run(ToyStage(camp).run(_ctx(tmp_path)))
    cleanup = _by(verdicts, "toy.cleanup")
    pid = int(cleanup["n1"].message.removeprefix("still running: ").split()[0])
    try:
        assert {n: (v.status, v.message) for n, v in cleanup.items()} == {
            "n1": (Status.FAIL, f"still running: {pid} sleep 302"),
            "n2": (Status.FAIL, f"still running: {pid} sleep 302"),
            "n3": (Status.PASS, "no toy left"),
            "n4": (Status.PASS, "no toy left"),
        }
        assert [p.node for p in camp.spawned] == ["n1", "n3"]
    finally:
        os.kill(pid, signal.SIGKILL)


class _HalfStarted(ToyCampaign):
    """Each test's first node runs its process; the others have a side of their own that
    never started (an ib_write_bw client whose node refused the session)."""

    async def execute(self, test: GroupTest, spawn: Spawner) -> Execution:
        run = await super().execute(test, spawn)
        rest = tuple(
            Side(n, "rank", self.commands[n], None, "not started: refused") for n in test.nodes[1:]
        )
        return Execution(run.sides + rest, "refused")

    def sanity(self, test: GroupTest, run: Execution) -> Sanity:
        return Sanity(None, run.error) if run.error else super().sanity(test, run)


def test_a_node_whose_own_side_never_started_is_not_checked_for_its_partners_tags(
    tmp_path: Path,
) -> None:
    # n1's leftover is n1's alone: n2 had a side of its own (it never started), so it is not
    # a launcher's rank. (Every "node" here shares /proc: checked, n2 would see it too.)
    escape = "setsid sleep 303 >/dev/null 2>&1 </dev/null & echo value 9"
    camp = _HalfStarted({"n1": escape, "n2": GOOD, "n3": GOOD, "n4": GOOD}, launcher=True)
    verdicts = asyncio.run(ToyStage(camp).run(_ctx(tmp_path)))
    cleanup = _by(verdicts, "toy.cleanup")
    left = cleanup["n1"].message.removeprefix("still running: ").split("; ")
    pids = [int(x.split()[0]) for x in left]  # n1 ran in round 1 and, alone, in round 2
    try:
        assert {n: (v.status, v.message) for n, v in cleanup.items()} == {
            "n1": (Status.FAIL, f"still running: {pids[0]} sleep 303; {pids[1]} sleep 303"),
            "n2": (Status.PASS, "no toy left"),
            "n3": (Status.PASS, "no toy left"),
            "n4": (Status.PASS, "no toy left"),
        }
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)


def test_interrupt_in_the_engine_thread_cancels_the_run_and_waits_for_cleanup(
    python_signals,
) -> None:
    loop = LoopThread()
    cleaned: list[str] = []

    async def stage() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.2)  # cleanup takes a while: killing by PID over SSH
            cleaned.append("done")

    main = threading.main_thread().ident
    assert main is not None
    threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.call(stage())
        assert cleaned == ["done"]
    finally:
        loop.stop()
