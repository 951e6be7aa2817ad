"""Replaying a run's bundle re-judges ib_pairs from the processes it recorded: the same plan
spawns the same commands, answered with their captured output, so the replay (fleet stopped)
gives the live run's verdicts; a test the capture lacks is an ERROR, never a pass."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

STAGES = ("-m", "reach or ib_pairs")
FIELDS = ("check", "node", "component", "status", "observed", "expected", "message")


def verdict_keys(run) -> list[tuple]:
    """Every verdict as the fields a re-judgement must reproduce."""
    return sorted(tuple(json.dumps(v[f]) for f in FIELDS) for v in run.verdicts["verdicts"])


def test_replay_rejudges_ib_pairs_from_the_recorded_processes(sim_fleet):
    fleet = sim_fleet(
        base_model(8, faults={"gpu006": [{"slow_rail": "2"}], "gpu003": ["qp_error"]})
    )
    live = fleet.run(*STAGES)
    assert live.rc == 1, live.stdout
    assert sorted(live.rejected()) == ["gpu003", "gpu006"]
    fleet.fleet.stop()  # the replay reaches nothing

    bundle = live.run_dir / "raw"
    replay = fleet.run(*STAGES, "--transport=replay", f"--replay={bundle}")
    assert replay.rc == 1, replay.stdout
    assert verdict_keys(replay) == verdict_keys(live)
    assert replay.rejected() == live.rejected()
    assert replay.admission["transport"] == "replay"
    # the replay's own raw/ is a bundle of the same processes again
    again = fleet.run(*STAGES, "--transport=replay", f"--replay={replay.run_dir / 'raw'}")
    assert verdict_keys(again) == verdict_keys(live)

    # A test the capture does not hold cannot be answered: that rail is an ERROR, not a pass.
    cut = fleet.tmp / "cut"
    shutil.copytree(bundle, cut)
    faulty = ("gpu003", "gpu006")
    path, doc, client = next(
        (p, d, k)
        for p in sorted(cut.glob("gpu*/ib_pairs.json"))
        if p.parent.name not in faulty
        for d in [json.loads(p.read_text())]
        for k, r in d["commands"].items()
        if r["role"] == "client"
        and r["round"]["label"] == "1"
        and r["test"]["server"] not in faulty
    )
    node, test = path.parent.name, doc["commands"][client]["test"]
    rail, server = test["rail"], test["server"]
    del doc["commands"][client]
    path.write_text(json.dumps(doc))
    partial = fleet.run(*STAGES, "--transport=replay", f"--replay={cut}")
    assert partial.rc == 1
    # Fail closed: what changed is an ERROR (the cut test's rail first), nothing newly passes.
    before = {(v["check"], v["node"], v["component"]): v for v in live.verdicts["verdicts"]}
    after = {(v["check"], v["node"], v["component"]): v for v in partial.verdicts["verdicts"]}
    assert after.keys() == before.keys()
    changed = {k for k in after if after[k]["status"] != before[k]["status"]}
    assert {after[k]["status"] for k in changed} == {"error"}
    cut_rail = after[("ib_pairs.rail.bandwidth", node, f"mlx5_{rail} port 1 (rail {rail})")]
    assert cut_rail["status"] == "error"
    # A spawn the bundle cannot answer makes that node's side lost (never a rail fault).
    assert cut_rail["message"].startswith(f"not in the capture {cut}: ")
    assert cut_rail["message"].endswith(f"; round 1 with {server}: not run")
