"""The demo fleet (inventories/sim/demo.yaml), all stages: every injected fault rejects
exactly its node, for its reason; every other node is admitted."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration

EXPECTED = {
    "gpu003": "reach.ssh",  # unreachable
    "gpu005": "pcie.gpu.width",  # GPU5 at x8
    "gpu007": "gpu_load.telemetry.throttle",  # thermal slowdown under load
    "gpu009": "reach.kernel.version",  # uname hangs
    "gpu012": "reach.ofed.version",  # ofed_info missing
    "gpu013": "hca.firmware.version",  # old HCA firmware
    "gpu014": "gpu.xid",  # Xid 79
    "gpu017": "reach.kernel.uniform",  # kernel off the fleet majority
    "gpu018": "nccl.localized",  # slow in NCCL jobs: named by localization
    "gpu020": "reach.os.release",  # garbage output
    "gpu021": "hca.counters.errors",  # symbol errors climb
    "gpu022": "gpu.remap",  # remap pending
    "gpu024": "reach.driver.version",  # driver below the floor
    "gpu025": "gpu_load.hbm.bandwidth",  # slow HBM copies
    "gpu026": "ib_pairs.rail.bandwidth",  # slow rail 3
    "gpu028": "reach.ssh",  # auth refused
    "gpu030": "hca.gpudirect",  # peermem missing
}


def test_demo_fleet_rejects_exactly_its_faults(sim_fleet):
    model = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    run = sim_fleet(model).run("-n", "2")
    assert run.rc == 1, run.stdout
    rejected = run.rejected()
    assert sorted(rejected) == sorted(EXPECTED)
    for node, check in EXPECTED.items():
        assert check in {r["check"] for r in rejected[node]}, (node, rejected[node])
    slow = [r for r in rejected["gpu026"] if r["check"] == "ib_pairs.rail.bandwidth"]
    assert [r["component"] for r in slow] == ["mlx5_3 port 1 (rail 3)"]
    assert len(run.admitted()) == 32 - len(EXPECTED)
    # nccl: the whole-set job fails, localization names gpu018 in three rounds after it; the
    # nodes it cleared pass the whole-set check, gpu018 fails it and localization
    # (the collective matrix then runs without it: its nccl.matrix is a SKIP saying so)
    assert {(r["check"], r["status"]) for r in rejected["gpu018"]} == {
        ("nccl.whole.busbw", "fail"),
        ("nccl.localized", "fail"),
        ("nccl.matrix", "skip"),
    }
    loc = json.loads((run.run_dir / "nccl" / "localization-generic-hgx-h100.json").read_text())
    assert loc["named"] == ["gpu018"] and loc["rounds_used"] == 3
    assert loc["whole_set"]["passed"] is False
    whole = {
        v["node"]: v["status"]
        for v in run.verdicts["verdicts"]
        if v["check"] == "nccl.whole.busbw" and v["status"] != "skip"
    }
    assert whole == {n: "fail" if n == "gpu018" else "pass" for n in [*run.admitted(), "gpu018"]}
