"""CI A/B mode on the simulated fleet: a healthy run saved as baseline, then a run where one
node's HCA firmware went down and one rail's bandwidth dropped 5 % (above its floor) exits 7
naming both; the second tier flags that rail as a fleet outlier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ClusterShell.NodeSet import NodeSet
from nodegate.core import schemas
from nodegate.stages.registry import STAGES

from tests.integration.conftest import Run, base_model

pytestmark = pytest.mark.integration

RAIL2, RAIL3 = "mlx5_2 (rail 2)", "mlx5_3 port 1 (rail 3)"
BW = "ib_pairs.rail.bandwidth"
ALL = [f"gpu{i:03d}" for i in range(1, 9)]
NCCL_CHECKS = tuple(c.id for s in STAGES if s.name == "nccl" for c in s.checks)
# traffic (active, after ib_pairs) skips a node an earlier stage failed, as nccl does
TRAFFIC_CHECKS = tuple(c.id for s in STAGES if s.name == "traffic" for c in s.checks)


def rail3_partners(run: Run, node: str) -> set[str]:
    """Every node that measured rail 3 against `node` (the plan the run wrote)."""
    plan = json.loads((run.run_dir / "ib_pairs" / "plan-generic-hgx-h100.json").read_text())
    return {
        t["client"] if t["server"] == node else t["server"]
        for r in plan["rounds"]
        for t in r["tests"]
        if t["rail"] == 3 and node in (t["server"], t["client"])
    }


def regressions(compare: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {
        (c["scope"], c["kind"], c["check"], c["component"])
        for c in compare["changes"]
        if c["regression"]
    }


def test_ab_pair_exits_regressed_naming_firmware_and_bandwidth(sim_fleet, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline"
    healthy = sim_fleet(base_model(8)).run(f"--save-baseline={baseline}")
    assert healthy.rc == 0, healthy.stdout
    assert f"baseline saved: {baseline / 'baseline.json'}" in healthy.stdout
    assert healthy.admission["outliers"] == {"flagged": [], "notes": []}
    saved = json.loads((baseline / "baseline.json").read_text())
    assert saved["run_id"] == healthy.admission["run_id"] and len(saved["nodes"]) == 8

    changed = sim_fleet(
        base_model(8, faults={"gpu003": [{"hca_old_firmware": "mlx5_2"}],
                              "gpu005": [{"slow_rail": "3:0.95"}]})
    )  # fmt: skip
    run = changed.run(f"--compare-to={baseline}")
    assert run.rc == 7, run.stdout
    compare = json.loads((run.run_dir / "compare.json").read_text())
    schemas.validate("compare", compare)
    slow = {"gpu005", *rail3_partners(run, "gpu005")}
    assert len(slow) >= 2 and "gpu003" not in slow
    assert regressions(compare) == {
        ("gpu003", "admission", "admission", ""),
        ("gpu003", "status", "hca.firmware.version", ""),
        ("gpu003", "status", "hca.firmware.uniform", ""),
        ("gpu003", "fact", "hca.firmware.version", RAIL2),
        ("gpu003", "status", BW, ""),
        ("gpu003", "status", "ib_pairs.cleanup", ""),
        # gpu003 failed hca, so the later stages did not run on it: no longer passing.
        *{("gpu003", "status", c, "") for c in (*TRAFFIC_CHECKS, *NCCL_CHECKS)},
        *{(n, "metric", BW, RAIL3) for n in slow},
    }
    # The slow rail slows the whole-set NCCL job: its busbw fell 5 % (369.68 -> 351.21 GB/s),
    # above its floor, beyond the 3 % rule. The job's number: the job regressed, once (not each
    # member, nor the fleet median); the nodes blamed are those whose own numbers fell.
    # The matrix's curve, per (collective, scale) point, each group once against the
    # baseline's group sharing most nodes: alltoall's groups over gpu005's slow rail 4.95 %
    # down, inside _fleet-compare's 5 % (changes, no regression); every other point the same.
    got = {(j["component"], j["nodes_before"], j["nodes_after"], j["message"], j["regression"])
           for j in compare["jobs"] if j["check"] == "nccl.matrix"}  # fmt: skip
    assert got == {
        (f"alltoall@{s}", "gpu[001-008]", "gpu[001-002,004-008]",
         "274.62 GB/s -> 261.02 GB/s (-5.0 %)", False) for s in ("leaf", "whole")
    }  # fmt: skip
    (job,) = [j for j in compare["jobs"] if j["check"] == "nccl.whole.busbw"]
    assert job == {
        "check": "nccl.whole.busbw", "component": "whole set", "nodes_before": "gpu[001-008]",
        "nodes_after": "gpu[001-002,004-008]", "before": 369.68, "after": 351.21,
        "unit": "GB/s", "regression": True, "rule": "may drop at most 3 %",
        "message": "369.68 GB/s -> 351.21 GB/s (-5.0 %)",
    }  # fmt: skip
    # Per node, the matrix says only that gpu003 no longer took part (its numbers: the jobs').
    matrix = {(c["scope"], c["kind"], c["regression"]) for c in compare["changes"]
              if c["check"] == "nccl.matrix"}  # fmt: skip
    assert matrix == {("gpu003", "status", True)}
    assert {(c["scope"], c["check"], c["component"]) for c in compare["changes"]
            if not c["regression"] and c["check"] != "nccl.matrix"} == {
        ("gpu003", "hca.firmware.uniform", RAIL2)}  # fmt: skip
    assert compare["summary"]["regressed_nodes"] == sorted({"gpu003", *slow})  # not ALL
    assert compare["summary"]["regressed_jobs"] == ["gpu[001-002,004-008]"]
    (fw,) = [c for c in compare["changes"] if c["kind"] == "fact" and c["regression"]]
    assert (fw["before"], fw["after"], fw["rule"]) == (
        "28.41.1000",
        "28.37.1014",
        "may not go down",
    )
    lines = run.stdout.splitlines()
    assert (
        "  REGRESSION job gpu[001-002,004-008]: nccl.whole.busbw [whole set]: 369.68 GB/s -> "
        "351.21 GB/s (-5.0 %) (nodes gpu[001-008] -> gpu[001-002,004-008]) (may drop at most 3 %)"
    ) in lines
    sections = [ln.strip("= ") for ln in lines if ln.startswith("=====") and "nodegate" in ln]
    # The decision last (#14): the other sections before it.
    assert sections == ["nodegate outliers", "nodegate A/B comparison", "nodegate admission"]
    assert (
        "  REGRESSION gpu003: hca.firmware.version [mlx5_2 (rail 2)]: 28.41.1000 -> 28.37.1014 "
        "(may not go down)"
    ) in lines
    assert (
        f"  REGRESSION {_nodeset(slow)}: {BW} [{RAIL3}]: 386 Gb/s -> 366.7 Gb/s (-5.0 %) "
        "(may drop at most 3 %)"
    ) in lines
    # The slow rail passed its floor (360 Gb/s): only the second tier sees it in this run.
    admission = run.admission
    schemas.validate("admission", admission)
    assert set(run.rejected()) == {"gpu003"}
    flags = admission["outliers"]["flagged"]
    assert {(f["node"], f["component"], f["observed"], f["blocks_admission"]) for f in flags} == {
        (n, RAIL3, 366.7, False) for n in slow
    }
    assert f"  {_nodeset(slow)}: flagged {BW} [{RAIL3}]: 366.7 Gb/s, below 374.42 Gb/s: " in (
        run.stdout
    )


def test_a_baseline_of_another_profile_is_a_usage_error(sim_fleet, tmp_path: Path) -> None:
    fleet = sim_fleet(base_model(2))
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    doc = {
        "schema_version": 1, "kind": "nodegate-baseline", "run_id": "old",
        "finished_at": "2026-11-29T00:00:01+00:00", "inventory": "x", "transport": "ssh",
        "complete": True, "stages": [], "checks": [],
        "nodes": {"gpu001": {"profile": "nd-h100-v5", "admitted": True, "checks": {}}},
    }  # fmt: skip
    (baseline / "baseline.json").write_text(json.dumps(doc))
    run = fleet.run(f"--compare-to={baseline}")
    assert run.rc == 4, run.stdout
    assert (
        f"ERROR: nodegate: --compare-to {baseline}: the baseline is of another profile: gpu001 "
        "is nd-h100-v5 in the baseline, generic-hgx-h100 in this run"
    ) in run.stdout
    assert not run.run_dir.exists()


def _nodeset(nodes: set[str]) -> str:
    return str(NodeSet.fromlist(sorted(nodes)))
