"""The gpu_load stage end to end over real SSH: one simulated node per fault of issue #28,
each blamed on its GPU (or the host) with its remediation; a node lost mid-load rejects only
itself."""

from __future__ import annotations

import json

import pytest
from nodegate.core import schemas
from nodegate.stages.gpu_load.checks import CHECKS
from nodegate.transport.evidence import resolve_evidence

from tests.integration.chaos import kill_orphans
from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

GPU3 = "GPU3 0000:5d:00.0 serial "  # the faults' default GPU; serials differ per node
MARK = "reach or pcie_gpu or gpu_load"
CHECK_IDS = CHECKS.ids()
LEVEL = "admission.min_level"  # the reason a run below a profile's min_level carries

# node -> (fault, {(check id, component prefix)} that must reject it, remediation class)
EXPECT: dict[str, tuple[object, set[tuple[str, str]], str]] = {
    "gpu003": ("h2d_slow", {("gpu_load.h2d.bandwidth", GPU3)}, "reseat_cable"),
    "gpu004": (
        "thermal_throttle_under_load",
        {
            ("gpu_load.telemetry.throttle", GPU3),
            ("gpu_load.telemetry.sm_clock", GPU3),
            ("gpu_load.telemetry.temperature", GPU3),
        },
        "repair_cooling_power",
    ),
    "gpu005": (
        "power_brake",
        {("gpu_load.telemetry.throttle", GPU3), ("gpu_load.telemetry.sm_clock", GPU3)},
        "repair_cooling_power",
    ),
    "gpu006": ("hbm_slow", {("gpu_load.hbm.bandwidth", GPU3)}, "rma"),
    "gpu007": (
        {"xid_under_load": "13@1"},
        {("gpu_load.telemetry.xid", "GPU1 0000:3b:00.0 serial ")},
        "reset_gpu",
    ),
    "gpu008": ("dcgm_targeted_power_fail", {("gpu_load.dcgm.targeted_power", GPU3)}, "rma"),
    # the SM clock drops with no clock event reason: only the clock check sees it
    "gpu009": ("sm_clock_drop", {("gpu_load.telemetry.sm_clock", GPU3)}, "repair_cooling_power"),
}


def bad(reasons):
    return {
        (
            r["check"],
            r["component"].split("serial ")[0] + ("serial " if "serial" in r["component"] else ""),
        )
        for r in reasons
        if r["status"] in ("fail", "error")
    }


def test_one_node_per_fault_blamed_on_its_gpu(sim_fleet, transport):
    faults = {node: [fault] for node, (fault, _, _) in EXPECT.items()}
    fleet = sim_fleet(base_model(9, faults=faults), transport=transport)
    run = fleet.run("-m", MARK)
    assert run.rc == 1, run.stdout
    schemas.validate("admission", run.admission)
    rej = run.rejected()
    assert sorted(rej) == sorted(EXPECT), run.stdout
    assert sorted(run.passed()) == ["gpu001", "gpu002"]
    for node, (fault, want, cls) in EXPECT.items():
        assert bad(rej[node]) == want, (node, fault, rej[node])
        for r in rej[node]:
            assert r["status"] == "fail" and r["remediation"] and r["evidence"], r
            assert r["remediation_class"] == cls, (node, r)
    h2d = rej["gpu003"][0]
    assert (h2d["observed"], h2d["expected"], h2d["unit"]) == (13.5, ">= 45", "GB/s")
    assert "far below its peers" in h2d["message"] and "0000:5d:00.0: NUMA node 0" in h2d["message"]
    raw = resolve_evidence(run.run_dir, h2d["evidence"][0])
    assert raw["cmd"].startswith("nvbandwidth -t host_to_device_memcpy_ce")
    # the throttle's evidence is the samples taken under load
    hot = next(r for r in rej["gpu004"] if r["check"] == "gpu_load.telemetry.throttle")
    assert hot["observed"] == "hw_thermal_slowdown, sw_thermal_slowdown"
    assert " SM 1275/1980 MHz 92 C " in hot["message"], hot["message"]
    samples = resolve_evidence(run.run_dir, hot["evidence"][0])
    assert samples["cmd"].startswith("nvidia-smi --query-gpu=timestamp,index,serial")
    assert samples["killed"] is True and "92, 688.4 W" in samples["stdout"]
    brake = next(r for r in rej["gpu005"] if r["check"] == "gpu_load.telemetry.throttle")
    assert brake["observed"] == "hw_power_brake_slowdown" and "power" in brake["remediation"]
    clocks = {n: next(r for r in rej[n] if r["check"] == "gpu_load.telemetry.sm_clock")
              for n in ("gpu004", "gpu005", "gpu009")}  # fmt: skip
    whys = {
        "gpu004": "clock event reasons active: hw_thermal_slowdown, sw_thermal_slowdown",
        "gpu005": "clock event reasons active: hw_power_brake_slowdown",
        "gpu009": "no clock event reason reported",
    }
    for n, why in whys.items():
        c = clocks[n]
        assert c["expected"] == "<= 1 samples below 75 % of clocks.max.sm", c
        # every sample under load is below (the fault holds the clock down for the whole load)
        k = c["observed"]
        assert k >= 2 and f"below 75 % of max in {k} of {k} samples under load: " in c["message"]
        assert c["message"].endswith(f"({why})"), c
    assert " SM 1395/1980 MHz " in clocks["gpu009"]["message"]
    quiet = next(
        r
        for r in run.verdicts["verdicts"]
        if r["node"] == "gpu009" and r["check"] == "gpu_load.telemetry.throttle"
        and GPU3 in r["component"]
    )  # fmt: skip
    assert quiet["status"] == "pass"  # no reason was reported: the throttle check passes it
    power = rej["gpu008"][0]
    assert (power["observed"], power["expected"]) == (498.2, ">= 560")
    assert "did not reach desired power minimum" in power["message"]
    xid = rej["gpu007"][0]
    assert (xid["observed"], xid["expected"]) == (1, "<= 0") and "Xid 13" in xid["message"]
    plan = (run.run_dir / "gpu_load" / "plan-generic-hgx-h100.json").read_text()
    assert '"channels": 45' in plan  # 9 nodes x 5 spawns, one round, all at once


def test_a_node_lost_mid_load_rejects_only_itself(sim_fleet):
    # gpu002's sshd session is killed half a second after its sampler starts: under load.
    fleet = sim_fleet(base_model(4, faults={"gpu002": [{"drop_after": "0.5"}]}))
    try:
        run = fleet.run("-m", MARK)
    finally:
        kill_orphans(fleet, "gpu002")
    assert run.rc == 1, run.stdout
    assert list(run.rejected()) == ["gpu002"]
    assert sorted(run.passed()) == ["gpu001", "gpu003", "gpu004"]
    lost = "connection to gpu002 lost (closed by the other end)"
    got = {
        (r["check"], r["component"], r["status"], r["message"]) for r in run.rejected()["gpu002"]
    }
    checks = [c for c in CHECK_IDS if c != "gpu_load.cleanup"]
    assert got == {(c, "node", "error", lost) for c in checks} | {
        ("gpu_load.cleanup", "GPU load", "error", f"could not check: {lost}")
    }
    for r in run.rejected()["gpu002"]:
        assert r["remediation_class"] == "retest", r


def test_levels_choose_what_runs_and_ab_refuses_to_mix_them(sim_fleet, tmp_path):
    # quick runs nvbandwidth's four copies and no DCGM stress: it rejects h2d_slow and hbm_slow
    # for the same checks on the same GPUs as standard, not the targeted_power fault DCGM r3
    # finds; extended adds r4's pulse_test.
    faults = {
        "gpu002": ["hbm_slow"],
        "gpu003": ["dcgm_targeted_power_fail"],
        "gpu004": ["h2d_slow"],
    }
    fleet = sim_fleet(base_model(4, faults=faults))
    baseline = tmp_path / "quick"
    quick = fleet.run("-m", MARK, "--level", "quick")
    std = fleet.run("-m", MARK)
    ext = fleet.run("-m", MARK, "--level=extended")
    levels = [r.admission["level"] for r in (quick, std, ext)]
    assert levels == ["quick", "standard", "extended"]
    assert sorted(quick.rejected()) == ["gpu002", "gpu004"]
    assert sorted(std.rejected()) == sorted(ext.rejected()) == ["gpu002", "gpu003", "gpu004"]
    assert (
        {n: bad(r) for n, r in quick.rejected().items()}
        == {n: bad(r) for n, r in std.rejected().items() if n != "gpu003"}
        == {
            "gpu002": {("gpu_load.hbm.bandwidth", GPU3)},
            "gpu004": {("gpu_load.h2d.bandwidth", GPU3)},
        }
    )
    for run, dcgm in ((quick, None), (std, "dcgmi diag -r 3"), (ext, "dcgmi diag -r 4")):
        plan = json.loads((run.run_dir / "gpu_load" / "plan-generic-hgx-h100.json").read_text())
        assert (dcgm or "no DCGM stress") in plan["method"], plan["method"]
        assert f"(level {run.admission['level']}; stages: reach, pcie_gpu, gpu_load)" in run.stdout
        page = (run.run_dir / "report.html").read_text()
        assert f" · level <b>{run.admission['level']}</b> · stages reach, pcie_gpu, gpu_load" in (
            page
        )
    pulse = [
        v
        for v in ext.verdicts["verdicts"]
        if v["check"] == "gpu_load.dcgm.pulse_test" and v["node"] == "gpu001"
    ]
    assert len(pulse) == 8 and {(v["status"], v["observed"]) for v in pulse} == {("pass", "Pass")}
    quick_pulse = [
        v for v in quick.verdicts["verdicts"] if v["check"] == "gpu_load.dcgm.pulse_test"
    ]
    assert {(v["status"], v["expected"]) for v in quick_pulse} == {
        ("pass", "not selected by gpu_load.run at this run's level")
    }
    # a complete quick run's baseline (the -m runs here are diagnostic: none is saved)
    baseline.mkdir()
    doc = {
        "schema_version": 1, "kind": "nodegate-baseline", "run_id": "q", "level": "quick",
        "finished_at": "2026-12-01T00:00:01+00:00", "inventory": "x", "transport": "ssh",
        "complete": True, "stages": [], "checks": [],
        "nodes": {"gpu001": {"profile": "generic-hgx-h100", "admitted": True, "checks": {}}},
    }  # fmt: skip
    (baseline / "baseline.json").write_text(json.dumps(doc))
    mixed = fleet.run("-m", MARK, f"--compare-to={baseline}")
    assert mixed.rc == 4
    assert mixed.stdout.strip().endswith(
        f"ERROR: nodegate: --compare-to {baseline}: the baseline ran at --level quick, this run "
        "at --level standard: compare runs of one level (run --level quick, or save a baseline "
        "at --level standard)"
    ), mixed.stdout
    deep = fleet.run("-m", MARK, "--level=deep")
    assert deep.rc == 4 and "--level: got 'deep', expected one of quick, standard, extended" in (
        deep.stdout
    )


def test_replay_rejudges_the_load_from_the_recorded_processes(sim_fleet):
    fleet = sim_fleet(base_model(3, faults={"gpu002": ["h2d_slow"], "gpu003": ["power_brake"]}))
    live = fleet.run("-m", "reach or gpu_load")
    assert sorted(live.rejected()) == ["gpu002", "gpu003"], live.stdout
    fleet.fleet.stop()  # the replay reaches nothing
    replay = fleet.run(
        "-m", "reach or gpu_load", "--transport=replay", f"--replay={live.run_dir / 'raw'}"
    )
    assert replay.rc == 1, replay.stdout
    assert verdict_keys(replay) == verdict_keys(live)
    assert replay.admission["transport"] == "replay"


def verdict_keys(run) -> list[tuple[str, ...]]:
    fields = ("check", "node", "component", "status", "observed", "expected", "message")
    return sorted(tuple(json.dumps(v[f]) for f in fields) for v in run.verdicts["verdicts"])


def test_a_bring_up_profile_admits_only_at_extended(sim_fleet, tmp_path):
    (tmp_path / "bring-up.yaml").write_text(
        "name: bring-up\ndescription: HGX H100 bring-up\nextends: generic-hgx-h100\n"
        "admission: {min_level: extended}\n"
        # a short burn keeps the test lean (the simulated dcgmi takes 1/100 of it)
        "levels: {extended: {gpu_load: {run: {burn_s: 60}}}}\n"
    )
    fleet = sim_fleet(base_model(2))
    args = ("-m", MARK, f"--profiles-dir={tmp_path}", "--profile=bring-up")
    why = (
        "--level standard is below this profile's admission.min_level extended: run --level "
        "extended to admit"
    )
    std, ext = fleet.run(*args), fleet.run(*args, "--level=extended")
    for node in ("gpu001", "gpu002"):
        mine = [r for r in std.admission["nodes"][node]["reasons"] if r["check"] == LEVEL]
        assert [(r["status"], r["message"]) for r in mine] == [("out_of_scope", why)]
        assert std.admission["nodes"][node]["state"] == "not_qualified"
        assert not [r for r in ext.admission["nodes"][node]["reasons"] if r["check"] == LEVEL]
    assert LEVEL in std.admission["out_of_scope"] and LEVEL not in ext.admission["out_of_scope"]
    assert std.admission["policy"]["bring-up"]["min_level"] == "extended"
    assert std.rejected() == ext.rejected() == {}
