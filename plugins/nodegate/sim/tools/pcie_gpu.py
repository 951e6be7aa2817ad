"""Simulated tools of the `pcie_gpu` stage: nvidia-smi, lspci, journalctl, systemctl, dcgmi.

Hardware keys (fleet model `hardware:` / `overrides:`):
  gpu_model      `h100-sxm5-80gb` (default: HGX H100 8-GPU, 4 NVSwitch), `h200-sxm-141gb`
                 (the same board with the H200 capture's GPU block), anything else: no GPU
  nvidia_driver  shared with the reach stage; printed by nvidia-smi and dcgmi
Faults take an optional GPU index (default 3), e.g. `{gpu_pcie_x8: 5}`; `xid` takes the code,
optionally `CODE@GPU` (`{xid: "79@2"}`); `sxid` the NVSwitch code, optionally `CODE:fatal`.
"""

from __future__ import annotations

from collections.abc import Iterable

from nodegate.sim.model import SimNode
from nodegate.sim.tools import Provider, Response, SimTool
from nodegate.sim.tools import gpu_render as r

DEFAULT_GPU = 3

FAULTS = {
    "gpu_missing": "GPU ARG (default 3) is gone: absent from nvidia-smi, lspci, nvlink and dcgmi",
    "gpu_pcie_x8": "GPU ARG (default 3) trained at x8 (nvidia-smi and lspci LnkSta)",
    "gpu_pcie_gen4": "GPU ARG (default 3) trained at Gen4 16GT/s on a Gen5 board",
    "xid": "kernel log holds Xid ARG (`79`, or `79@GPU`; default GPU 3) within the window",
    "ecc_dbe": "GPU ARG (default 3) has 1 volatile uncorrectable (DRAM) ECC error",
    "remap_pending": "GPU ARG (default 3) has a row remap pending (uncorrectable 1, Pending Yes)",
    "nvlink_down": "GPU ARG (default 3) has NVLink 5 inactive",
    "fabricmanager_stopped": "nvidia-fabricmanager is inactive (dead)",
    "hw_slowdown": "GPU ARG (default 3) reports HW Slowdown and HW Thermal Slowdown active",
    "dcgm_fail": "dcgmi diag reports GPU ARG (default 3) Fail in the level's last test",
    "dcgm_test_fail": "dcgmi diag fails the level's last test itself (an internal error) while "
    "every GPU row says Pass; exits 226",
    "sxid": "kernel log holds NVSwitch SXid ARG (`12028`, `20034:fatal`; default non-fatal) on "
    "NVSwitch 0000:83:00.0 within the window; the running fabric manager reports it too",
    "fallen_off_bus": "kernel log says GPU ARG (default 3) fell off the bus, with no Xid",
}
# Faults of the whole node, not of one GPU.
NODE_FAULTS = ("fabricmanager_stopped", "dcgm_test_fail", "sxid")


def _gpu_arg(arg: str | None) -> int:
    return int(arg) if arg and arg.isdigit() else DEFAULT_GPU


def node_gpus(node: SimNode) -> list[r.SimGpu]:
    """The node's GPUs with its faults applied."""
    gpus = r.base_gpus(node.index)
    for f in node.faults:
        if f.kind == "xid":
            code, _, at = (f.arg or "79").partition("@")
            gpus[_gpu_arg(at or None) % len(gpus)].xids.append(int(code))
            continue
        if f.kind not in FAULTS or f.kind in NODE_FAULTS:
            continue
        g = gpus[_gpu_arg(f.arg) % len(gpus)]
        if f.kind == "gpu_missing":
            g.missing = True
        elif f.kind == "gpu_pcie_x8":
            g.width_lanes = 8
        elif f.kind == "gpu_pcie_gen4":
            g.gen = 4
        elif f.kind == "ecc_dbe":
            g.ecc_dbe = 1
        elif f.kind == "remap_pending":
            g.remap_pending = True
        elif f.kind == "nvlink_down":
            g.nvlink_down = (5,)
        elif f.kind == "hw_slowdown":
            g.hw_slowdown = True
        elif f.kind == "dcgm_fail":
            g.dcgm_fail = True
        elif f.kind == "fallen_off_bus":
            g.fallen_off_bus = True
    return gpus


def node_sxids(node: SimNode) -> list[tuple[int, bool]]:
    """(code, fatal) of every `sxid` fault of the node."""
    out = []
    for f in node.faults:
        if f.kind == "sxid":
            code, _, sev = (f.arg or "12028").partition(":")
            out.append((int(code), sev == "fatal"))
    return out


def tools(node: SimNode) -> Iterable[SimTool]:
    model = str(node.hw.get("gpu_model", "h100-sxm5-80gb"))
    driver = str(node.hw.get("nvidia_driver", r.TEMPLATE_DRIVER))
    if model not in r.MODELS:
        # What nvidia-smi says on a node without a usable GPU (exit 6: no devices).
        none = Response("No devices were found\n", rc=6)
        yield SimTool("nvidia-smi", {}, fallback=none)
        return
    gm = r.MODELS[model]
    gpus = node_gpus(node)
    nvsmi = r.nvsmi_q(gpus, driver, gm)
    product = next(
        ln.split(" : ", 1)[1].strip()
        for ln in nvsmi.splitlines()
        if ln.strip().startswith("Product Name")
    )
    yield SimTool(
        "nvidia-smi",
        {
            "-q": Response(nvsmi),
            "nvlink -s": Response(r.nvlink_s(gpus, product)),
        },
    )
    yield SimTool("lspci", {"-vvv": Response(r.lspci_vvv(gpus, gm.device_id))})
    # Any `journalctl -k ...` window: the simulated log holds only what the faults put there.
    sxids = node_sxids(node)
    klog = r.journal_kernel(node.name, gpus, driver, sxids)
    yield SimTool("journalctl", {}, fallback=Response(klog))
    running = node.fault("fabricmanager_stopped") is None
    yield SimTool(
        "systemctl",
        {
            "status nvidia-fabricmanager --no-pager": Response(
                r.fm_status(running, sxids), rc=0 if running else 3
            )
        },
    )
    test_fail = node.fault("dcgm_test_fail") is not None
    failed = test_fail or any(g.dcgm_fail and not g.missing for g in gpus)
    yield SimTool(
        "dcgmi",
        {
            # dcgmi exits 226 when a test fails (corpus: the GB10 capture's run).
            f"diag -r {lvl} -j": Response(
                r.dcgm_diag_json(gpus, lvl, driver, gm.device_id, test_fail=test_fail),
                rc=226 if failed else 0,
            )
            for lvl in r.DCGM_TESTS
        },
    )


PROVIDER = Provider(name="pcie_gpu", tools=tools, faults=FAULTS)
