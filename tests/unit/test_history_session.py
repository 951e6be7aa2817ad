"""The history in a run (subprocess pytest runs over a replay bundle that answers nothing: every
node rejected, no fleet needed): written by default, by URL or by the inventory's setting on
both backends; off; an unreachable database or bad URL stops the run before anything with
exit 4 and no password; a locked database at the end keeps the run directory and exits 8;
rules on name repeat offenders on the terminal."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from nodegate.history import queries
from nodegate.history.store import open_store

REPO = Path(__file__).resolve().parents[2]
INVENTORY = """\
version: 1
defaults: {profile: generic-hgx-h100}
nodes: {"n[1-2]": {}}
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "empty").mkdir()
    return tmp_path


def run(site: Path, *args: str, run_id: str = "r1") -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "suites"), f"--rootdir={REPO}",
           "-p", "no:cacheprovider", "-q", "--inventory=inv.yaml", "-m", "reach",
           "--transport=replay", "--replay=empty", "--reports-dir=reports", f"--run-id={run_id}",
           *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=site)


def recorded(url: str) -> list[tuple[str, str, int | None]]:
    store = open_store(url)
    with store.reading() as conn:
        out = [(r["run_id"], r["state"], r["exit_code"]) for r in queries.runs(conn)]
    store.close()
    return out


def test_a_run_is_recorded_by_default_beside_the_run_directories(site: Path) -> None:
    p = run(site)
    assert p.returncode == 1, p.stdout + p.stderr
    db = site / "reports" / "history.sqlite"
    assert (
        f"history: run r1 (incomplete) recorded in sqlite:///{db}: 16 verdicts, 0 measurements"
        in (p.stdout)
    )
    assert recorded(f"sqlite:///{db}") == [("r1", "incomplete", 1)]
    p = run(site, "--history=off", run_id="r2")
    assert p.returncode == 1 and "history: run" not in p.stdout
    assert recorded(f"sqlite:///{db}") == [("r1", "incomplete", 1)]


def test_a_run_is_recorded_at_the_url_given_or_the_inventorys(site: Path, history_url) -> None:
    p = run(site, f"--history={history_url}")
    assert p.returncode == 1, p.stdout + p.stderr
    (site / "inv2.yaml").write_text(INVENTORY + f"settings: {{history: '{history_url}'}}\n")
    p = run(site, "--inventory=inv2.yaml", run_id="r2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert recorded(history_url) == [("r1", "incomplete", 1), ("r2", "incomplete", 1)]
    assert not (site / "reports" / "history.sqlite").exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        # What follows "cannot open the database:" is the driver's own words (psycopg's).
        ("postgresql+psycopg://ops:s3cret@/ng?host={tmp}/nowhere",
         "ERROR: nodegate: history postgresql+psycopg://ops:***@/ng?host={tmp}/nowhere: cannot "
         "open the database: "),
        ("mysql://ops:s3cret@db/ng",
         "ERROR: nodegate: --history: got 'mysql://ops:***@db/ng': driver 'mysql' is not one of "
         "sqlite, postgresql+psycopg"),
    ],
)  # fmt: skip
def test_an_unusable_history_stops_the_run_before_any_connection(
    site: Path, url: str, message: str
) -> None:
    p = run(site, f"--history={url.format(tmp=site)}")
    assert (p.returncode, p.stdout) == (4, "")
    first = p.stderr.splitlines()[0]
    assert (
        first.startswith(message.format(tmp=site))
        if message.endswith(": ")
        else (first == message.format(tmp=site))
    )
    assert "s3cret" not in p.stderr
    assert not (site / "reports").exists()  # no run directory: nothing was connected to


def test_a_write_failure_at_the_end_keeps_the_run_and_exits_8(site: Path, history_url) -> None:
    """Another run holds the database for longer than this one waits: SQLite's file lock,
    PostgreSQL's lock on the runs table (`lock_timeout` in the URL)."""
    open_store(history_url).close()  # at the newest schema: configure only reads
    if history_url.startswith("sqlite"):
        url = history_url + "?timeout=0.5"
        holder = sqlite3.connect(history_url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        why = "database is locked (another run holds the file; waited 0.5 s)"
    else:
        import psycopg
        from sqlalchemy.engine import make_url

        url = history_url + "&options=-c%20lock_timeout%3D500"
        u = make_url(history_url)
        holder = psycopg.connect(host=str(u.query["host"]), user=u.username, dbname=u.database)
        holder.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        why = "canceling statement due to lock timeout"
    try:
        p = run(site, f"--history={url}")
    finally:
        holder.close()
    assert p.returncode == 8, p.stdout + p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("HISTORY WRITE FAILED")]
    assert line == (
        f"HISTORY WRITE FAILED (exit 8; {site / 'reports' / 'r1'} is kept, `nodegate history "
        f"import` it later): history {url}: writing run r1: {why}"
    )
    doc = json.loads((site / "reports" / "r1" / "admission.json").read_text())
    assert doc["summary"]["rejected"] == 2
    assert recorded(history_url) == []


PROFILE = """\
name: strict-h100
description: generic-hgx-h100 with the repeat offender rule on
extends: generic-hgx-h100
history:
  repeat_offender: {enabled: true, rejections: 2, days: 7, clean_runs: 1,
                    escalate: {fix_config: rma}}
"""


def test_rules_on_name_repeat_offenders_on_the_terminal(site: Path, history_url) -> None:
    (site / "profiles").mkdir()
    (site / "profiles" / "strict-h100.yaml").write_text(PROFILE)
    args = ("--profiles-dir=profiles", "--profile=strict-h100", f"--history={history_url}")
    first = run(site, *args)
    assert first.returncode == 1 and "REPEAT OFFENDER" not in first.stdout
    second = run(site, *args, run_id="r2")
    assert second.returncode == 1, second.stdout + second.stderr
    lines = second.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("REPEAT OFFENDER")] == [
        f"REPEAT OFFENDER {n}: rejected 2 times in 7 days (rule: 2); remediation escalated: "
        f"fix_config -> rma (runs r1, r2)"
        for n in ("n1", "n2")
    ]
    assert "  by remediation: rma n[1-2]" in lines
    doc = json.loads((site / "reports" / "r2" / "admission.json").read_text())
    assert [f["node"] for f in doc["history"]["flags"]] == ["n1", "n2"]
    assert "s3cret" not in second.stdout


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("drift: {enabled: true, metrics: [ib_pairs.rail.speed]}",
         "ERROR: nodegate: profile bad-rules (profiles/bad-rules.yaml): history.drift.metrics: "
         "ib_pairs.rail.speed: no such check"),
        ("repeat_offender: {enabled: true, rejections: 0}",
         "ERROR: nodegate: invalid profile profiles/bad-rules.yaml (extends _nvidia-xid, "
         "_admission, _fleet-compare, _gpu-load, generic-hgx-h100):"),
    ],
)  # fmt: skip
def test_bad_rule_values_are_usage_errors(site: Path, section: str, message: str) -> None:
    (site / "profiles").mkdir()
    (site / "profiles" / "bad-rules.yaml").write_text(
        "name: bad-rules\ndescription: x\nextends: generic-hgx-h100\nhistory:\n  " + section + "\n"
    )
    p = run(site, "--profiles-dir=profiles", "--profile=bad-rules")
    assert (p.returncode, p.stdout) == (4, ""), p.stderr
    assert p.stderr.splitlines()[0] == message.format(tmp=site)
    if "invalid profile" in message:
        assert "history.repeat_offender.rejections: 0 is less than the minimum of 2" in p.stderr
    assert not (site / "reports").exists()
