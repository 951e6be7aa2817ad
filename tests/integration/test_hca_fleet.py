"""The hca stage end to end over real SSH: one simulated node per HCA fault of issue #4."""

from __future__ import annotations

import pytest
from nodegate.transport.evidence import resolve_evidence

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

# node -> (fault, the check that must fail, its component, observed, expected)
FAULTS = {
    "gpu002": ({"hca_missing": "mlx5_3"}, "hca.count", "compute rails", 7, 8),
    "gpu003": (
        {"hca_old_firmware": "mlx5_5"},
        "hca.firmware.version",
        "mlx5_5 (rail 5)",
        "28.37.1014",
        ">= 28.39.1002",
    ),
    "gpu004": (
        {"hca_port_down": "mlx5_4"},
        "hca.port.state",
        "mlx5_4 port 1 (rail 4)",
        "DOWN/Polling",
        "ACTIVE/LinkUp",
    ),
    "gpu005": ({"hca_port_2x": "mlx5_6"}, "hca.port.width", "mlx5_6 port 1 (rail 6)", "2X", "4X"),
    "gpu006": (
        {"hca_port_hdr": "mlx5_1"},
        "hca.port.speed",
        "mlx5_1 port 1 (rail 1)",
        "HDR",
        "NDR",
    ),
    "gpu007": (
        {"hca_symbol_errors": "mlx5_7"},
        "hca.counters.errors",
        "mlx5_7 port 1 (rail 7)",
        "symbol_error +66",
        "symbol_error <= +0",
    ),
    "gpu008": ({"hca_pcie_x8": "mlx5_2"}, "hca.pcie.width", "mlx5_2 (rail 2)", "x8", "x16"),
    "gpu009": (
        "peermem_missing",
        "hca.gpudirect",
        "GPUDirect RDMA",
        "nvidia_peermem not loaded, no DMA-BUF (needs the open kernel module)",
        "nvidia_peermem loaded or DMA-BUF support",
    ),
    "gpu010": (
        {"hca_high_ber": "mlx5_0"},
        "hca.link.ber",
        "mlx5_0 port 1 (rail 0)",
        "effective BER 2e-11; raw BER 0.0003",
        "effective BER <= 1e-12, raw BER <= 1e-05, no module fault flag",
    ),
    "gpu011": (
        {"hca_module_fault": "mlx5_3"},
        "hca.link.ber",
        "mlx5_3 port 1 (rail 3)",
        "Rx LOS [per lane] on lane 2",
        "effective BER <= 1e-12, raw BER <= 1e-05, no module fault flag",
    ),
}
# Other checks each fault drags along (the same part, seen from another angle).
ALSO = {
    "gpu002": {
        "hca.port.state", "hca.port.width", "hca.port.speed", "hca.port.rate",
        "hca.port.link_layer", "hca.counters.errors", "hca.rail.affinity", "hca.link.ber",
    },
    "gpu003": {"hca.firmware.uniform"},
    "gpu004": {"hca.port.width", "hca.port.speed", "hca.port.rate"},
    "gpu005": {"hca.port.rate"},
    "gpu006": {"hca.port.rate"},
}  # fmt: skip


def bad(reasons):
    return {r["check"] for r in reasons if r["status"] in ("fail", "error")}


def test_one_node_per_hca_fault_rejected_healthy_admitted(sim_fleet, transport):
    model = base_model(12, faults={n: [spec[0]] for n, spec in FAULTS.items()})
    fleet = sim_fleet(model, transport=transport)
    run = fleet.run("-m", "reach or hca")
    assert run.rc == 1, run.stdout
    rej = run.rejected()
    assert sorted(rej) == sorted(FAULTS), run.stdout
    assert run.passed() == ["gpu001", "gpu012"]  # -m: not qualified, not rejected (#13)
    for node, (_, check, component, observed, expected) in FAULTS.items():
        reasons = rej[node]
        assert bad(reasons) == {check} | ALSO.get(node, set()), (node, reasons)
        assert not any(r["check"].startswith("reach.") for r in reasons)  # reach still green
        r = next(r for r in reasons if r["check"] == check and r["status"] == "fail")
        assert (r["component"], r["observed"], r["expected"]) == (
            component,
            observed,
            expected,
        ), r
        assert r["remediation"] and r["evidence"]
    # the missing HCA is named, and the ports it drags along are not judged (ERROR, not PASS)
    count = next(r for r in rej["gpu002"] if r["check"] == "hca.count")
    assert "missing mlx5_3 (rail 3)" in count["message"]
    state = next(r for r in rej["gpu002"] if r["check"] == "hca.port.state")
    assert state["status"] == "error" and state["component"] == "mlx5_3 (rail 3)"
    # fleet firmware histogram in the uniformity message
    uni = next(r for r in rej["gpu003"] if r["check"] == "hca.firmware.uniform")
    assert uni["message"] == (
        "mlx5_5 firmware 28.37.1014 differs (fleet runs 28.41.1000); "
        "fleet PSID MT_0000000838: 28.41.1000 x94, 28.37.1014 x1"
    )
    # counters were read twice in one session, the window from the profile in between
    sym = next(r for r in rej["gpu007"] if r["check"] == "hca.counters.errors")
    assert sym["evidence"] == ["raw/gpu007/hca.json#ib_sysfs", "raw/gpu007/hca.json#ib_sysfs_again"]
    first, again = (resolve_evidence(run.run_dir, e) for e in sym["evidence"])
    assert "mlx5_7/ports/1/counters/symbol_error:1021" in first["stdout"]
    assert "mlx5_7/ports/1/counters/symbol_error:1087" in again["stdout"]
    # healthy nodes pass every hca check; absolute counters only warn
    passes = [
        v
        for v in run.verdicts["verdicts"]
        if v["node"] == "gpu001" and v["check"] == "hca.counters.errors"
    ]
    assert passes and all(v["status"] == "pass" for v in passes)
    assert "warning, absolute values (not judged): " in passes[0]["message"]
    # one SSH connection per node for both stages; Slurm opens none
    assert run.verdicts["connections"] == (12 if transport == "ssh" else 0)


def test_hca_tool_faults_fail_closed_and_xdist_same_verdicts(sim_fleet, transport):
    fleet = sim_fleet(
        base_model(
            4,
            faults={
                "gpu002": [{"missing": "grep"}],
                "gpu003": [{"garbage": "nvidia-smi"}],
                "gpu004": [{"garbage": "grep"}],
            },
        ),
        transport=transport,
    )
    serial = fleet.run("-m", "hca")
    parallel = fleet.run("-m", "hca", "-n", "2")

    def key(run):
        return sorted(
            (v["check"], v["node"], v["component"], v["status"], v["message"])
            for v in run.verdicts["verdicts"]
        )

    assert key(serial) == key(parallel)
    rej = serial.rejected()
    assert sorted(rej) == ["gpu002", "gpu003", "gpu004"]
    missing = {r["check"]: r for r in rej["gpu002"]}
    assert missing["hca.count"]["status"] == "error"
    assert "hca.gpudirect" not in missing  # judged from other commands
    topo = {r["check"]: r for r in rej["gpu003"]}
    assert set(topo) == {"hca.rail.affinity"}
    assert "unrecognized output" in topo["hca.rail.affinity"]["message"]
    garbage = {r["check"]: r for r in rej["gpu004"]}
    assert garbage["hca.count"]["status"] == "error"
    assert "unrecognized output" in garbage["hca.count"]["message"]
