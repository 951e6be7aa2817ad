"""Stage progress while the fleet is gathered: plain lines for CI logs, rich bars on a
terminal, nothing under -q off a terminal; per active round, tests done / planned."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from nodegate.core import bundled
from nodegate.inventory import load_inventory
from nodegate.profiles import ProfileLibrary
from nodegate.session.display import Progress, stage_deadline_s
from nodegate.stages.ib_pairs import STAGE as IB_PAIRS
from nodegate.stages.reach import STAGE as REACH
from nodegate.transport.script import KILL_AFTER_S, SESSION_SLACK_S

REPO = Path(__file__).resolve().parents[2]
INVENTORY = "version: 1\ndefaults: {profile: generic-hgx-h100}\nnodes: {'n[1-3]': {}}\n"


@pytest.fixture
def fleet(tmp_path: Path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    nodes = list(load_inventory(inv).nodes)
    lib = ProfileLibrary([bundled.profiles_dir()])
    return inv, nodes, {n.name: lib.get("generic-hgx-h100") for n in nodes}


def test_passive_deadline_is_waves_of_connect_plus_script(fleet):
    _, nodes, profiles = fleet
    specs = REACH.commands(nodes[0], profiles["n1"])
    script = sum(s.timeout_s + KILL_AFTER_S for s in specs) + SESSION_SLACK_S
    assert stage_deadline_s(3, script, 10.0, 256) == round(21 + script, 1)
    # two waves at --fanout 2
    assert stage_deadline_s(3, script, 10.0, 2) == round(2 * (21 + script), 1)
    assert stage_deadline_s(3, None, 10.0, 256) is None  # an active stage: its rounds show it


class Recorder:
    def __init__(self) -> None:
        self.started: list[tuple[str, int, bool, float | None]] = []

    def stage_started(self, stage, nodes, *, active, script_deadline_s):
        self.started.append((stage, nodes, active, script_deadline_s))


def test_stages_announce_the_deadline_of_the_scripts_they_planned(fleet, tmp_path):
    """The stage tells the display its plan's worst script deadline; the display never plans."""
    from nodegate.framework.stage import StageContext, StageOptions

    _, nodes, profiles = fleet
    rec = Recorder()
    ctx = StageContext(nodes, profiles, None, tmp_path, StageOptions(progress=rec))  # type: ignore[arg-type]
    specs = REACH.commands(nodes[0], profiles["n1"])
    script = sum(s.timeout_s + KILL_AFTER_S for s in specs) + SESSION_SLACK_S
    REACH.announce(ctx, script)
    IB_PAIRS.announce(ctx)
    assert rec.started == [("reach", 3, False, script), ("ib_pairs", 3, True, None)]


def test_plain_lines_count_nodes_failures_and_rounds(fleet, monkeypatch):
    _, nodes, profiles = fleet
    clock = iter([100.0, 100.0, 100.0, 101.5, 107.0, 107.0, 107.0, 108.0])
    monkeypatch.setattr("nodegate.session.display.time.monotonic", lambda: next(clock))
    lines: list[str] = []
    p = Progress("plain", lines.append, 10.0, 256, io.StringIO())
    script = 30.0
    deadline = stage_deadline_s(3, script, 10.0, 256)
    p.stage_started("reach", 3, active=False, script_deadline_s=script)
    p.node_done("reach", "n1", True)  # 1.5 s: no line yet (one every 5 s)
    p.node_done("reach", "n2", False)  # 7 s
    p.node_done("ib_pairs-cleanup", "n2", False)  # another stage's file: not counted
    p.stage_finished("reach", 2)
    p.round_started("ib_pairs", "generic-hgx-h100: round 1", 2)
    p.test_done("ib_pairs", "generic-hgx-h100: round 1")
    p.test_done("ib_pairs", "generic-hgx-h100: round 1")
    assert lines == [
        f"nodegate: reach: 0/3 nodes, 0 failed, 0.0 s elapsed, deadline in {deadline:.1f} s",
        f"nodegate: reach: 2/3 nodes, 1 failed, 7.0 s elapsed, deadline in {deadline - 7:.1f} s",
        "nodegate: reach done: 3 nodes, 2 failed a check, 8.0 s",
        "nodegate: ib_pairs generic-hgx-h100: round 1: 2/2 tests done",
    ]


def test_off_says_nothing_but_the_plan_lines(fleet):
    _, nodes, profiles = fleet
    lines: list[str] = []
    p = Progress("off", lines.append, 10.0, 256, io.StringIO())
    p.stage_started("reach", 3, active=False, script_deadline_s=30.0)
    p.node_done("reach", "n1", True)
    p.stage_finished("reach", 0)
    p.log("ib_pairs generic-hgx-h100: round 1: 72 tests")
    assert lines == ["nodegate: ib_pairs generic-hgx-h100: round 1: 72 tests"]


def test_live_bars_render_stage_and_round(fleet):
    _, nodes, profiles = fleet
    out = io.StringIO()
    with Progress("live", lambda line: None, 10.0, 256, out) as p:
        p.stage_started("reach", 3, active=False, script_deadline_s=30.0)
        p.node_done("reach", "n1", False)
        p.round_started("ib_pairs", "c: round 1", 4)
        p.test_done("ib_pairs", "c: round 1")
        p.log("a plan line")
    text = out.getvalue()
    assert "reach" in text and "1/3 nodes" in text and "1 failed" in text
    assert "ib_pairs c: round 1" in text and "1/4 tests" in text
    assert "nodegate: a plan line" in text


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    (tmp_path / "empty").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites"), f"--inventory={inv}", "-m", "reach"]
        + ["--transport=replay", f"--replay={tmp_path / 'empty'}", "-p", "no:cacheprovider"]
        + [f"--reports-dir={tmp_path / 'r'}", f"--rootdir={REPO}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_a_run_shows_progress_before_any_item(tmp_path):
    p = run(tmp_path, "--progress=plain", "-q")
    lines = p.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("nodegate:")][0] == (
        f"nodegate: 3 nodes from {tmp_path / 'inv.yaml'} (profiles: generic-hgx-h100); "
        "collecting the test items"
    )
    first = [i for i, ln in enumerate(lines) if ln.startswith("nodegate: reach")]
    assert [lines[i].split(":")[1] for i in first] == [" reach", " reach done"]
    assert lines[first[1]].startswith("nodegate: reach done: 3 nodes, 3 failed a check, ")
    assert lines[first[1] + 1].startswith("FFFF")  # the items come after the stage


def test_quiet_off_a_terminal_shows_none_and_a_bad_mode_is_a_usage_error(tmp_path):
    quiet = run(tmp_path, "-q")
    assert "nodegate: reach" not in quiet.stdout
    bad = run(tmp_path, "--progress=loud")
    assert bad.returncode == 4
    assert (
        "ERROR: nodegate: --progress: got 'loud', expected one of auto, live, plain, off"
        in bad.stderr
    )
