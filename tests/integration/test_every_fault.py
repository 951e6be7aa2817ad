"""Every simulated fault kind at once, all stages, over real SSH: every FAIL reason states what
was expected, its terminal line shows observed and expected, and nothing a node prints (a
hostile PRETTY_NAME, garbage output) reaches the terminal unescaped."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ClusterShell.NodeSet import NodeSet
from nodegate.sim.fabric import FAULTS as FABRIC_FAULTS
from nodegate.sim.tools import known_faults
from nodegate.sim.tools.roce import ROCE_FAULTS
from nodegate.sim.tools.traffic import FAULTS as TRAFFIC_FAULTS

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

FAULTS: dict[str, list[Any]] = {
    "gpu002": ["hostkey_changed"],
    "gpu003": ["hostkey_unknown"],
    "gpu004": [{"slow": "1"}],
    "gpu005": [{"garbage": "nvidia-smi"}],
    "gpu006": [{"missing": "lspci"}],
    "gpu007": ["gpu_missing"],
    "gpu008": ["gpu_pcie_x8"],
    "gpu009": ["gpu_pcie_gen4"],
    "gpu010": [{"xid": "79"}],
    "gpu011": ["ecc_dbe"],
    "gpu012": ["remap_pending"],
    "gpu013": ["nvlink_down"],
    "gpu014": ["fabricmanager_stopped"],
    "gpu015": ["hw_slowdown"],
    "gpu016": ["dcgm_fail"],
    "gpu017": ["hca_missing"],
    "gpu018": ["hca_old_firmware"],
    "gpu019": ["hca_port_down"],
    "gpu020": ["hca_port_2x"],
    "gpu021": ["hca_port_hdr"],
    "gpu022": ["hca_symbol_errors"],
    "gpu023": ["hca_pcie_x8"],
    "gpu024": ["peermem_missing"],
    "gpu025": ["hca_high_ber"],
    "gpu026": ["hca_module_fault"],
    "gpu027": ["unreachable"],
    "gpu028": ["auth_refused"],
    "gpu029": [{"hang": "uname"}],
    "gpu030": [{"missing": "ofed_info"}],
    "gpu033": [{"slow_rail": "3"}],
    "gpu034": ["slow_node"],
    "gpu035": ["server_hang"],
    "gpu036": ["client_refused"],
    "gpu037": ["qp_error"],
    "gpu041": [{"bad_link": "leaf06"}],
    "gpu042": [{"garbage": "cat"}],
    "gpu043": ["dcgm_test_fail"],
    "gpu044": [{"sxid": "12028"}],
    "gpu045": ["fallen_off_bus"],
    "gpu046": [{"flood": "uname"}],
    "gpu047": [{"forge": "cat"}],
    "gpu048": [{"drop_after": "0"}],
    "gpu049": [{"hijack": "cat"}, {"hijack_end": "more"}],
    # gpu_load (#28): under load
    "gpu050": ["h2d_slow", {"sm_clock_drop": "5"}],
    "gpu051": ["hbm_slow"],
    "gpu052": ["thermal_throttle_under_load"],
    "gpu053": ["power_brake"],
    "gpu054": [{"xid_under_load": "13"}],
    "gpu055": ["dcgm_targeted_power_fail"],
}
# Erase the line above and paint a fake verdict, set the title, write the clipboard (OSC 52).
HOSTILE = "Rocky 9\x1b[1A\x1b[2Kgpu031 admitted\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07"
OVERRIDES = {
    "gpu031": {"os": {"ID": "rocky", "VERSION_ID": "9.3", "PRETTY_NAME": HOSTILE}},
    "gpu032": {"gpu_model": "h200-sxm-141gb"},
    "gpu038": {"kernel": "5.15.0-91-generic"},
    "gpu039": {"nvidia_driver": "525.147.05"},
    "gpu040": {"ofed": "5.8-1.0.1.1"},
}
FAILING = {
    *("reach.ssh", "reach.os.release", "reach.kernel.uniform", "reach.driver.version"),
    *("reach.driver.uniform", "reach.ofed.version", "reach.ofed.uniform", "gpu.count"),
    *("gpu.model", "gpu.driver", "pcie.gpu.gen", "pcie.gpu.width", "gpu.ecc.uncorrectable"),
    *("gpu.remap", "gpu.xid", "gpu.nvlink", "gpu.fabric", "gpu.clocks", "gpu.dcgm"),
    "gpu.nvswitch",
    *("hca.count", "hca.firmware.version", "hca.firmware.uniform", "hca.port.state"),
    *("hca.port.width", "hca.port.speed", "hca.port.rate", "hca.pcie.width"),
    *("hca.counters.errors", "hca.link.ber", "hca.gpudirect", "ib_pairs.rail.bandwidth"),
    *("gpu_load.h2d.bandwidth", "gpu_load.hbm.bandwidth", "gpu_load.dcgm.targeted_power"),
    *("gpu_load.telemetry.throttle", "gpu_load.telemetry.temperature", "gpu_load.telemetry.xid"),
    "gpu_load.telemetry.sm_clock",
    # The host's HCA faults as the fabric sees them: a missing HCA or a port down has no link
    # partner (and a missing one no partition keys), a port at 2X or HDR is so at the switch.
    *("fabric.cable.expected", "fabric.link", "fabric.pkey"),
}
# A fold's reason line (indented), or a one-reason fold's own line (unindented).
LINE = re.compile(r"^(?:  )?(\S+): (\S+) FAIL \[(.*?)\]: (.*)$")
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def shows(line: str, value: Any) -> bool:
    """`value` is on `line` as itself (an expected 0 is not shown by a PID 18750)."""
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    head = r"(?<![\d.])" if text[:1].isdigit() else ""
    tail = r"(?!\.?\d)" if text[-1:].isdigit() else ""
    return re.search(head + re.escape(text) + tail, line) is not None


def test_every_fail_reason_shows_observed_and_expected(sim_fleet: Any) -> None:
    kinds = {f if isinstance(f, str) else next(iter(f)) for fs in FAULTS.values() for f in fs}
    # A new fault kind is added here too; RoCE faults need a RoCE fleet (test_roce_fleet),
    # slurmd_down a fleet with Slurm (test_sim_slurm, test_admission_slurm); nccl faults are
    # localized in their own fleets (test_nccl_fleet).
    # The nccl stage's fabric faults (spine_slow, leaf_uplink_down) are judged by its matrix,
    # gdr_off (and nccl_socket_fallback) by nccl.transport in the matrix's fleet test.
    nccl = {k for k in known_faults() if k.startswith("nccl_")}
    nccl |= {"spine_slow", "leaf_uplink_down", "gdr_off"}
    # The fabric's faults are judged by the fabric stage's own fleet tests (issue 22).
    fabric = set(FABRIC_FAULTS)
    # The fabric under load's faults are blamed by the traffic stage's fleet tests (issue 23).
    traffic = set(TRAFFIC_FAULTS)
    assert kinds == set(known_faults()) - ROCE_FAULTS - {"slurmd_down"} - nccl - fabric - traffic
    # Every reason line (#14 folds them to one screen by default: --summary-lines).
    run = sim_fleet(base_model(55, faults=FAULTS, overrides=OVERRIDES)).run(
        "--summary-lines=0", timeout=600
    )
    assert run.rc == 1, run.stdout[-3000:]
    assert CONTROL.search(run.stdout) is None
    summary = run.stdout.split("= nodegate admission =")[1].split("\nadmission: ")[0]
    lines: dict[tuple[str, str, str], list[str]] = {}
    for line in summary.splitlines():
        if m := LINE.match(line):
            for node in NodeSet(m[1]):
                lines.setdefault((str(node), m[2], m[3]), []).append(line)
    fails = [
        (node, r)
        for node, d in run.admission["nodes"].items()
        for r in d["reasons"]
        if r["status"] == "fail"
    ]
    # Every check a fault fails, and no other (the stray check sees only this run's processes).
    assert {r["check"] for _, r in fails} == FAILING
    for node, r in fails:
        assert r["expected"] is not None, (node, r)
        found = lines.get((node, r["check"], r["component"]), [])
        ok = [ln for ln in found if shows(ln, r["observed"]) and shows(ln, r["expected"])]
        assert ok, (node, r, found)
    escaped = "Rocky 9\\x1b[1A\\x1b[2Kgpu031 admitted\\x1b]0;owned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07"
    assert lines[("gpu031", "reach.os.release", "os")] == [
        f"gpu031: reach.os.release FAIL [os]: {escaped} "
        "(observed rocky 9.3, expected ID in ['ubuntu'], VERSION_ID in ['22.04', '24.04']) "
        "(fix_config)"  # its remediation class (#13)
    ]
