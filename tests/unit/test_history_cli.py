"""`nodegate history ...` on both backends: the questions as JSON (what scripts read) and as
tables, import of run directories, and bad input as one line with exit 4."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from nodegate import cli
from nodegate.history.store import open_store

from tests.history_runs import BW, RAIL3, T0, bw, make_run, record, run_dir, ssh

NODES = ["gpu001", "gpu002", "gpu003"]


def fleet_runs(url: str) -> None:
    """Three runs: gpu002's rail 3 fails twice then recovers; gpu003 fails in the third."""
    store = open_store(url)
    plan = [("r1", {"gpu002": 350.0}), ("r2", {"gpu002": 352.0}), ("r3", {"gpu003": 300.0})]
    for i, (run_id, low) in enumerate(plan):
        vs = [ssh(n) for n in NODES] + [bw(n, low.get(n, 392.0)) for n in NODES]
        record(store, make_run(run_id, vs, NODES, T0 + dt.timedelta(days=i)))
    store.close()


def ask(capsys, url: str, *args: str) -> tuple[int, object]:
    rc = cli.main(["history", *args, "--history", url, "--json"])
    out = capsys.readouterr().out
    return rc, json.loads(out) if rc == 0 else out


def test_the_questions_answer_from_every_run(history_url: str, capsys) -> None:
    fleet_runs(history_url)
    rc, nodes = ask(capsys, history_url, "nodes", "--days", "100000")
    assert rc == 0
    assert [(n["node"], n["state"], n["rejections"], n["last_rejected_run"]) for n in nodes] == [
        ("gpu001", "admitted", 0, None), ("gpu002", "admitted", 2, "r2"),
        ("gpu003", "rejected", 1, "r3"),
    ]  # fmt: skip
    assert nodes[2]["last_reason"] == f"{BW} [{RAIL3}] FAIL: 300.0 Gb/s below the floor"
    _, timeline = ask(capsys, history_url, "timeline", "gpu002")
    assert [(e["run_id"], e["state"], e["remediation"]) for e in timeline] == [
        ("r1", "rejected", "reseat_cable"), ("r2", "rejected", "reseat_cable"),
        ("r3", "admitted", None),
    ]  # fmt: skip
    _, series = ask(capsys, history_url, "series", "gpu002", BW, "--component", "mlx5_3")
    assert [(s["run_id"], s["value"], s["status"]) for s in series] == [
        ("r1", 350.0, "fail"), ("r2", 352.0, "fail"), ("r3", 392.0, "pass")]  # fmt: skip
    _, yields = ask(capsys, history_url, "yield")
    assert [(y["run_id"], y["yield"], y["change"], y["top_failing"], y["by_remediation"])
            for y in yields] == [
        ("r1", 0.6667, None, [{"check": BW, "nodes": 1}], {"reseat_cable": 1}),
        ("r2", 0.6667, 0.0, [{"check": BW, "nodes": 1}], {"reseat_cable": 1}),
        ("r3", 0.6667, 0.0, [{"check": BW, "nodes": 1}], {"reseat_cable": 1}),
    ]  # fmt: skip
    _, mtbr = ask(capsys, history_url, "mtbr")
    assert mtbr == [
        {"node": "gpu002", "runs": 3, "rejections": 2, "incidents": 1, "mean_hours_between": None,
         "first": "2026-11-01T08:00:00+00:00", "last": "2026-11-01T08:00:00+00:00"},
        {"node": "gpu003", "runs": 3, "rejections": 1, "incidents": 1, "mean_hours_between": None,
         "first": "2026-11-03T08:00:00+00:00", "last": "2026-11-03T08:00:00+00:00"},
    ]  # fmt: skip
    assert cli.main(["history", "timeline", "gpu002", "--history", history_url]) == 0
    table = capsys.readouterr().out
    assert "timeline of gpu002" in table and "reseat_cable" in table


def test_import_back_fills_run_directories_once(history_url: str, tmp_path: Path, capsys) -> None:
    vs = [ssh(n) for n in NODES] + [bw(n, 392.0) for n in NODES]
    d = run_dir(tmp_path / "reports", make_run("old-run", vs, NODES, T0))
    assert cli.main(["history", "import", str(d), str(d), "--history", history_url]) == 0
    shown = history_url.replace("%2F", "/")
    assert capsys.readouterr().out.splitlines() == [
        f"imported old-run (complete) from {d}: 6 verdicts, 3 measurements -> {shown}",
        f"replaced old-run (complete) from {d}: 6 verdicts, 3 measurements -> {shown}",
    ]
    rc, runs = ask(capsys, history_url, "runs")
    assert [(r["run_id"], r["source"]) for r in runs] == [("old-run", "import")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nodes", "--history", "postgres://ops:pw@/x?host=/nope"],
         "nodegate: --history: got 'postgres://ops:***@/x?host=/nope': driver 'postgres' is not "
         "one of sqlite, postgresql+psycopg"),
        (["nodes", "--history", "sqlite:///{tmp}/none.sqlite"],
         "nodegate: history sqlite:///{tmp}/none.sqlite: no history there yet ({tmp}/none.sqlite "
         "does not exist)"),
        (["import", "{tmp}/not-a-run", "--history", "sqlite:///{tmp}/h.sqlite"],
         "nodegate: history import {tmp}/not-a-run: not a directory"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_4(tmp_path: Path, capsys, args, message) -> None:
    rc = cli.main(["history", *(a.format(tmp=tmp_path) for a in args)])
    err = capsys.readouterr().err
    assert (rc, err) == (4, message.format(tmp=tmp_path) + "\n")
    assert "pw@" not in err
