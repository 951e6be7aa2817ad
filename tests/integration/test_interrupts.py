"""A run interrupted while ib_pairs runs (Ctrl-C, SIGTERM, Ctrl-C twice), then run again.

The interrupted run exits 2 and leaves its reports: admission.json rejects every node for the
interrupt, verdicts.json holds what the stages before it measured, junit.xml lists every item as
not run, reports/latest stays on the last complete run, and no ib_write_bw it started is left
on the fleet, so the immediate re-run admits every node (no port still held by a server).
"""

from __future__ import annotations

import json
import signal
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from nodegate.core.results import read_verdicts_doc
from nodegate.stages.registry import STAGES

from tests.integration.conftest import SimFleet, base_model

pytestmark = pytest.mark.integration

NODES = [f"gpu{i:03d}" for i in range(1, 9)]
# The stages before ib_pairs: the passive ones and gpu_load (active, node-local).
EARLIER = ["reach", "pcie_gpu", "gpu_load", "hca", "fabric", "roce"]
WHY = "run interrupted during ib_pairs"


def spawned_on(fleet: SimFleet) -> list[str]:
    """`<pid> <command line>` of the live processes an active stage started on this fleet
    (their environment carries the spawn tag and one of this fleet's nodes)."""
    node_env = f"NG_NODE={fleet.fleet.root.resolve()}/".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue  # gone, or not ours to read
        if any(e.startswith(b"NODEGATE_SPAWN=") for e in env) and any(
            e.startswith(node_env) for e in env
        ):
            found.append(f"{d.name} {cmdline}")
    return found


def wait_for_ib_write_bw(fleet: SimFleet, proc: object, timeout_s: float = 180) -> None:
    """Until the run has ib_write_bw processes up on the fleet (ib_pairs is running)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]  # type: ignore[attr-defined]
        if any("ib_write_bw" in p for p in spawned_on(fleet)):
            return
        time.sleep(0.02)
    raise AssertionError("ib_pairs never started an ib_write_bw")


@pytest.mark.parametrize(
    "signals",
    [[signal.SIGINT], [signal.SIGTERM], [signal.SIGINT, signal.SIGINT]],
    ids=["ctrl-c", "sigterm", "ctrl-c-twice"],
)
def test_interrupted_during_ib_pairs_then_rerun(sim_fleet, signals):
    fleet = sim_fleet(base_model(8))
    previous = fleet.run("-m", "reach", "--allow-incomplete")  # moves reports/latest (#13)
    assert previous.rc == 6, previous.stdout
    reports = previous.run_dir.parent

    proc, run_dir = fleet.start()
    wait_for_ib_write_bw(fleet, proc)
    for sig in signals:
        proc.send_signal(sig)
        time.sleep(0.2)
    out, _ = proc.communicate(timeout=180)
    left = spawned_on(fleet)

    assert proc.returncode == 2, out
    assert left == []
    assert (reports / "latest").resolve() == previous.run_dir.resolve()

    doc = json.loads((run_dir / "admission.json").read_text())
    assert (doc["interrupted"], doc["stages"]) == ("ib_pairs", EARLIER)
    assert doc["summary"] == {"nodes": 8, "admitted": 0, "rejected": 8, "not_qualified": 0}
    reason = {
        "check": "run.interrupted", "status": "not_run", "component": "", "observed": None,
        "expected": None, "unit": None, "message": WHY, "remediation": None, "evidence": [],
        "remediation_class": "retest",
    }  # fmt: skip
    assert {n: d["reasons"] for n, d in doc["nodes"].items()} == {n: [reason] for n in NODES}

    verdicts = read_verdicts_doc(run_dir)
    assert (verdicts["interrupted_during"], verdicts["stages_run"]) == ("ib_pairs", EARLIER)
    earlier = {c.id for s in STAGES if s.name in EARLIER for c in s.checks}
    measured = {(v["check"], v["node"]) for v in verdicts["verdicts"]}
    assert measured == {(c, n) for c in earlier for n in NODES}
    assert {v["status"] for v in verdicts["verdicts"]} == {"pass"}

    # junit.xml: every item of the run, each an error saying it did not run
    every_check = {c.id for s in STAGES for c in s.checks}  # nccl's too: after the stop
    total = str(len(NODES) * len(every_check))
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert {k: suite.get(k) for k in ("tests", "errors", "failures", "skipped")} == {
        "tests": total, "errors": total, "failures": "0", "skipped": "0",
    }  # fmt: skip
    assert {e.text for e in suite.iter("error")} == {f"not run: {WHY}"}

    assert "Traceback" not in out and "Task was destroyed" not in out, out
    assert f"Interrupted: nodegate: {WHY}" in out
    assert ("nodegate: interrupted again" in out) == (len(signals) > 1), out

    if signals != [signal.SIGINT]:
        return  # the state each signal leaves is pinned above; one full rerun shows it recovers
    rerun = fleet.run()
    assert rerun.rc == 0, rerun.stdout
    assert rerun.admitted() == NODES
    assert (reports / "latest").resolve() == rerun.run_dir.resolve()
    items = ET.parse(rerun.run_dir / "junit.xml").getroot().find("testsuite")
    assert items is not None and items.get("tests") == total


def hung_on(fleet: SimFleet, timeout_s: float = 120) -> list[int]:
    """PIDs of the hung tool (`sleep 86400`, its `timeout`) on the fleet, once it runs."""
    node_env = f"NG_NODE={fleet.fleet.root.resolve()}/".encode()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for d in Path("/proc").iterdir():
            try:
                cmdline = (d / "cmdline").read_bytes().split(b"\0")
                env = (d / "environ").read_bytes().split(b"\0")
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if cmdline[:2] == [b"sleep", b"86400"] and any(e.startswith(node_env) for e in env):
                return [int(d.name), int(stat.rpartition(")")[2].split()[1])]
        time.sleep(0.05)
    raise AssertionError("the hung tool never started")


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_in_a_passive_stage_the_node_s_session_ends_at_once(sim_fleet, sig):
    # nvidia-smi hangs on gpu001 (its deadline: 60 s); the run is interrupted while it waits
    fleet = sim_fleet(base_model(2, faults={"gpu001": [{"hang": "nvidia-smi"}]}))
    proc, run_dir = fleet.start("-m", "pcie_gpu")
    pids = hung_on(fleet)
    assert all(alive(p) for p in pids)
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    ended = time.monotonic() - t0
    assert proc.returncode == 2, out
    doc = json.loads((run_dir / "admission.json").read_text())
    assert doc["interrupted"] == "pcie_gpu"
    gone = time.monotonic() + 2
    while any(alive(p) for p in pids) and time.monotonic() < gone:
        time.sleep(0.05)
    assert [p for p in pids if alive(p)] == [], f"left on gpu001 {ended:.1f} s after the signal"
    assert ended < 5, out
