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


def model_nodes(n: int) -> list[str]:
    return [f"gpu{i:03d}" for i in range(1, n + 1)]

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
    # admitted, but the admin's drain keeps it out: named, not hidden in "none unchanged"
    assert (
        f"  admitted, still out of service (not by nodegate): gpu004: IDLE+DRAIN ({FOREIGN})"
    ) in applied.stdout.splitlines()

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


# #21: a reason nodegate wrote when a transport quoted Slurm's reason inside its message.
NESTED = (
    "nodegate slurm-full: reach.ssh ssh unreachable: Slurm reports gpu003 IDLE+DRAIN (nodegate "
    "act-apply: gpu.xid GPU2 Xid 79 x1 (GPU has fallen off the bus: drain_rma) (rma)) (reboot)"
)


def reason_field(fleet: Any, node: str) -> str:
    """`Reason=<text> [<user>@<time>]` as scontrol shows it: the time changes at each update."""
    line = scontrol(fleet, "show", "node", "-o", node)
    return line[line.index("Reason=") :].strip() if "Reason=" in line else ""


def test_a_tool_failing_everywhere_drains_nobody_and_reasons_stay_one_per_cause(
    sim_fleet, tmp_path: Path
) -> None:
    # #21 items 1 and 3: dcgmi missing on every node (the same tool error everywhere) is
    # systemic; the three Xid nodes are each one's own fault; gpu005 was drained by an admin.
    model = base_model(5)
    model["faults"] = {n: [{"missing": "dcgmi"}] for n in model_nodes(5)}
    for n in ("gpu002", "gpu003", "gpu005"):
        model["faults"][n].append({"xid": "79@2"})
    fleet = sim_fleet(model, slurm=True)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "gate-h100.yaml").write_text(PROFILE)
    common = ("--profiles-dir", str(tmp_path / "profiles"), "--profile", "gate-h100",
              "--act", "slurm", "--apply", "-m", "reach or pcie_gpu")  # fmt: skip
    scontrol(fleet, "update", "NodeName=gpu001", "State=DRAIN", f"Reason={EARLIER}")
    scontrol(fleet, "update", "NodeName=gpu003", "State=DRAIN", f"Reason={NESTED}")
    scontrol(fleet, "update", "NodeName=gpu005", "State=DRAIN", f"Reason={FOREIGN}")
    before = states(fleet)
    assert before == {
        "gpu001": ("drained", EARLIER),
        "gpu002": ("idle", "none"),
        "gpu003": ("drained", NESTED),
        "gpu004": ("idle", "none"),
        "gpu005": ("drained", FOREIGN),
    }

    # Past max_drain (2 nodes to drain, 1 allowed) nothing is drained: exit 8, one line.
    refused = fleet.run(*common, "--max-drain", "1")
    assert refused.rc == 8, refused.stdout
    doc = refused.admission
    assert {n: d["state"] for n, d in doc["nodes"].items()} == {
        "gpu001": "not_qualified", "gpu002": "rejected", "gpu003": "rejected",
        "gpu004": "not_qualified", "gpu005": "rejected",
    }  # fmt: skip
    assert [(s["check"], s["nodes"], s["errors"], s["judged"]) for s in doc["systemic"]] == [
        ("gpu.dcgm", [f"gpu00{i}" for i in range(1, 6)], 5, 5)
    ]
    assert {n: [(r["check"], r["status"]) for r in d["reasons"] if r["status"] != "skip"]
            for n, d in doc["nodes"].items()} == {
        "gpu001": [("gpu.dcgm", "systemic")],
        "gpu002": [("gpu.xid", "fail"), ("gpu.dcgm", "systemic")],
        "gpu003": [("gpu.xid", "fail"), ("gpu.dcgm", "systemic")],
        "gpu004": [("gpu.dcgm", "systemic")],
        "gpu005": [("gpu.xid", "fail"), ("gpu.dcgm", "systemic")],
    }  # fmt: skip
    assert doc["guard"] == {"max_drain": 1, "rule": "1 node", "from": "--max-drain", "nodes": 5}
    message = (
        "slurm: REFUSED to drain 2 nodes, more than max_drain 1 of 5 nodes (1 node; from "
        "--max-drain); top check gpu.xid on 2 of them; nothing drained (a fleet-wide cause? else "
        "--max-drain)"
    )
    assert message in refused.stdout.splitlines()
    dcgm = doc["systemic"][0]["message"]
    assert (
        "SYSTEMIC gpu.dcgm ERROR on 5 of 5 nodes (more than 50%): probable controller/tool "
        f"problem, not the nodes' (not held against gpu[001-005], not drained for it): {dcgm}"
    ) in refused.stdout
    assert "NOT QUALIFIED 2: gpu[001,004]: systemic errors (below)" in refused.stdout
    slurm = actions(refused)
    assert slurm["refused"] == {
        "take_out": 2, "max_drain": 1, "rule": "1 node", "from": "--max-drain", "nodes": 5,
        "top_check": "gpu.xid", "top_check_nodes": 2, "message": message,
    }  # fmt: skip
    assert [(n, a, r) for n, a, r, _ in table(slurm)] == [
        ("gpu001", "none", "unchanged"),  # not qualified: left alone, nodegate's reason too
        ("gpu002", "drain", "skipped"),
        ("gpu003", "drain", "skipped"),
        ("gpu004", "none", "unchanged"),
        ("gpu005", "none", "unchanged"),  # the admin's reason is never touched
    ]
    assert states(fleet) == before

    # Within the bound (the shipped default: 10 % or 8 nodes): the Xid nodes are drained, one
    # reason each; nodegate's old reason on gpu003 is replaced, not quoted.
    applied = fleet.run(*common)
    assert applied.rc == 1, applied.stdout
    assert applied.admission["guard"] == {
        "max_drain": 8, "rule": "10% or 8 nodes, whichever is larger",
        "from": "profile gate-h100 admission.guard.max_drain", "nodes": 5,
    }  # fmt: skip
    xid = (
        f"nodegate {applied.admission['run_id']}: gpu.xid GPU2 Xid 79 x1 (GPU has fallen off the "
        "bus: drain_rma) (rma)"
    )
    assert [(n, a, r, why) for n, a, r, why in table(actions(applied))] == [
        ("gpu001", "none", "unchanged", None),
        ("gpu002", "drain", "applied", xid),
        ("gpu003", "drain", "applied", xid),
        ("gpu004", "none", "unchanged", None),
        ("gpu005", "none", "unchanged", None),
    ]
    after = states(fleet)
    assert after == {
        "gpu001": ("drained", EARLIER),
        "gpu002": ("drained", xid),
        "gpu003": ("drained", xid),
        "gpu004": ("idle", "none"),
        "gpu005": ("drained", FOREIGN),
    }
    shown = {n: reason_field(fleet, n) for n in after}

    # The same state again: nothing changes in Slurm, not even a reason's time.
    again = fleet.run(*common)
    assert again.rc == 1, again.stdout
    assert [(n, a, r) for n, a, r, _ in table(actions(again))] == [
        (n, "none", "unchanged") for n in after
    ]
    assert [a["why"] for a in actions(again)["actions"]][1:3] == [
        "already drained by nodegate for this cause"
    ] * 2
    assert {n: reason_field(fleet, n) for n in after} == shown


def test_a_fail_on_every_node_past_the_shipped_bound_drains_nobody(
    sim_fleet, tmp_path: Path
) -> None:
    # #21 item 1: a driver below the profile's floor on all 9 nodes fails every node (a FAIL
    # is never systemic: a bad rollout really fails them all); 9 drains are more than the
    # shipped bound (10 % or 8 nodes, whichever is larger): none is drained.
    model = base_model(9)
    model["hardware"]["nvidia_driver"] = "525.147.05"
    fleet = sim_fleet(model, slurm=True)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "gate-h100.yaml").write_text(PROFILE)
    before = states(fleet)
    run = fleet.run("--profiles-dir", str(tmp_path / "profiles"), "--profile", "gate-h100",
                    "--act", "slurm", "--apply", "-m", "reach or pcie_gpu")  # fmt: skip
    assert run.rc == 8, run.stdout
    doc = run.admission
    assert (doc["summary"]["rejected"], doc["systemic"]) == (9, [])
    assert {tuple(sorted({r["check"] for r in d["reasons"]})) for d in doc["nodes"].values()} == {
        ("gpu.driver", "reach.driver.version")
    }
    slurm = actions(run)
    refused = slurm["refused"]
    assert (refused["take_out"], refused["max_drain"], refused["rule"], refused["from"]) == (
        9, 8, "10% or 8 nodes, whichever is larger",
        "profile gate-h100 admission.guard.max_drain",
    )  # fmt: skip
    # each node's main cause: its first failure (in item order) of the worst class, both
    # fix_config here
    top = "gpu.driver"
    assert (refused["top_check"], refused["top_check_nodes"]) == (top, 9)
    assert (
        "slurm: REFUSED to drain 9 nodes, more than max_drain 8 of 9 nodes (10% or 8 nodes, "
        "whichever is larger; from profile gate-h100 admission.guard.max_drain); top check "
        f"{top} on 9 of them; nothing drained (a fleet-wide cause? else --max-drain)"
    ) in run.stdout.splitlines()
    assert {(a["action"], a["result"]) for a in slurm["actions"]} == {("drain", "skipped")}
    assert states(fleet) == before == {n: ("idle", "none") for n in model_nodes(9)}
