"""report.html shows, for each rejected node, its recent decisions from the run history and
the trend of the metric it failed on (this run's number last); both backends."""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path

from nodegate.history.queries import node_past
from nodegate.history.store import open_store
from nodegate.reports.html import write_report

from tests.history_runs import BW, RAIL3, T0, bw, make_run, record, ssh

NODES = ["gpu001", "gpu002"]


def test_a_rejected_node_shows_its_recent_decisions_and_its_metrics_trend(
    history_url: str, tmp_path: Path
) -> None:
    store = open_store(history_url)
    for i, (gpu2, up) in enumerate([(392.0, True), (380.0, True), (386.0, False)]):
        vs = [ssh("gpu001"), ssh("gpu002", up), bw("gpu001", 392.0)]
        vs += [bw("gpu002", gpu2)] if up else []
        record(store, make_run(f"p{i}", vs, NODES, T0 + dt.timedelta(days=i)))
    now = make_run("now", [ssh(n) for n in NODES] + [bw("gpu001", 391.0), bw("gpu002", 350.0)],
                   NODES, T0 + dt.timedelta(days=3))  # fmt: skip
    with store.reading() as conn:
        past = node_past(conn, now.doc)
    store.close()
    assert list(past) == ["gpu002"]  # gpu001 is admitted
    assert [(d["run_id"], d["state"]) for d in past["gpu002"]["decisions"]] == [
        ("p0", "admitted"), ("p1", "admitted"), ("p2", "rejected")]  # fmt: skip
    assert past["gpu002"]["trend"] == {
        "check": BW, "component": RAIL3, "unit": "Gb/s",
        "points": [("p0", 392.0), ("p1", 380.0), ("now", 350.0)],
    }  # fmt: skip
    run_dir = tmp_path / "now"
    run_dir.mkdir()
    page = html.unescape(write_report(run_dir, now.doc, now.result.to_json(), past).read_text())
    assert "Recent decisions (run history):" in page
    assert f"Trend of {BW} [{RAIL3}]: 392 → 380 → 350 Gb/s (runs p0, p1, now)" in page
    assert "reach.ssh [ssh] FAIL: unreachable: connection refused" in page  # p2's reason
    assert '<polyline fill="none" stroke="#d32f2f" stroke-width="2" points="5.0,5.0 ' in page
