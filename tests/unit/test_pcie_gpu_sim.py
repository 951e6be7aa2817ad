"""Simulated pcie_gpu tools: outputs are the real captures with values substituted, nothing else."""

from __future__ import annotations

import difflib
import json

from nodegate.parsers.lspci import parse_lspci
from nodegate.parsers.nvsmi_text import parse_nvsmi_text
from nodegate.sim.fleet_model import Fault, SimNode
from nodegate.sim.tools import gpu_render as r
from nodegate.sim.tools import pcie_gpu as sim


def changed(a: str, b: str) -> list[str]:
    return [ln for ln in difflib.ndiff(a.splitlines(), b.splitlines()) if ln[:1] in "+-"]


def test_healthy_nvidia_smi_differs_from_the_capture_only_in_substituted_values():
    gpus = r.base_gpus(0)
    out = r.nvsmi_q(gpus, r.TEMPLATE_DRIVER)
    diff = changed(r.template(r.NVSMI_Q), out)
    # per GPU: HW Slowdown and HW Power Brake turned off (the capture had them asserted)
    assert len(diff) == 2 * 8 * 2
    assert {d.split(":")[0].strip("+- ") for d in diff} == {
        "HW Slowdown",
        "HW Power Brake Slowdown",
    }


def test_fault_substitutions_keep_the_layout():
    node = SimNode("n", 1, "127.0.0.1", {}, {}, (Fault("gpu_pcie_x8", "2"), Fault("ecc_dbe", "2")))
    gpus = sim.node_gpus(node)
    text = r.nvsmi_q(gpus, "550.90.07")
    rep = parse_nvsmi_text(text)
    g = rep.gpus[2]
    assert rep.driver_version == "550.90.07"
    assert g.pcie is not None and g.pcie.width_current_lanes == 8
    assert g.ecc is not None and g.ecc.volatile is not None and g.ecc.volatile.uncorrectable == 1
    assert g.serial == str(int(r.base_gpus(0)[2].serial) + 100_000)
    lspci = parse_lspci(r.lspci_vvv(gpus))
    dev = next(d for d in lspci.devices if d.bdf == g.pci_bus_id)
    assert dev.link_status is not None and dev.link_status.width_status == "downgraded"
    assert len(changed(r.template(r.LSPCI_VVV), r.lspci_vvv(gpus))) == 2


def test_dcgm_json_has_the_captured_layout():
    text = r.template(
        "dcgmi-diag-r1-j__gb10-dgx-spark-dcgm4.2.3-driver580.82.09-software-fail-persistence.json"
    )

    assert r.styled_json(json.loads(text)) == text


def test_h200_blocks_are_the_capture_moved_to_the_board_bus_ids():
    model = r.MODELS["h200-sxm-141gb"]
    text = r.nvsmi_q(r.base_gpus(0), model.driver, model)
    rep = parse_nvsmi_text(text)
    assert [g.pci_vendor_device for g in rep.gpus] == ["10de:2335"] * 8
    assert [g.module_id for g in rep.gpus] == list(range(1, 9))
    assert rep.gpus[5].pci_bus_id == "0000:bb:00.0"
    block = text.split("\nGPU ")[6]
    capture = r.template(model.nvsmi).split("\nGPU ")[1]
    # header, bus id, bus, minor number, serial, UUID, module id
    assert len(changed(capture, block)) == 2 * 7
