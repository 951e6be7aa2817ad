"""Render simulated GPU tool outputs from real captures (sim/data), substituting values only."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

NVSMI_Q = "nvidia-smi-q__h100-80gb-hbm3-8gpu-driver535.161.08-fabric-completed.txt"
LSPCI_VVV = "lspci-vvv__hgx-h100-8gpu-dell-pex890xx-gpu-and-nvswitch-paths.txt"
NVLINK_S = "nvidia-smi-nvlink-s__h100-80gb-hbm3-18links-driver590.48.01.txt"
FM_STATUS = "systemctl-status-nvidia-fabricmanager__h100-8gpu-vm-rhel-ai-nvswitch-devices-path.txt"
TEMPLATE_DRIVER = "535.161.08"
_GPU_SPLIT = re.compile(r"\n(?=GPU [0-9A-F]{8}:)")
_PCI_SPLIT = re.compile(r"\n(?=[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] )")


@dataclass(frozen=True, slots=True)
class GpuModel:
    """A simulated GPU model: its `nvidia-smi -q` capture and what the capture printed."""

    device_id: str  # PCI device id (lspci `Device 2330`, dcgmi `device_id`)
    nvsmi: str  # template file
    driver: str  # driver version printed in the capture
    single: bool  # a 1-GPU capture: its block is repeated at the HGX board's bus ids


MODELS = {
    "h100-sxm5-80gb": GpuModel("2330", NVSMI_Q, TEMPLATE_DRIVER, single=False),
    "h200-sxm-141gb": GpuModel(
        "2335", "nvidia-smi-q__h200-1gpu-driver590.48.01.txt", "590.48.01", single=True
    ),
}


@lru_cache(maxsize=8)
def template(name: str) -> str:
    """A template file shipped in nodegate/sim/data."""
    return (
        resources.files("nodegate")
        .joinpath("sim")
        .joinpath("data")
        .joinpath(name)
        .read_text("utf-8")
    )


@dataclass
class SimGpu:
    """One simulated GPU: identity from the template, state from the node's faults."""

    index: int
    bus_id: str  # `00000000:19:00.0` as nvidia-smi prints it
    serial: str
    uuid: str
    missing: bool = False
    width_lanes: int = 16
    gen: int = 5
    ecc_dbe: int = 0
    remap_pending: bool = False
    hw_slowdown: bool = False
    nvlink_down: tuple[int, ...] = ()
    dcgm_fail: bool = False
    fallen_off_bus: bool = False
    xids: list[int] = field(default_factory=list)
    old_xids: dict[int, int] = field(default_factory=dict)  # index in xids -> hours before build

    @property
    def bdf(self) -> str:
        """`0000:19:00.0` (lspci -D form)."""
        return self.bus_id[4:].lower()


def nvsmi_blocks(model: GpuModel) -> tuple[str, list[str]]:
    """(header, per-GPU blocks) of a model's `nvidia-smi -q` capture."""
    parts = _GPU_SPLIT.split(template(model.nvsmi))
    return parts[0], parts[1:]


def base_gpus(node_index: int, model: GpuModel | None = None) -> list[SimGpu]:
    """The HGX board's 8 GPUs (bus ids, serials, UUIDs of the H100 capture); serials shifted
    per node so every node's GPUs are distinct. Masked 1-GPU captures get the same ids."""
    out = []
    for i, block in enumerate(nvsmi_blocks(MODELS["h100-sxm5-80gb"])[1]):
        bus = block.split("\n", 1)[0].removeprefix("GPU ").strip()
        serial = _value(block, ("Serial Number",))
        uuid = _value(block, ("GPU UUID",))
        out.append(SimGpu(i, bus, str(int(serial) + node_index * 100_000), uuid))
    return out


def _value(block: str, path: Sequence[str]) -> str:
    for line in block.splitlines():
        key, sep, val = line.partition(" : ")
        if sep and key.strip() == path[-1]:
            return val.strip()
    raise KeyError(path)


def set_value(block: str, path: Sequence[str], value: str, *, nth: int = 0) -> str:
    """Replace the value of the `Label : value` line at the indented `path` (keeps alignment)."""
    lines = block.split("\n")
    stack: list[tuple[int, str]] = []
    seen = 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        label = line.split(" : ", 1)[0].strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, label))
        if [s[1] for s in stack[-len(path) :]] == list(path) and " : " in line:
            if seen == nth:
                lines[i] = line.split(" : ", 1)[0] + " : " + value
                return "\n".join(lines)
            seen += 1
    raise KeyError(f"{'/'.join(path)} not in template block")


def nvsmi_q(gpus: Sequence[SimGpu], driver: str, model: GpuModel | None = None) -> str:
    """`nvidia-smi -q` for the node's GPUs (a missing GPU is not listed)."""
    model = model or MODELS["h100-sxm5-80gb"]
    header, blocks = nvsmi_blocks(model)
    present = [g for g in gpus if not g.missing]
    header = header.replace(model.driver, driver)
    header = set_value(header, ("Attached GPUs",), str(len(present)))
    out = [header]
    for g in present:
        b = (blocks[0] if model.single else blocks[g.index]).replace(model.driver, driver)
        if model.single:
            b = _move(b, g)
        b = set_value(b, ("Serial Number",), g.serial)
        b = set_value(b, ("Link Width", "Current"), f"{g.width_lanes}x")
        b = set_value(b, ("PCIe Generation", "Current"), str(g.gen))
        b = set_value(b, ("PCIe Generation", "Device Current"), str(g.gen))
        # The H100 capture's GPUs all had power brake asserted; a healthy node has none.
        slow = "Active" if g.hw_slowdown else "Not Active"
        b = set_value(b, ("Clocks Event Reasons", "HW Slowdown"), slow)
        b = set_value(b, ("HW Slowdown", "HW Thermal Slowdown"), slow)
        b = set_value(b, ("HW Slowdown", "HW Power Brake Slowdown"), "Not Active")
        if g.ecc_dbe:
            b = set_value(b, ("Volatile", "DRAM Uncorrectable"), str(g.ecc_dbe))
            b = set_value(b, ("Aggregate", "DRAM Uncorrectable"), str(g.ecc_dbe))
        if g.remap_pending:
            # As after an Xid 48/63 (corpus: nvidia-smi-q-d-ecc-row-remapper__...-pending-yes).
            b = set_value(b, ("Remapped Rows", "Uncorrectable Error"), "1")
            b = set_value(b, ("Remapped Rows", "Pending"), "Yes")
            b = set_value(b, ("Bank Remap Availability Histogram", "Max"), "2559 bank(s)")
            b = set_value(b, ("Bank Remap Availability Histogram", "High"), "1 bank(s)")
        out.append(b)
    return "\n".join(out)


def _move(block: str, g: SimGpu) -> str:
    """A 1-GPU capture's block placed at GPU `g`'s bus id, minor number, UUID and module."""
    first, rest = block.split("\n", 1)
    rest = set_value(rest, ("PCI", "Bus Id"), g.bus_id)
    rest = set_value(rest, ("PCI", "Bus"), "0x" + g.bus_id[9:11])
    rest = set_value(rest, ("Minor Number",), str(g.index))
    rest = set_value(rest, ("GPU UUID",), g.uuid)
    rest = set_value(rest, ("Platform Info", "Module Id"), str(g.index + 1))
    return f"GPU {g.bus_id}\n{rest}"


def lspci_vvv(gpus: Sequence[SimGpu], device_id: str = "2330") -> str:
    """`lspci -vvv` (GPU, NVSwitch and bridge blocks); LnkSta follows the GPU's link."""
    by_bus = {g.bdf[5:]: g for g in gpus}
    out = []
    for block in _PCI_SPLIT.split(template(LSPCI_VVV)):
        g = by_bus.get(block[:7])
        if g is not None and g.missing:
            continue  # not enumerated
        if g is not None and device_id != "2330":
            block = block.replace(
                "NVIDIA Corporation Device 2330", f"NVIDIA Corporation Device {device_id}"
            )
        if g is not None and (g.width_lanes != 16 or g.gen != 5):
            speed = {5: "32GT/s (ok)", 4: "16GT/s (downgraded)", 3: "8GT/s (downgraded)"}[g.gen]
            width = "x16 (ok)" if g.width_lanes == 16 else f"x{g.width_lanes} (downgraded)"
            block = block.replace(
                "LnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)",
                f"LnkSta:\tSpeed {speed}, Width {width}",
            )
        out.append(block)
    # lspci -v.. ends every block, the last one included, with an empty line.
    return "\n".join(out).rstrip("\n") + "\n\n"


def nvlink_s(gpus: Sequence[SimGpu], name: str | None = None) -> str:
    """`nvidia-smi nvlink -s`: the 18-link capture's block for every present GPU."""
    head, *links = template(NVLINK_S).rstrip("\n").split("\n")
    name = name or head.split(": ", 1)[1].split(" (UUID")[0]
    out = []
    for n, g in enumerate(x for x in gpus if not x.missing):
        out.append(f"GPU {n}: {name} (UUID: {g.uuid})")
        for i, line in enumerate(links):
            out.append(f"\t Link {i}: <inactive>" if i in g.nvlink_down else line)
    return "\n".join(out) + "\n"


# Message texts after `NVRM: Xid (PCI:<bdf>): <code>, ` as captured (corpus kernel logs); 79 as
# NVIDIA's catalogue words it (no capture of a 79 line in the corpus).
XID_TEXT = {
    48: "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been "
    "detected on GPU in the framebuffer at physAddr 0x12bac1c3e0 partition 2, subpartition 1.",
    63: "pid='<unknown>', name=<unknown>, Row Remapper: New row (0x00000012bac1c3e0) marked for "
    "remapping, reset gpu to activate.",
    79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    94: "pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No",
    119: "pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU4 "
    "GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
    13: "pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): "
    "Out Of Range Address",
}


# The NVSwitch a simulated SXid names: the first of the HGX board (lspci capture, 83:00.0), port
# 34 as in the corpus fabric manager log's 12028 lines.
SXID_SWITCH = ("nvidia-nvswitch0", "0000:83:00.0", 0, 34)
SXID_TEXT = {22013: "Minion Link DLREQ interrupt", 12028: "egress non-posted PRIV error"}
# corpus dmesg__fallen-off-bus-at-probe-no-xid-...: a fall the driver reports without an Xid.
FALLEN_TEXT = (
    "NVRM: The NVIDIA GPU {bdf}",
    "NVRM: (PCI ID: 10de:2330) installed in this system has",
    "NVRM: fallen off the bus and is not responding to commands.",
)


# When the kernel log's records were written, before the fleet was built: the driver loaded at
# boot, the faults' records a few minutes later (a fleet is used within the day it is built;
# a record older than the stage's window, `xid: 79~48h`, is not shown by `--since -24h`).
BOOT_AGE_S = 600
FAULT_AGE_S = 300


# Kernel records logged at run time (by a simulated tool: an Xid under load), read by the
# journalctl window with the build-time records; one `EPOCH line` per record.
RUNTIME_JOURNAL = "/var/log/ngsim-kernel-runtime.journal"


def journal_records(
    host: str,
    gpus: Sequence[SimGpu],
    driver: str,
    sxids: Sequence[tuple[int, bool]] = (),
    built_at: int = 1764576000,
) -> list[tuple[int, str]]:
    """`journalctl -k -o short-iso`'s lines with the time of each (epoch seconds): driver
    banner, each GPU's Xids and falls, NVSwitch SXids; a record's continuation lines share its
    time."""

    def stamp(at: int) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(at))
        return f"{when} {host} kernel: "

    boot = built_at - BOOT_AGE_S
    out = [(boot, stamp(boot) + f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {driver}  "
            "Tue Mar  5 22:13:07 UTC 2024")]  # fmt: skip
    n = 0

    def at(hours_old: int = 0) -> int:
        nonlocal n
        n += 1
        return built_at - FAULT_AGE_S + n - hours_old * 3600

    for g in gpus:
        for i, code in enumerate(g.xids):
            t = at(g.old_xids.get(i, 0))
            text = XID_TEXT.get(code, "pid='<unknown>', name=<unknown>, ")
            out.append((t, stamp(t) + f"NVRM: Xid (PCI:{g.bdf[:-2]}): {code}, {text}"))
        if g.fallen_off_bus:  # one record; journalctl indents its other lines to the text
            t = at()
            head = stamp(t)
            first, *rest = (line.format(bdf=g.bdf) for line in FALLEN_TEXT)
            out += [(t, head + first), *((t, " " * len(head) + line) for line in rest)]
    dev, bdf, _, port = SXID_SWITCH
    for code, fatal in sxids:
        t = at()
        head = stamp(t) + f"{dev}: SXid (PCI:{bdf}): {code}, "
        text = SXID_TEXT.get(code, "NVSwitch error")
        out += [
            (t, head + f"{'Fatal' if fatal else 'Non-fatal'}, Link {port} {text}"),
            (t, head + f"Severity {int(fatal)} Engine instance {port} Sub-engine instance 00"),
            (t, head + "Data {0x00000022, 0x00000022, 0x00000000, 0x00000022, 0x80000302, "
             "0x00000000, 0x00000000, 0x00000000, 0x00000000}"),
        ]  # fmt: skip
    out.sort(key=lambda r: r[0])  # the journal is in time order
    return out


def journal_kernel(
    host: str,
    gpus: Sequence[SimGpu],
    driver: str,
    sxids: Sequence[tuple[int, bool]] = (),
    built_at: int = 1764576000,
) -> str:
    """`journalctl -k -o short-iso` over the whole journal (no `--since`)."""
    return "".join(line + "\n" for _, line in journal_records(host, gpus, driver, sxids, built_at))


def fm_status(running: bool, sxids: Sequence[tuple[int, bool]] = ()) -> str:
    """`systemctl status nvidia-fabricmanager`: the capture, or the same unit stopped; a running
    one appends the NVSwitch errors it detected to its journal (corpus: the 22013 capture)."""
    text = template(FM_STATUS)
    if running:
        _, bdf, phys, port = SXID_SWITCH
        return text + "".join(
            f"Mar 25 02:11:40 rhelai-02.redhat.lab nv-fabricmanager[2116]: detected NVSwitch "
            f"{'fatal' if fatal else 'non-fatal'} error {code} on fid 0 on NVSwitch pci bus id "
            f"0000{bdf} physical id {phys} port {port}\n"
            for code, fatal in sxids
        )
    keep = []
    for line in text.split("\n"):
        key = line.strip().split(":", 1)[0]
        if key in {"Tasks", "Memory", "CGroup"} or line.startswith("             └─"):
            continue
        if key == "Active":
            line = "     Active: inactive (dead) since Tue 2025-03-25 04:47:15 UTC; 3s ago"
        elif key == "Main PID":
            line = "   Main PID: 2116 (code=exited, status=0/SUCCESS)"
        keep.append(line)
    body = "\n".join(keep).rstrip("\n").replace("● nvidia-fabricmanager", "○ nvidia-fabricmanager")
    host = "rhelai-02.redhat.lab"
    return (
        body
        + "\n"
        + "\n".join(
            [
                f"Mar 25 04:47:15 {host} systemd[1]: Stopping NVIDIA fabric manager service...",
                f"Mar 25 04:47:15 {host} systemd[1]: nvidia-fabricmanager.service: Deactivated "
                "successfully.",
                f"Mar 25 04:47:15 {host} systemd[1]: Stopped NVIDIA fabric manager service.",
            ]
        )
        + "\n"
    )


# Tests per diag level, named as DCGM 4.x reports them.
DCGM_TESTS: Mapping[int, tuple[tuple[str, str], ...]] = {
    1: (("Deployment", "software"),),
    2: (("Deployment", "software"), ("Integration", "pcie"), ("Hardware", "memory")),
    3: (
        ("Deployment", "software"),
        ("Integration", "pcie"),
        ("Hardware", "memory"),
        ("Hardware", "diagnostic"),
        ("Stress", "targeted_stress"),
        ("Stress", "targeted_power"),
    ),
}
# DCGM's wording for a failed GPU memory test (DCGM error catalogue, DCGM_FR_FAULTY_MEMORY).
DCGM_FAIL_TEXT = "Found 1 faulty memory elements on GPU {gpu}."
# A test that failed by itself (DCGM_FR_INTERNAL, id 44, category 16 in dcgm_errors.h), worded
# as in NVIDIA/DCGM#254, where the pcie test failed so while no GPU did.
DCGM_INTERNAL = {"error_category": 16, "error_id": 44, "error_severity": 4, "warning": (
    "There was an internal error during the test: 'A child process (2378806) exited with non-zero "
    "status 1' Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
)}  # fmt: skip


def dcgm_diag_json(
    gpus: Sequence[SimGpu], level: int, driver: str, device_id: str, *, test_fail: bool = False
) -> str:
    """`dcgmi diag -r LEVEL -j` in DCGM 4.x layout (the GB10 capture's shape); `test_fail`: the
    level's last test fails by itself, every GPU row Pass."""
    present = [g for g in gpus if not g.missing]
    categories: dict[str, list[object]] = {}
    for cat, test in DCGM_TESTS[level]:
        results = []
        fail_here = test == DCGM_TESTS[level][-1][1]
        for n, g in enumerate(present):
            res: dict[str, object] = {
                "entity_group": "GPU",
                "entity_group_id": 1,
                "entity_id": n,
                "status": "Fail" if (g.dcgm_fail and fail_here) else "Pass",
            }
            if g.dcgm_fail and fail_here:
                res["warnings"] = [
                    {
                        "error_category": 3,
                        "error_id": 84,
                        "error_severity": 5,
                        "warning": DCGM_FAIL_TEXT.format(gpu=n),
                    }
                ]
            results.append(res)
        status = "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"
        summary: dict[str, object] = {"status": status}
        if test_fail and fail_here:
            summary = {"status": "Fail", "warnings": [DCGM_INTERNAL]}
        categories.setdefault(cat, []).append(
            {"name": test, "results": results, "test_summary": summary}
        )
    doc = {
        "DCGM Diagnostic": {
            "test_categories": [{"category": c, "tests": t} for c, t in categories.items()]
        },
        "entity_groups": [
            {
                "entities": [
                    {"device_id": device_id, "entity_id": n, "serial_num": g.serial}
                    for n, g in enumerate(present)
                ],
                "entity_group": "GPU",
                "entity_group_id": 1,
            }
        ],
        "metadata": {"Driver Version Detected": driver, "version": "4.2.3"},
    }
    return styled_json(doc)  # no trailing newline, as captured


def styled_json(value: object, depth: int = 0) -> str:
    """JSON as dcgmi (JsonCpp StyledWriter) prints it: tabs, ` : `, brackets on own lines."""
    pad = "\t" * depth
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            sub = styled_json(v, depth + 1)
            sep = "\n" + pad + "\t" if isinstance(v, (dict, list)) else ""
            items.append(f'{pad}\t"{k}" :{sep if sep else " "}{sub}')
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        return (
            "[\n"
            + ",\n".join(pad + "\t" + styled_json(v, depth + 1) for v in value)
            + ("\n" + pad + "]")
        )
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)
