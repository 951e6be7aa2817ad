"""The pcie_gpu stage end to end over real SSH: one simulated node per fault of issue #3."""

from __future__ import annotations

import pytest
from nodegate.core import schemas
from nodegate.transport.evidence import resolve_evidence

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

GPU3 = "GPU3 0000:5d:00.0 serial "  # the faults' default GPU; serials differ per node

# node -> (fault, check id that must reject it, component prefix it must name)
EXPECT: dict[str, tuple[object, str, str]] = {
    "gpu003": ("gpu_missing", "gpu.count", "GPU module(s) 3 missing"),
    "gpu004": ("gpu_pcie_x8", "pcie.gpu.width", GPU3),
    "gpu005": ("gpu_pcie_gen4", "pcie.gpu.gen", GPU3),
    "gpu006": ({"xid": "79"}, "gpu.xid", GPU3),
    "gpu007": ({"xid": "48@1"}, "gpu.xid", "GPU1 0000:3b:00.0 serial "),
    "gpu008": ({"xid": "94"}, "gpu.xid", GPU3),
    "gpu009": ({"xid": "119"}, "gpu.xid", GPU3),
    "gpu010": ("ecc_dbe", "gpu.ecc.uncorrectable", GPU3),
    "gpu011": ("remap_pending", "gpu.remap", GPU3),
    "gpu012": ("nvlink_down", "gpu.nvlink", GPU3),
    "gpu013": ("fabricmanager_stopped", "gpu.fabric", "nvidia-fabricmanager"),
    "gpu014": ("hw_slowdown", "gpu.clocks", GPU3),
    "gpu015": ("dcgm_fail", "gpu.dcgm", GPU3),
    # issue #9: a test failing by itself, NVSwitch errors, a fall off the bus without Xid
    "gpu016": ("dcgm_test_fail", "gpu.dcgm", "dcgmi diag"),
    "gpu017": ({"sxid": "12028"}, "gpu.nvswitch", "NVSwitch 0000:83:00.0"),
    "gpu018": ("fallen_off_bus", "gpu.xid", GPU3),
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


def test_one_node_per_fault_rejected_for_it(sim_fleet, transport):
    faults = {node: [fault] for node, (fault, _, _) in EXPECT.items()}
    fleet = sim_fleet(base_model(19, faults=faults), transport=transport)
    run = fleet.run("-m", "reach or pcie_gpu")
    assert run.rc == 1, run.stdout
    schemas.validate("admission", run.admission)
    rej = run.rejected()
    assert sorted(rej) == sorted(EXPECT), run.stdout
    assert sorted(run.passed()) == ["gpu001", "gpu002", "gpu019"]  # not qualified (#13)
    for node, (fault, check, comp) in EXPECT.items():
        assert bad(rej[node]) == {(check, comp)}, (node, fault, rej[node])
        reason = rej[node][0]
        assert reason["status"] == "fail" and reason["remediation"], reason
        assert reason["evidence"], reason
    # the reasons say what to do, per the profile's Xid table
    xid79 = rej["gpu006"][0]
    assert xid79["observed"] == "79" and "RMA" in xid79["remediation"]
    assert "reboot" in rej["gpu009"][0]["remediation"]
    assert rej["gpu016"][0]["observed"].startswith("software Fail: There was an internal error")
    assert (rej["gpu017"][0]["observed"], rej["gpu018"][0]["observed"]) == (
        "12028",
        "fallen off the bus",
    )
    width = rej["gpu004"][0]
    assert (width["observed"], width["expected"], width["unit"]) == (8, 16, "lanes")
    assert "lspci LnkSta 8" in width["message"]
    raw = resolve_evidence(run.run_dir, width["evidence"][0])
    assert raw["cmd"] == "nvidia-smi -q" and " : 8x\n" in raw["stdout"]
    # the reach stage is still green on every node
    assert not any(r["check"].startswith("reach.") for rs in rej.values() for r in rs)


def test_nd_h200_v5_fleet_with_h200_gpus(sim_fleet):
    model = base_model(
        3,
        profile="nd-h200-v5",
        faults={"gpu002": [{"gpu_pcie_x8": "6"}], "gpu003": [{"xid": "94@0"}]},
    )
    model["hardware"].update(
        kernel="5.15.0-1073-azure",
        nvidia_driver="550.127.05",
        ofed="24.04-0.7.0.0",
        gpu_model="h200-sxm-141gb",
    )
    run = sim_fleet(model).run("-m", "reach or pcie_gpu")
    assert run.rc == 1, run.stdout
    rej = run.rejected()
    assert sorted(rej) == ["gpu002", "gpu003"], run.stdout
    assert bad(rej["gpu002"]) == {("pcie.gpu.width", "GPU6 0000:cb:00.0 serial ")}
    assert bad(rej["gpu003"]) == {("gpu.xid", "GPU0 0000:19:00.0 serial ")}
    assert "reset" in rej["gpu003"][0]["remediation"]


def test_xdist_and_replay_give_the_same_verdicts(sim_fleet):
    fleet = sim_fleet(
        base_model(4, faults={"gpu002": [{"gpu_pcie_x8": "1"}], "gpu003": [{"xid": "79"}]})
    )
    sel = ("-m", "reach or pcie_gpu")
    live = fleet.run(*sel)
    parallel = fleet.run(*sel, "-n", "2")
    fleet.fleet.stop()
    replay = fleet.run(*sel, "--transport", "replay", "--replay", str(live.run_dir / "raw"))

    def key(run):
        return sorted(
            (v["check"], v["node"], v["status"], v["message"]) for v in run.verdicts["verdicts"]
        )

    assert live.rc == parallel.rc == replay.rc == 1
    assert live.rejected().keys() == {"gpu002", "gpu003"}
    assert key(live) == key(parallel) == key(replay)
