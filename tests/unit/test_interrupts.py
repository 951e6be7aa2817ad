"""Interrupts: the signal handlers, the engine and loop on cancel, the gate's decision, and a
run interrupted in a passive stage and in its test items (pytest in a subprocess, no fleet:
a plugin transport whose sessions never end)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from nodegate.admission.gate import admission_doc, decide
from nodegate.core import schemas
from nodegate.core.checks import Check, CheckTable
from nodegate.core.results import RunResult, read_verdicts_doc
from nodegate.core.values import Status, Verdict
from nodegate.framework.stage import Stage, StageContext
from nodegate.profiles import Profile
from nodegate.reports.terminal import summary_lines
from nodegate.session.engine import Engine, LoopThread
from nodegate.session.finish import LatestLink
from nodegate.session.interrupts import InterruptGuard, Terminated

from tests.unit.test_engine import NoTransport, node

REPO = Path(__file__).resolve().parents[2]


def test_first_signal_interrupts_the_second_is_noted_the_third_interrupts(
    capfd, python_signals
) -> None:
    guard = InterruptGuard()
    guard.install()
    try:
        with pytest.raises(KeyboardInterrupt) as first:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        assert type(first.value) is KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)  # noted: the cleanup goes on
        time.sleep(0.05)
        assert "nodegate: interrupted again" in capfd.readouterr().err
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    finally:
        guard.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_sigterm_is_an_interrupt(python_signals) -> None:
    guard = InterruptGuard()
    guard.install()
    try:
        with pytest.raises(KeyboardInterrupt, match=r"terminated \(SIGTERM\)"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    finally:
        guard.uninstall()


def test_the_guard_installs_over_sigint_inherited_as_ignored(python_signals) -> None:
    # `nodegate run &` from a script starts with SIGINT ignored: an operator's `kill -INT <pid>`
    # is still an interrupt (the run cleans up and writes its reports); the ignore comes back.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    guard = InterruptGuard()
    guard.install()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
    finally:
        guard.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_stopping_the_loop_cancels_what_is_pending() -> None:
    loop = LoopThread()
    ended: list[str] = []

    async def pending() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append("cancelled")

    loop.loop.call_soon_threadsafe(lambda: loop.loop.create_task(pending()) and None)
    time.sleep(0.1)
    loop.stop()
    assert ended == ["cancelled"] and loop.loop.is_closed()


class Measured(Stage):
    name = "first"
    checks = CheckTable("first", [Check("first.x", "x", None, "node", "test_x", "pipeline")])

    async def run(self, ctx: StageContext) -> list[Verdict]:
        return [Verdict("first.x", n.name, Status.PASS) for n in ctx.nodes]


class Endless(Stage):
    name = "second"
    checks = CheckTable("second", [Check("second.y", "y", None, "node", "test_y", "pipeline")])

    async def run(self, ctx: StageContext) -> list[Verdict]:
        await asyncio.sleep(3600)
        return []


def test_a_cancelled_engine_keeps_what_earlier_stages_measured(tmp_path: Path) -> None:
    prof = Profile("p", "p.yaml", {})
    eng = Engine([node("n1")], {"n1": prof}, NoTransport(), tmp_path, [Measured(), Endless()])

    async def interrupted() -> None:
        task = asyncio.ensure_future(eng.run([("first.x", "n1"), ("second.y", "n1")]))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert (eng.result.interrupted, eng.result.stages_run) == ("second", ["first"])
    assert [v.status for v in eng.result.for_item("first.x", "n1")] == [Status.PASS]
    assert eng.result.for_item("second.y", "n1") == []
    eng.result.write(tmp_path)
    assert RunResult.read(tmp_path).interrupted == "second"


def test_an_interrupted_run_admits_no_node_and_keeps_measured_failures() -> None:
    result = RunResult(interrupted="hca")
    result.add(Verdict("reach.ssh", "n1", Status.PASS))
    result.add(Verdict("reach.ssh", "n2", Status.FAIL, "ssh", "refused", message="no way"))
    selected = [("reach.ssh", "n1"), ("reach.ssh", "n2"), ("hca.count", "n1")]
    profiles = {"n1": "p", "n2": "p", "n3": "p"}  # n3: no item collected before the interrupt
    decisions = decide(selected, result, profiles, {}, {}, "hca")
    why = ("run.interrupted", "not_run", "run interrupted during hca")
    assert {
        n: [(r.check, r.status, r.message) for r in d.reasons] for n, d in decisions.items()
    } == {
        "n1": [why],
        "n2": [why, ("reach.ssh", "fail", "no way")],
        "n3": [why],
    }
    meta = {
        "run_id": "r", "started_at": "2024-01-01T00:00:00+00:00", "inventory": "i",
        "finished_at": "2024-01-01T00:00:01+00:00", "transport": "ssh", "stages": ["reach"],
        "interrupted": "hca",
    }  # fmt: skip
    doc = admission_doc(decisions, ["n1", "n2", "n3"], meta, ["reach.ssh", "hca.count"])
    assert doc["summary"] == {"nodes": 3, "admitted": 0, "rejected": 3, "not_qualified": 0}
    assert (doc["complete"], doc["actionable"]) == (False, False)
    assert summary_lines(doc, "a.json")[0] == (
        "nodegate run r: INTERRUPTED during hca: 3 nodes, 0 admitted, 3 rejected (stages: reach)"
    )
    forged = {**doc, "summary": {"nodes": 3, "admitted": 1, "rejected": 2}}
    with pytest.raises(jsonschema.ValidationError):
        schemas.validate("admission", forged)


def test_latest_stays_on_the_last_complete_run(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "latest").symlink_to("old")
    interrupted = {"interrupted": "ib_pairs", "complete": False, "actionable": False}
    LatestLink().pytest_nodegate_admission(interrupted, tmp_path / "new")
    assert os.readlink(tmp_path / "latest") == "old"
    # A diagnostic run (-k, -m: not every required check ran) leaves it too (#13).
    LatestLink().pytest_nodegate_admission({"actionable": False}, tmp_path / "new")
    assert os.readlink(tmp_path / "latest") == "old"
    # A replay re-judges a captured bundle: not the fleet's latest state (#21).
    replay = {"actionable": True, "transport": "replay"}
    LatestLink().pytest_nodegate_admission(replay, tmp_path / "new")
    assert os.readlink(tmp_path / "latest") == "old"
    LatestLink().pytest_nodegate_admission({"actionable": True}, tmp_path / "new")
    assert os.readlink(tmp_path / "latest") == "new"


# A site plugin: transport "hang", whose sessions never end (until cancelled).
HANG = """\
import asyncio, os
from nodegate.transport.base import Transport

class HangTransport(Transport):
    name = "hang"

    async def _session(self, node, script):
        raise NotImplementedError

    async def run_node(self, node, stage, specs):
        with open(os.environ["NG_EVENTS"], "a") as f:
            f.write(f"started {node} {stage}\\n")
        try:
            await asyncio.sleep(3600)
        finally:
            with open(os.environ["NG_EVENTS"], "a") as f:
                f.write(f"cancelled {node} {stage}\\n")

def pytest_nodegate_transport_names():
    return ["hang"]

def pytest_nodegate_make_transport(settings, nodes, evidence):
    return HangTransport(evidence=evidence) if settings.transport == "hang" else None
"""

SITE_TEST = """\
import os, signal, time

def test_stops_the_run(node):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
"""


# The run's SIGINT disposition as it starts, whatever this suite's (`sys.argv[1]`: "ignored",
# as a background job of a script inherits it, or "default"), then exec the run.
STARTED_WITH = """\
import os, signal, sys
from nodegate.core.results import read_verdicts_doc
signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == "ignored" else signal.SIG_DFL)
os.execv(sys.argv[2], sys.argv[2:])
"""


def interrupted_run(
    tmp: Path, suite: Path, *args: str, when: str | None, sigint: str = "default"
) -> tuple[int, str]:
    """pytest with the `hang` transport, started with SIGINT `sigint` ("default", "ignored");
    SIGINT once `when` shows in the events (or never)."""
    (tmp / "inv.yaml").write_text(
        'version: 1\ndefaults: {profile: generic-hgx-h100}\nnodes: {"n[1-2]": {}}\n'
    )
    (tmp / "nghang.py").write_text(HANG)
    events = tmp / "events"
    cmd = [
        sys.executable, "-c", STARTED_WITH, sigint,
        sys.executable, "-m", "pytest", str(suite), f"--inventory={tmp / 'inv.yaml'}",
        f"--reports-dir={tmp / 'reports'}", "--run-id=r1", f"--rootdir={REPO}",
        "-p", "no:cacheprovider", "-q", "-p", "nghang", "--transport=hang", *args,
    ]  # fmt: skip
    # the plugin, and the package of this checkout (whichever one the interpreter has installed)
    env = {"NG_EVENTS": str(events), "PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp}:{REPO}/plugins"}
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp, env=env
    )
    deadline = time.monotonic() + 60
    while when is not None and time.monotonic() < deadline and p.poll() is None:
        if events.exists() and events.read_text().count(when) == 2:
            p.send_signal(signal.SIGINT)
            break
        time.sleep(0.02)
    out, _ = p.communicate(timeout=120)
    return p.returncode, out


def reasons(run_dir: Path) -> dict[str, list[str]]:
    doc = json.loads((run_dir / "admission.json").read_text())
    return {n: [r["message"] for r in d["reasons"]] for n, d in doc["nodes"].items()}


def junit_errors(run_dir: Path) -> tuple[str | None, list[str | None]]:
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    return suite.get("tests"), sorted({e.text for e in suite.iter("error")})


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_interrupted_in_a_passive_stage(tmp_path: Path, sigint: str) -> None:
    rc, out = interrupted_run(
        tmp_path, REPO / "suites", "-m", "reach", when="started", sigint=sigint
    )
    run_dir = tmp_path / "reports" / "r1"
    assert rc == 2, out
    assert (tmp_path / "events").read_text().count("cancelled") == 2  # the sessions were ended
    why = "run interrupted during reach"
    assert reasons(run_dir) == {"n1": [why], "n2": [why]}
    verdicts = read_verdicts_doc(run_dir)
    assert (verdicts["interrupted_during"], verdicts["verdicts"]) == ("reach", [])
    assert junit_errors(run_dir) == ("16", [f"not run: {why}"])  # 8 reach checks x 2 nodes
    assert not (tmp_path / "reports" / "latest").exists()
    assert f"Interrupted: nodegate: {why}" in out and "Traceback" not in out


def test_interrupted_while_the_items_run(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_site_stop.py").write_text(SITE_TEST)
    rc, out = interrupted_run(tmp_path, suite, when=None)
    run_dir = tmp_path / "reports" / "r1"
    assert rc == 2, out
    why = "run interrupted during the test items"
    assert reasons(run_dir) == {"n1": [why], "n2": [why]}
    assert junit_errors(run_dir) == ("2", [f"not run: {why}"])
    assert not (tmp_path / "reports" / "latest").exists()


def test_an_interrupted_local_session_ends_its_hung_command_at_once(tmp_path: Path) -> None:
    # the command hangs (its deadline: 60 s); Ctrl-C while it runs ends its whole tree now
    from nodegate.core.values import CommandSpec
    from nodegate.transport.local import LocalTransport

    pidfile = tmp_path / "pids"
    hang = CommandSpec("hang", ("sh", "-c", f"echo $PPID $$ > {pidfile}; exec sleep 61"), 60)

    def interrupt_once_it_runs() -> None:
        while not pidfile.exists() or not pidfile.read_text().strip():
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    loop, guard = LoopThread(), InterruptGuard()
    guard.install()
    threading.Thread(target=interrupt_once_it_runs, daemon=True).start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.call(LocalTransport().run_node("local", "s", [hang]))
    finally:
        guard.uninstall()
        loop.stop()
    assert time.monotonic() - t0 < 10
    pids = [int(p) for p in pidfile.read_text().split()]  # `timeout`, then the sleep

    def alive(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
        except OSError:
            return False

    gone = time.monotonic() + 2
    while any(map(alive, pids)) and time.monotonic() < gone:
        time.sleep(0.02)
    assert [p for p in pids if alive(p)] == []
