"""Admission policy and waivers on the simulated fleet (#13 items 1-2): a -k run admits
nobody and says why; a waiver admits its node until it expires."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
from pathlib import Path

import pytest
import yaml
from nodegate.core.results import VERDICTS_FILE, read_verdicts_doc
from nodegate.stages.registry import STAGES, checks_by_id

from .conftest import REPO, base_model

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
    # roce: null and traffic: null (no load criteria written): not required
    roce = {c for c in checks_by_id() if c.startswith(("roce.", "traffic."))}
    assert set(doc["out_of_scope"]) == set(checks_by_id()) - ran - roce
    for node in doc["nodes"].values():
        assert node["state"] == "not_qualified"
        assert {(r["check"], r["status"], r["message"]) for r in node["reasons"]} == {
            (c, "out_of_scope", f"{c} did not run in this run") for c in doc["out_of_scope"]
        }
    assert "NOT QUALIFIED 3: gpu[001-003]: 68 required checks did not run in this run: " in (
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
    assert {p["labels"]["nodegate.io/admitted"] for p in patches.values()} == {"true"}
    assert {p["taint"] for p in patches.values()} == {None}  # nodegate's own removed, if any
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
    assert read_verdicts_doc(expired.run_dir)["verdicts"]

    bad = tmp_path / "bad.yaml"
    bad.write_text("waivers:\n  - {check: gpu.xid, nodes: gpu003}\n")
    usage = fleet.run(*common, f"--waivers={bad}")
    assert usage.rc == 4
    assert f"ERROR: nodegate: {bad}: waivers.0: 'reason' is a required property" in usage.stdout


def readme_waiver() -> str:
    """The README's waiver example, as written there."""
    text = (REPO / "README.md").read_text()
    head = text.index("**Waivers** (`--waivers FILE`")
    start = text.index("```yaml\n", head) + len("```yaml\n")
    return text[start : text.index("```", start)]


def test_the_readme_waiver_admits_gpu014_through_every_stage(sim_fleet, tmp_path: Path) -> None:
    # #21 item 4: the demo's gpu014 (Xid 79 on GPU2) under the README's waiver goes on into
    # ib_pairs and nccl like a passing node, and is admitted; the whole profile is required.
    demo = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    model = base_model(4)
    model["nodes"] = "gpu[013-016]"
    model["faults"] = {"gpu014": demo["faults"]["gpu014"]}
    fleet = sim_fleet(model)
    text = readme_waiver()
    assert "nodes: gpu014 " in text and "check: gpu.xid " in text
    # Only the expiry moves (the README's date is an example): valid for another month.
    soon = (dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(days=30)).isoformat()
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(re.sub(r"expires: \S+", f"expires: {soon}", text))
    run = fleet.run(f"--waivers={waivers}")
    assert run.rc == 0, run.stdout
    doc = run.admission
    assert (doc["complete"], doc["summary"]["admitted"]) == (True, 4)
    assert doc["stages"] == [s.name for s in STAGES]
    node = doc["nodes"]["gpu014"]
    assert (node["state"], node["reasons"]) == ("admitted", [])
    assert [(w["check"], w["status"], w["component"].split()[0]) for w in node["waived"]] == [
        ("gpu.xid", "fail", "GPU2")
    ]
    # measured in the active stages like every other node, not skipped
    got = {}
    lines = gzip.decompress((run.run_dir / VERDICTS_FILE).read_bytes()).decode().splitlines()
    for line in lines:  # zgrep's view: a verdict a line
        if '"node":"gpu014"' in line:
            v = json.loads(line)
            if v["check"].startswith(("gpu_load.", "ib_pairs.", "nccl.")):
                got.setdefault(v["check"], set()).add(v["status"])
    loaded = {c.id for s in STAGES if s.name == "gpu_load" for c in s.checks}
    assert {c: got.pop(c) for c in loaded} == {c: {"pass"} for c in loaded}
    assert got == {
        "ib_pairs.rail.bandwidth": {"pass"}, "ib_pairs.cleanup": {"pass"},
        "nccl.single_node.busbw": {"pass"}, "nccl.whole.busbw": {"pass"},
        "nccl.localized": {"pass"}, "nccl.matrix": {"pass"}, "nccl.transport": {"pass"},
        "nccl.cleanup": {"pass"},
    }  # fmt: skip
    assert "WAIVED gpu014: gpu.xid FAIL [GPU2 0000:4c:00.0 serial " in run.stdout


def test_a_waiver_for_a_node_not_in_the_inventory_is_a_usage_error(
    sim_fleet, tmp_path: Path
) -> None:
    fleet = sim_fleet(base_model(2))
    bad = tmp_path / "waivers.yaml"
    bad.write_text(readme_waiver().replace("gpu014", "gpu999"))
    run = fleet.run(f"--waivers={bad}", "-m", "reach")
    assert run.rc == 4, run.stdout
    assert (
        f"ERROR: nodegate: {bad}: waivers.0.nodes: 'gpu999': gpu999 not in the inventory"
    ) in run.stdout
    assert not run.run_dir.exists()
