"""--act slurm against a real Slurm (slurmctld + one slurmd per simulated node), #13 item 4:
a rejected node drained with its reason, a foreign drain untouched, a requalified node
resumed, dry-run changes nothing, a re-run is idempotent, a -k run acts on nobody."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from nodegate.core import schemas

from .conftest import base_model

pytestmark = pytest.mark.integration

FOREIGN = "admin: fan replaced, burn-in until Friday"
EARLIER = "nodegate r0: gpu.xid GPU2 Xid 79 x1 (GPU has fallen off the bus: drain_rma) (rma)"
# The policy these runs cover: reach and pcie_gpu (hca and ib_pairs are other tests' subject).
PROFILE = """\
name: gate-h100
description: generic-hgx-h100 admitted on reach and pcie_gpu
extends: generic-hgx-h100
admission: {require: {stages: [reach, pcie_gpu]}}
"""


def scontrol(fleet: Any, *args: str) -> str:
    p = subprocess.run(["scontrol", *args], env=fleet.env(), capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return p.stdout


def states(fleet: Any) -> dict[str, tuple[str, str]]:
    """Node -> (sinfo state, reason), as an operator reads them."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"], env=fleet.env(),
                         capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    return {n: (t, e) for n, t, e in (line.split("|", 2) for line in out.splitlines())}


def settled(fleet: Any, node: str, timeout_s: float = 30.0) -> dict[str, tuple[str, str]]:
    """The states once `node` is idle (not `idle*`, not responding yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = states(fleet)
        if now[node][0] == "idle" or time.monotonic() > deadline:
            return now
        time.sleep(0.5)


def actions(run: Any) -> dict[str, Any]:
    doc = json.loads((run.run_dir / "actions.json").read_text())
    schemas.validate("actions", doc)
    slurm: dict[str, Any] = doc["targets"]["slurm"]
    return slurm


def table(slurm: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    return [(a["node"], a["action"], a["result"], a["reason"]) for a in slurm["actions"]]


def test_slurm_drain_resume_foreign_dry_run_idempotent(sim_fleet, tmp_path: Path) -> None:
    model = base_model(4)
    model["faults"] = {"gpu002": [{"xid": "79@2"}]}
    fleet = sim_fleet(model, slurm=True)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "gate-h100.yaml").write_text(PROFILE)
    common = ("--profiles-dir", str(tmp_path / "profiles"), "--profile", "gate-h100",
              "--act", "slurm", "-m", "reach or pcie_gpu")  # fmt: skip
    scontrol(fleet, "update", "NodeName=gpu001", "State=DRAIN", f"Reason={EARLIER}")
    scontrol(fleet, "update", "NodeName=gpu004", "State=DRAIN", f"Reason={FOREIGN}")
    before = states(fleet)
    assert before == {
        "gpu001": ("drained", EARLIER),
        "gpu002": ("idle", "none"),
        "gpu003": ("idle", "none"),
        "gpu004": ("drained", FOREIGN),
    }

    dry = fleet.run(*common)
    assert dry.rc == 1, dry.stdout
    assert dry.admission["complete"] is True
    assert {n: d["state"] for n, d in dry.admission["nodes"].items()} == {
        "gpu001": "admitted", "gpu002": "rejected", "gpu003": "admitted", "gpu004": "admitted",
    }  # fmt: skip
    assert dry.admission["remediation"] == {"rma": ["gpu002"]}

    def reason(run: Any) -> str:
        return (
            f"nodegate {run.admission['run_id']}: gpu.xid GPU2 Xid 79 x1 "
            "(GPU has fallen off the bus: drain_rma) (rma)"
        )

    plan = actions(dry)
    assert (plan["mode"], plan["skipped"], plan["error"]) == ("dry-run", None, None)
    assert table(plan) == [
        ("gpu001", "resume", "planned", None),
        ("gpu002", "drain", "planned", reason(dry)),
        ("gpu003", "none", "unchanged", None),
        ("gpu004", "none", "unchanged", None),
    ]
    assert states(fleet) == before  # dry-run changes nothing

    applied = fleet.run(*common, "--apply")
    assert applied.rc == 1, applied.stdout
    done = actions(applied)
    assert done["mode"] == "apply"
    assert table(done) == [
        ("gpu001", "resume", "applied", None),
        ("gpu002", "drain", "applied", reason(applied)),
        ("gpu003", "none", "unchanged", None),
        ("gpu004", "none", "unchanged", None),
    ]
    assert [a["why"] for a in done["actions"]] == [
        "admitted; drained by nodegate",
        "rejected",
        "admitted and in service",
        "foreign drain/down reason kept (not nodegate's)",
    ]
    assert done["actions"][1]["before"] == {"state": "IDLE", "reason": None}
    assert done["actions"][1]["after"] == {"state": "IDLE+DRAIN", "reason": reason(applied)}
    after = settled(fleet, "gpu001")  # a resumed node is `idle*` until the controller's ping
    assert after == {
        "gpu001": ("idle", "none"),
        "gpu002": ("drained", reason(applied)),
        "gpu003": ("idle", "none"),
        "gpu004": ("drained", FOREIGN),
    }
    assert f"Reason={reason(applied)} [" in scontrol(fleet, "show", "node", "-o", "gpu002")
    assert "slurm (applied):" in applied.stdout

    again = fleet.run(*common, "--apply")  # idempotent: nothing left to do
    assert again.rc == 1, again.stdout
    assert [(n, a, r) for n, a, r, _ in table(actions(again))] == [
        ("gpu001", "none", "unchanged"),
        ("gpu002", "none", "unchanged"),  # drained by nodegate for this cause already
        ("gpu003", "none", "unchanged"),
        ("gpu004", "none", "unchanged"),
    ]
    assert states(fleet) == after

    diag = fleet.run(*common, "--apply", "-k", "kernel")  # a diagnostic run acts on nobody
    assert diag.rc == 6, diag.stdout
    out = diag.admission["out_of_scope"]
    assert len(out) == 23 and "reach.kernel.version" not in out
    skipped = actions(diag)
    assert (skipped["actions"], skipped["skipped"]) == (
        [], "run not complete (required checks out of scope: 23): no action without "
        "--allow-incomplete",
    )  # fmt: skip
    assert states(fleet) == after


def test_slurm_unusable_is_a_usage_error(sim_fleet, tmp_path: Path, monkeypatch) -> None:
    fleet = sim_fleet(base_model(2))
    conf = tmp_path / "no-such" / "slurm.conf"
    monkeypatch.setenv("SLURM_CONF", str(conf))
    run = fleet.run("--act", "slurm", "-m", "reach")
    assert run.rc == 4, run.stdout
    assert f"ERROR: nodegate: --act slurm: SLURM_CONF={conf}: no such file" in run.stdout
    assert not run.run_dir.exists()  # stopped before the run started
