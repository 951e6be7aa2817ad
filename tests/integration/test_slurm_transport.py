"""`--transport slurm` end to end on a real Slurm over the simulated fleet: the same verdicts as
SSH on the same fleet, a node Slurm reports not responding, a hung node, ib_pairs via srun."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

SLURM = ("--transport", "slurm")
# What verdicts.json holds that is the run's and not the node's: how long things took.
TIMING = {"duration_s"}


def comparable(run: Any) -> list[dict[str, Any]]:
    """A run's verdicts without their timings, in a fixed order."""
    out = [
        {k: v for k, v in verdict.items() if k not in TIMING}
        for verdict in run.verdicts["verdicts"]
    ]
    return sorted(out, key=lambda v: (v["check"], v["node"], v.get("component") or ""))


def test_same_fleet_same_verdicts_over_ssh_and_slurm(sim_fleet):
    model = base_model(
        6,
        overrides={"gpu004": {"kernel": "5.15.0-91-generic"}},
        faults={
            "gpu002": [{"hang": "uname"}],
            "gpu003": [{"garbage": "cat"}, {"xid": "79"}],
            "gpu005": [{"missing": "grep"}, {"flood": "lspci"}],
            "gpu006": [{"forge": "cat"}],
        },
    )
    fleet = sim_fleet(model, slurm=True)
    sel = ("-m", "reach or pcie_gpu or hca")
    ssh = fleet.run(*sel)
    slurm = fleet.run(*sel, *SLURM)
    assert ssh.rc == slurm.rc == 1, slurm.stdout
    assert sorted(slurm.rejected()) == ["gpu002", "gpu003", "gpu004", "gpu005", "gpu006"], str(
        slurm.rejected().get("gpu001")
    )
    assert comparable(ssh) == comparable(slurm)
    # Only the run-level counters differ: SSH opened one connection per node, Slurm none.
    assert (ssh.verdicts["connections"], slurm.verdicts["connections"]) == (6, 0)
    assert ssh.admission["nodes"] == slurm.admission["nodes"]
    # The run released the allocation it took.
    jobs = subprocess.run(
        ["squeue", "-h", "-o", "%i"], env=fleet.env(), capture_output=True, text=True, timeout=30
    )
    assert jobs.returncode == 0 and jobs.stdout.strip() == ""


def test_slurmd_down_is_unreachable_hung_node_times_out_others_pass(sim_fleet):
    fleet = sim_fleet(
        base_model(4, faults={"gpu002": ["slurmd_down"], "gpu003": [{"hang": "uname"}]}),
        slurm=True,
    )
    run = fleet.run("-m", "reach", *SLURM)
    assert run.rc == 1, run.stdout
    rej = run.rejected()
    assert sorted(rej) == ["gpu002", "gpu003"]
    ssh = {r["check"]: r for r in rej["gpu002"]}["reach.ssh"]
    assert (ssh["status"], ssh["observed"]) == ("fail", "unreachable")
    # No slurmd ever answered: UNKNOWN at first, DOWN once SlurmdTimeout (30 s) has passed.
    states = ("UNKNOWN", "UNKNOWN+NOT_RESPONDING", "DOWN+NOT_RESPONDING (Not responding)")
    assert ssh["message"] in {f"unreachable: Slurm reports gpu002 {s}" for s in states}
    # its other checks have no output to judge, as for an unreachable SSH node
    assert {r["status"] for r in rej["gpu002"] if r["check"] != "reach.ssh"} == {"error"}
    hang = {r["check"]: r for r in rej["gpu003"]}
    assert set(hang) == {"reach.kernel.version", "reach.kernel.uniform"}
    assert "timed out" in hang["reach.kernel.version"]["message"]
    assert run.passed() == ["gpu001", "gpu004"]


def test_ib_pairs_over_slurm(sim_fleet):
    fleet = sim_fleet(base_model(4, faults={"gpu003": [{"slow_rail": "2"}]}), slurm=True)
    run = fleet.run("-m", "reach or ib_pairs", *SLURM)
    assert run.rc == 1, run.stdout
    assert list(run.rejected()) == ["gpu003"]
    (reason,) = [r for r in run.rejected()["gpu003"] if r["check"] == "ib_pairs.rail.bandwidth"]
    assert reason["component"] == "mlx5_2 port 1 (rail 2)"
    cleanup = [v for v in run.verdicts["verdicts"] if v["check"] == "ib_pairs.cleanup"]
    assert len(cleanup) == 4 and all(v["status"] == "pass" for v in cleanup)


def test_slurm_programs_missing_is_a_usage_error(sim_fleet, tmp_path, monkeypatch):
    fleet = sim_fleet(base_model(2))
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("bash", "sh", "ssh"):
        path = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        if path:
            (bare / tool).symlink_to(path)
    monkeypatch.setenv("PATH", str(bare))
    run = fleet.run("-m", "reach", *SLURM)
    assert run.rc == 4, run.stdout
    assert (
        "nodegate: --transport slurm: srun, salloc, scontrol, scancel not found on PATH "
        "(install the Slurm client: apt-get install slurm-client)"
    ) in run.stdout
