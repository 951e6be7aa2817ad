"""The simulated fleet's real Slurm cluster: srun runs each task on its node, drain/resume act
as on a real cluster, a slurmd_down node is not responding, stop ends every daemon by PID."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nodegate.sim.sshd import pid_alive

from .conftest import REPO, base_model

pytestmark = pytest.mark.integration


def _slurm(fleet, *argv: str) -> str:  # type: ignore[no-untyped-def]
    r = subprocess.run(list(argv), env=fleet.env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_srun_runs_each_task_on_its_node_and_scontrol_drains(sim_fleet) -> None:  # type: ignore[no-untyped-def]
    model = base_model(4)
    model["faults"] = {"gpu003": ["slurmd_down"]}
    fleet = sim_fleet(model, slurm=True)
    out = _slurm(
        fleet,
        "srun",
        "-N3",
        "-w",
        "gpu001,gpu002,gpu004",
        "--ntasks-per-node=2",
        "--mpi=none",
        "bash",
        "-c",
        'echo "$SLURM_PROCID $SLURMD_NODENAME ${NG_NODE##*/} $(command -v nvidia-smi)"',
    )
    rows = sorted(line.split() for line in out.splitlines())
    root = fleet.fleet.root
    assert rows == [
        [str(rank), node, node, f"{root}/nodes/{node}/bin/nvidia-smi"]
        for rank, node in enumerate(["gpu001", "gpu001", "gpu002", "gpu002", "gpu004", "gpu004"])
    ]
    fleet.slurm.wait_idle()  # the job's nodes are `comp` (completing) for a moment
    states = dict(
        line.split() for line in _slurm(fleet, "sinfo", "-h", "-N", "-o", "%N %t").splitlines()
    )
    assert {n: s for n, s in states.items() if n != "gpu003"} == {
        "gpu001": "idle",
        "gpu002": "idle",
        "gpu004": "idle",
    }
    # No slurmd ever answered for it: UNKNOWN, DOWN (not responding) once SlurmdTimeout passed.
    assert states["gpu003"] in {"unk", "unk*", "down*"}

    _slurm(fleet, "scontrol", "update", "NodeName=gpu002", "State=DRAIN", "Reason=nodegate t1: x")
    drained = _slurm(fleet, "sinfo", "-h", "-N", "-n", "gpu002", "-o", "%N|%t|%E")
    assert drained.strip() == "gpu002|drain|nodegate t1: x"
    _slurm(fleet, "scontrol", "update", "NodeName=gpu002", "State=RESUME")
    fleet.slurm.wait_idle()  # `idle*` until the controller's next ping of the resumed node
    assert _slurm(fleet, "sinfo", "-h", "-N", "-n", "gpu002", "-o", "%t").strip() == "idle"

    # slurmstepd's sockets fit a Unix socket path however deep the fleet's directory is.
    spool = (fleet.fleet.root / "slurm" / "spool").readlink()
    assert spool.parent == Path("/tmp") and spool.name.startswith("ngs-")
    pids = fleet.slurm.running_pids()
    assert len(pids) == 1 + 1 + 3  # munged, slurmctld, three slurmd
    assert fleet.slurm.stop() == 5
    assert not [p for p in pids if pid_alive(p)]
    assert not spool.exists()


def test_cli_sim_up_slurm_and_stop(tmp_path: Path, sshd_available: None, subnet) -> None:  # type: ignore[no-untyped-def]
    import yaml

    mpath = tmp_path / "m.yaml"
    mpath.write_text(yaml.safe_dump(base_model(2)))
    root = tmp_path / "fleet"
    cli = [sys.executable, "-m", "nodegate.cli", "sim"]
    common = ["--dir", str(root)]
    up = subprocess.run(
        [*cli, "up", "--slurm", "--model", str(mpath), "--subnet", subnet(), *common],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    try:
        assert up.returncode == 0, up.stderr
        assert f"export SLURM_CONF={root.resolve()}/slurm/slurm.conf" in up.stdout
        env = {**os.environ, "SLURM_CONF": str(root / "slurm" / "slurm.conf")}
        out = subprocess.run(
            ["srun", "-N2", "-l", "--mpi=none", "hostname"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert sorted(line.split(":")[0] for line in out.stdout.splitlines()) == ["0", "1"]
    finally:
        down = subprocess.run(
            [*cli, "stop", *common], capture_output=True, text=True, timeout=60, cwd=REPO
        )
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip().endswith("and 4 Slurm daemons")
