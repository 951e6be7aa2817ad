"""The reach stage end to end over real SSH against simulated fleets."""

from __future__ import annotations

import re

import junitparser
import pytest
from nodegate.core import schemas
from nodegate.transport.evidence import resolve_evidence

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

N_CHECKS = 8  # checks of the reach stage


def reason_checks(reasons):
    return {r["check"] for r in reasons if r["status"] in ("fail", "error")}


def test_32_nodes_4_faults_exactly_those_rejected(sim_fleet):
    model = base_model(
        32,
        overrides={
            "gpu017": {"kernel": "5.15.0-91-generic"},
            "gpu024": {"nvidia_driver": "525.147.05"},
        },
        faults={"gpu003": ["unreachable"], "gpu012": [{"missing": "ofed_info"}]},
    )
    fleet = sim_fleet(model)
    # reach only: later stages judge the same driver again (gpu.driver) and add test cases
    run = fleet.run("-m", "reach")
    assert run.rc == 1, run.stdout
    doc = run.admission
    schemas.validate("admission", doc)
    rej = run.rejected()
    assert sorted(rej) == ["gpu003", "gpu012", "gpu017", "gpu024"]
    assert len(run.passed()) == 28 and run.admitted() == []  # -m reach: not qualified (#13)
    # the right reasons
    assert "reach.ssh" in reason_checks(rej["gpu003"])
    ssh = next(r for r in rej["gpu003"] if r["check"] == "reach.ssh")
    assert ssh["status"] == "fail" and ssh["observed"] == "unreachable"
    assert reason_checks(rej["gpu012"]) == {"reach.ofed.version", "reach.ofed.uniform"}
    ofed = next(r for r in rej["gpu012"] if r["check"] == "reach.ofed.version")
    assert ofed["observed"] == "not installed" and ofed["component"] == "OFED"
    assert reason_checks(rej["gpu017"]) == {"reach.kernel.uniform"}  # allowed, but not the fleet's
    k = rej["gpu017"][0]
    assert (k["observed"], k["expected"]) == ("5.15.0-91-generic", "5.15.0-105-generic")
    assert "differs from fleet" in k["message"]
    assert reason_checks(rej["gpu024"]) == {"reach.driver.version", "reach.driver.uniform"}
    drv = next(r for r in rej["gpu024"] if r["check"] == "reach.driver.version")
    assert drv["observed"] == "525.147.05" and ">= 535.104.05" in drv["expected"]
    # every reason links to its raw evidence, which holds the exact command
    ev = drv["evidence"][0]
    assert ev == "raw/gpu024/reach.json#nvidia_driver"
    raw = resolve_evidence(run.run_dir, ev)
    assert raw["cmd"] == "cat /proc/driver/nvidia/version" and "525.147.05" in raw["stdout"]
    # one JUnit case per (check, node)
    xml = junitparser.JUnitXml.fromfile(str(run.run_dir / "junit.xml"))
    cases = [c for suite in xml for c in suite]
    assert len(cases) == 32 * N_CHECKS
    assert any(c.name == "test_kernel_uniform[gpu017]" and not c.is_passed for c in cases)
    # folded terminal summary
    assert "REJECTED 4: gpu[003,012,017,024]" in run.stdout  # #14: the count first
    assert (
        "gpu017: reach.kernel.uniform FAIL [kernel]: "
        "kernel 5.15.0-91-generic differs from fleet 5.15.0-105-generic" in run.stdout
    )
    # exactly one SSH connection per reachable node
    assert run.verdicts["connections"] == 31


def test_transport_faults_are_outcomes(sim_fleet):
    fleet = sim_fleet(
        base_model(
            8,
            faults={
                "gpu002": [{"hang": "uname"}],
                "gpu003": ["auth_refused"],
                "gpu004": ["hostkey_changed"],
                "gpu005": [{"garbage": "cat"}],
                "gpu006": [{"slow": "1"}],
            },
        )
    )
    run = fleet.run("-m", "reach")
    assert run.rc == 1, run.stdout
    rej = run.rejected()
    assert sorted(rej) == ["gpu002", "gpu003", "gpu004", "gpu005"]
    # a hung command ends at its deadline; the rest of the node's session still ran
    hang = {r["check"]: r for r in rej["gpu002"]}
    assert set(hang) == {"reach.kernel.version", "reach.kernel.uniform"}
    assert hang["reach.kernel.version"]["status"] == "error"
    assert "timed out" in hang["reach.kernel.version"]["message"]
    raw = resolve_evidence(run.run_dir, "raw/gpu002/reach.json#kernel")
    assert raw["rc"] == 124 and raw["timed_out"] is True
    ssh = {r["check"]: r for r in rej["gpu003"]}["reach.ssh"]
    assert ssh["observed"] == "auth_failed"
    ssh = {r["check"]: r for r in rej["gpu004"]}["reach.ssh"]
    assert ssh["observed"] == "hostkey_changed"
    garbage = {r["check"]: r for r in rej["gpu005"]}
    assert garbage["reach.os.release"]["status"] == "error"
    assert "unrecognized output" in garbage["reach.os.release"]["message"]
    assert "gpu006" in run.passed()  # slow but healthy


SAMPLE_TIME = re.compile(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d+")


def test_all_healthy_exit_0_and_xdist_same_verdicts(sim_fleet):
    fleet = sim_fleet(base_model(6, overrides={"gpu004": {"kernel": "5.15.0-91-generic"}}))
    serial = fleet.run()
    parallel = fleet.run("-n", "2")
    assert serial.rc == parallel.rc == 1

    def key(run):
        # gpu_load quotes its telemetry samples with their wall-clock times: not the verdict
        return sorted(
            (v["check"], v["node"], v["status"], SAMPLE_TIME.sub("<t>", v["message"]))
            for v in run.verdicts["verdicts"]
        )

    assert key(serial) == key(parallel)
    assert serial.admission["nodes"].keys() == parallel.admission["nodes"].keys()
    # xdist does not multiply connections: one per node, opened by the controller
    assert parallel.verdicts["connections"] == 6
    # A whole healthy run exits 0 with every node admitted: test_interrupts' rerun pins it
    # (one full run fewer here: CI time).
    assert serial.admission["summary"] == {
        "nodes": 6, "admitted": 5, "rejected": 1, "not_qualified": 0
    }  # fmt: skip
    assert list(serial.rejected()) == ["gpu004"]


def test_selection_k_and_nodes(sim_fleet):
    fleet = sim_fleet(base_model(8))
    run = fleet.run("-k", "kernel", "--nodes", "gpu[002-003],gpu007")
    assert run.rc == 6, run.stdout  # a diagnostic run: not qualified (#13)
    doc = run.admission
    assert list(doc["nodes"]) == ["gpu002", "gpu003", "gpu007"]
    assert doc["checks"] == ["reach.kernel.uniform", "reach.kernel.version"]
    assert all(d["checks_total"] == 2 for d in doc["nodes"].values())
    assert "6 passed" in run.stdout


def test_replay_rejudges_offline(sim_fleet):
    fleet = sim_fleet(base_model(4, overrides={"gpu002": {"nvidia_driver": "525.147.05"}}))
    live = fleet.run("-m", "reach")
    fleet.fleet.stop()  # nothing to reach any more
    replay = fleet.run(
        "--transport", "replay", "--replay", str(live.run_dir / "raw"), "-m", "reach"
    )
    assert replay.rc == live.rc == 1
    assert replay.rejected().keys() == live.rejected().keys() == {"gpu002"}


def test_bad_inventory_and_unknown_profile_are_usage_errors(sim_fleet, tmp_path):
    fleet = sim_fleet(base_model(2))
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        fleet.inventory.read_text().replace("connect_timeout: 10", "connect_timeout: -3")
    )
    run = fleet.run(inventory=bad)
    assert run.rc == 4
    assert "bad.yaml" in run.stdout and "connect_timeout" in run.stdout
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(fleet.inventory.read_text().replace("generic-hgx-h100", "no-such-sku"))
    run = fleet.run(inventory=unknown)
    assert run.rc == 4 and "unknown profile 'no-such-sku'" in run.stdout
