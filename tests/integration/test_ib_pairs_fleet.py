"""Stage ib_pairs end to end: real ib_write_bw-like servers and clients between simulated
nodes over loopback, planned pairs, localization in at most three rounds."""

from __future__ import annotations

import json

import pytest
from nodegate.transport.evidence import resolve_evidence

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

STAGES = ("-m", "reach or ib_pairs")


def localization(run) -> dict:
    return json.loads((run.run_dir / "ib_pairs" / "localization-generic-hgx-h100.json").read_text())


def bandwidth_reasons(run, node):
    return [r for r in run.rejected()[node] if r["check"] == "ib_pairs.rail.bandwidth"]


def test_one_slow_rail_is_localized_in_three_rounds(sim_fleet):
    fleet = sim_fleet(base_model(16, faults={"gpu006": [{"slow_rail": "2"}]}))
    run = fleet.run(*STAGES)
    assert run.rc == 1, run.stdout
    assert list(run.rejected()) == ["gpu006"]
    (reason,) = bandwidth_reasons(run, "gpu006")
    assert reason["component"] == "mlx5_2 port 1 (rail 2)"
    assert reason["observed"] == pytest.approx(231.6) and reason["expected"] == ">= 360"
    assert "fails with two good partners" in reason["message"]
    loc = localization(run)
    assert loc["rounds_used"] <= 3
    plan = json.loads((run.run_dir / "ib_pairs" / "plan-generic-hgx-h100.json").read_text())
    (first,) = [
        t
        for t in plan["rounds"][0]["tests"]
        if t["rail"] == 2 and "gpu006" in (t["server"], t["client"])
    ]
    partner = first["client"] if first["server"] == "gpu006" else first["server"]
    assert loc["status"][partner]["2"] == "cleared"
    assert loc["status"]["gpu006"]["2"] == "blamed"
    # every node checked for stray ib_write_bw after the stage, none found
    cleanup = [v for v in run.verdicts["verdicts"] if v["check"] == "ib_pairs.cleanup"]
    assert len(cleanup) == 16 and all(v["status"] == "pass" for v in cleanup)
    # evidence: both sides' raw output of each test the verdict rests on (the node's own side,
    # which names its peer on the partner node)
    own = resolve_evidence(run.run_dir, reason["evidence"][0])
    (peer,) = [resolve_evidence(run.run_dir, ref) for ref in own["peers"]]
    sides = {own["role"]: own, peer["role"]: peer}
    assert sorted(sides) == ["client", "server"] and own["round"]["label"] == "1"
    assert "ib_write_bw -d mlx5_2" in sides["client"]["cmd"]
    assert "BW average" in sides["client"]["stdout"] and sides["client"]["rc"] == 0


def test_hung_server_killed_client_errors_and_slow_node(sim_fleet):
    fleet = sim_fleet(
        base_model(
            16,
            faults={
                "gpu003": ["server_hang"],
                "gpu005": ["client_refused"],
                "gpu009": ["qp_error"],
                "gpu012": [{"slow_node": "0.5"}],
            },
        )
    )
    run = fleet.run(*STAGES)
    rej = run.rejected()
    assert sorted(rej) == ["gpu003", "gpu005", "gpu009", "gpu012"], run.stdout
    hang = " ".join(r["message"] for r in bandwidth_reasons(run, "gpu003"))
    assert "killed" in hang
    refused = " ".join(r["message"] for r in bandwidth_reasons(run, "gpu005"))
    assert "Couldn't connect to" in refused
    qp = " ".join(r["message"] for r in bandwidth_reasons(run, "gpu009"))
    assert "Failed to modify QP" in qp
    slow = bandwidth_reasons(run, "gpu012")
    assert len(slow) == 8 and all(r["observed"] == pytest.approx(193.0) for r in slow)
    # nothing left running anywhere, the hung servers included
    cleanup = [v for v in run.verdicts["verdicts"] if v["check"] == "ib_pairs.cleanup"]
    assert cleanup and all(v["status"] == "pass" for v in cleanup)


def test_bad_link_between_two_leaves_blames_no_node(sim_fleet):
    model = base_model(16, racks={"nodes_per_rack": 4})
    # every node of leaf01 sees its link towards leaf03 degraded
    model["faults"] = {"gpu[001-004]": [{"bad_link": "leaf03"}]}
    fleet = sim_fleet(model)
    run = fleet.run(*STAGES)
    assert run.rc == 0, run.stdout
    loc = localization(run)
    assert {tuple(p["leaves"]) for p in loc["suspect_paths"]} == {("leaf01", "leaf03")}
    cleared = [v for v in run.verdicts["verdicts"] if "suspect" in v["message"]]
    assert cleared and all(v["status"] == "pass" for v in cleared)
