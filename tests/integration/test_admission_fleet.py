"""Admission policy and waivers on the simulated fleet (#13 items 1-2): a -k run admits
nobody and says why; a waiver admits its node until it expires."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from nodegate.stages.registry import checks_by_id

from .conftest import base_model

pytestmark = pytest.mark.integration

PROFILE = """\
name: gate-h100
description: generic-hgx-h100 admitted on reach and pcie_gpu
extends: generic-hgx-h100
admission: {require: {stages: [reach, pcie_gpu]}}
"""
WAIVER = """\
waivers:
  - check: gpu.xid
    nodes: gpu[003-004]
    component: GPU2
    reason: GPU2 awaiting RMA, ticket OPS-77
    owner: ops@example.com
    expires: {expires}
"""


def test_a_k_run_admits_nobody_and_says_why(sim_fleet) -> None:
    fleet = sim_fleet(base_model(3))
    run = fleet.run("-k", "kernel")
    assert run.rc == 6, run.stdout
    doc = run.admission
    assert doc["summary"] == {"nodes": 3, "admitted": 0, "rejected": 0, "not_qualified": 3}
    assert (doc["complete"], doc["actionable"]) == (False, False)
    ran = {"reach.kernel.version", "reach.kernel.uniform"}
    assert doc["checks"] == sorted(ran)
    roce = {c for c in checks_by_id() if c.startswith("roce.")}  # roce: null, not required
    assert set(doc["out_of_scope"]) == set(checks_by_id()) - ran - roce
    for node in doc["nodes"].values():
        assert node["state"] == "not_qualified"
        assert {(r["check"], r["status"], r["message"]) for r in node["reasons"]} == {
            (c, "out_of_scope", f"{c} did not run in this run") for c in doc["out_of_scope"]
        }
    assert "NOT QUALIFIED 3: gpu[001-003]: 52 required checks did not run in this run: " in (
        run.stdout
    )
    assert "INCOMPLETE run (not every required check ran): reports/latest and actions do not " \
        "follow it (--allow-incomplete to let them)" in run.stdout  # fmt: skip
    assert not (run.run_dir.parent / "latest").exists()

    allowed = fleet.run("-k", "kernel", "--allow-incomplete")
    assert allowed.rc == 6 and allowed.admission["actionable"] is True
    assert (allowed.run_dir.parent / "latest").readlink() == Path(allowed.run_dir.name)


def test_a_waiver_admits_its_node_until_it_expires(sim_fleet, tmp_path: Path) -> None:
    fleet = sim_fleet(base_model(4, faults={"gpu003": [{"xid": "79@2"}]}))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "gate-h100.yaml").write_text(PROFILE)
    today = dt.datetime.now(dt.timezone.utc).date()
    live = tmp_path / "live.yaml"
    live.write_text(WAIVER.format(expires=today.isoformat()))
    old = tmp_path / "old.yaml"
    old.write_text(WAIVER.format(expires=(today - dt.timedelta(days=1)).isoformat()))
    common = ("--profiles-dir", str(tmp_path / "profiles"), "--profile", "gate-h100",
              "-m", "reach or pcie_gpu")  # fmt: skip

    waived = fleet.run(*common, f"--waivers={live}", "--act", "kubernetes")
    assert waived.rc == 0, waived.stdout
    # --act kubernetes (dry-run): every admitted node's patch, for review
    patches = json.loads((waived.run_dir / "kubernetes-patches.json").read_text())
    assert sorted(patches) == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert {p["patch"]["metadata"]["labels"]["nodegate.io/admitted"] for p in patches.values()} \
        == {"true"}  # fmt: skip
    k8s = json.loads((waived.run_dir / "actions.json").read_text())["targets"]["kubernetes"]
    assert [(a["node"], a["action"], a["result"]) for a in k8s["actions"]] == [
        (n, "patch", "planned") for n in ("gpu001", "gpu002", "gpu003", "gpu004")
    ]
    doc = waived.admission
    assert (doc["complete"], doc["summary"]["admitted"]) == (True, 4)
    node = doc["nodes"]["gpu003"]
    assert (node["state"], node["reasons"]) == ("admitted", [])
    assert [(w["check"], w["status"], w["observed"], w["remediation_class"], w["waiver"]["reason"])
            for w in node["waived"]] == [
        ("gpu.xid", "fail", "79", "rma", "GPU2 awaiting RMA, ticket OPS-77")
    ]  # fmt: skip
    assert (doc["waivers"]["applied"], doc["waivers"]["expired"]) == (1, [])
    assert "1 xfailed" in waived.stdout
    assert "WAIVED gpu003: gpu.xid FAIL [GPU2 0000:4c:00.0 serial " in waived.stdout
    junit = (waived.run_dir / "junit.xml").read_text()
    assert 'type="pytest.xfail" message="waived gpu.xid [GPU2 0000:4c:00.0 serial ' in junit

    expired = fleet.run(*common, f"--waivers={old}")
    assert expired.rc == 1, expired.stdout
    doc = expired.admission
    assert {n: d["state"] for n, d in doc["nodes"].items()} == {
        "gpu001": "admitted", "gpu002": "admitted", "gpu003": "rejected", "gpu004": "admitted",
    }  # fmt: skip
    assert [(r["check"], r["remediation_class"]) for r in doc["nodes"]["gpu003"]["reasons"]] == [
        ("gpu.xid", "rma")
    ]
    assert [w["index"] for w in doc["waivers"]["expired"]] == [1]
    assert (
        f"WARNING waiver 1 (gpu.xid [GPU2] on gpu[003-004], owner ops@example.com) expired on "
        f"{today - dt.timedelta(days=1)}: ignored"
    ) in expired.stdout
    assert json.loads((expired.run_dir / "verdicts.json").read_text())["verdicts"]

    bad = tmp_path / "bad.yaml"
    bad.write_text("waivers:\n  - {check: gpu.xid, nodes: gpu003}\n")
    usage = fleet.run(*common, f"--waivers={bad}")
    assert usage.rc == 4
    assert f"ERROR: nodegate: {bad}: waivers.0: 'reason' is a required property" in usage.stdout
