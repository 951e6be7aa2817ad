"""Simulated tools and files of the `hca` stage: the node's RDMA devices in /sys (a real tree,
read by the node's `grep` and `cat`: sim/tools/hca_sysfs.py, sim/nodefs.py; symbol errors climb
between reads), `nvidia-smi topo -m`, `mlxlink`, the nvidia_peermem state.

Formats come from the corpus: the sysfs values and the counter set of a ConnectX-7 port from
sysfs__infiniband-h100-cx7-ndr400-bf3-bond-gpud-fixture-grep.txt (sim/data), the topo matrix
from nvidia-smi-topo-m__h100-8gpu-vm-tabs-no-nics.txt (tabs, GPU NUMA ID column) with the NIC
rows and NIC Legend of nvidia-smi-topo-m__a100-sxm4-80gb-8gpu-8nic-roce-...txt.

`mlxlink -d <dev> -m -c --json` is the corpus capture mlxlink__json-m-c-cx7-400gbe-osfp-dr4-
mft4.34.txt (sim/data, verbatim) with the port's speed, state, BER and fault flags substituted.

Arguments (sim/tools/__init__.py: anything else fails, rc non-zero): `nvidia-smi topo -m` or
`topo --matrix`; `mlxlink` with -d/--device DEV, -m/--show_module, -c/--show_counters and
--json in any order, for a rail HCA; `ibv_devinfo` without arguments (hca_diag.py).

Hardware key `hca` (all optional): `firmware` (ConnectX-7 fw_ver, default 28.41.1000),
`frontend` (false drops the BlueField-3 front-end NIC mlx5_bond_0), `link_layer` (Ethernet:
the rails are RoCE ports; mlxlink then prints the corpus 400GbE capture as captured).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from nodegate.sim.fleet_model import SimNode
from nodegate.sim.nodefs import Entry
from nodegate.sim.tools.base import NVIDIA_SMI_USAGE, Provider, Response, SimTool, bad_arguments
from nodegate.sim.tools.hca_sysfs import sysfs_listing as sysfs_listing  # the checks' fixture
from nodegate.sim.tools.hca_sysfs import sysfs_tree

RAILS = 8
CX7_FW = "28.41.1000"
OLD_FW = "28.37.1014"  # a real ConnectX-7 release (corpus: ibstat a100 mt4126 VF capture)
SYMBOL_ERRORS = (1021, 1087)  # first read, second read of a port whose symbol errors climb

FAULTS = {
    "hca_missing": "HCA ARG (default mlx5_4) is gone from /sys/class/infiniband and topo -m",
    "hca_old_firmware": f"HCA ARG (default mlx5_4) runs firmware {OLD_FW}",
    "hca_port_down": "port 1 of HCA ARG (default mlx5_4) is DOWN / Polling",
    "hca_port_2x": "port 1 of HCA ARG (default mlx5_4) trained at 2X width (200 Gb/sec (2X NDR))",
    "hca_port_hdr": "port 1 of HCA ARG (default mlx5_4) runs HDR (200 Gb/sec (4X HDR))",
    "hca_symbol_errors": "symbol_error of HCA ARG (default mlx5_4) port 1 climbs between reads",
    "hca_pcie_x8": "HCA ARG (default mlx5_4) PCIe link trained at x8",
    "peermem_missing": "the nvidia_peermem module is not loaded",
    "hca_high_ber": "mlxlink of HCA ARG (default mlx5_4): raw BER 3E-4, effective BER 2E-11",
    "hca_module_fault": "mlxlink of HCA ARG (default mlx5_4): transceiver Rx LOS on lane 2",
}


@dataclass
class Hca:
    """One simulated RDMA device with one port."""

    name: str
    hca_type: str
    board_id: str
    fw_ver: str
    guid: str
    pci_device: str
    numa: int
    link_layer: str = "InfiniBand"
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = "400 Gb/sec (4X NDR)"
    pcie_width: int = 16
    counters: dict[str, int] = field(default_factory=dict)
    symbol_errors: tuple[int, int] | None = None
    ber: tuple[str, str] = ("5E-10", "15E-255")  # raw, effective, as mlxlink prints them
    rx_los_lane: int | None = None
    # P_Key table of port 1 as sysfs shows it (ports/1/pkeys/<i>), unused entries 0x0000.
    pkeys: tuple[str, ...] = ()


def _counters() -> dict[str, int]:
    text = _counters_text()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition(":")
            out[name] = int(value)
    return out


@cache
def _counters_text() -> str:
    """The counter set of a port, read once per process (a 5,000-node fleet asks 10,000 times)."""
    return resources.files("nodegate").joinpath("sim/data/hca_port_counters.txt").read_text()


def _guid(node: SimNode, i: int) -> str:
    raw = f"946dae0300{(0xCDE72C + node.index * 16 + i) % 0xFFFFFF:06x}"
    return ":".join(raw[k : k + 4] for k in range(0, 16, 4))


def node_hcas(node: SimNode) -> list[Hca]:
    """The node's RDMA devices after faults, sorted as the shell sorts the glob (C locale)."""
    hw = node.hw.get("hca") or {}
    fw = str(hw.get("firmware", CX7_FW))
    base = _counters()
    layer = str(hw.get("link_layer", "InfiniBand"))  # Ethernet: RoCE rails (sim/tools/roce.py)
    devs = [
        Hca(f"mlx5_{i}", "MT4129", "MT_0000000838", fw, _guid(node, i), "0x1021", i // 4, layer)
        for i in range(RAILS)
    ]
    if hw.get("frontend", True):
        devs.append(
            Hca(
                "mlx5_bond_0",
                "MT41692",
                "MT_0000000884",
                "32.38.3056",
                _guid(node, 15),
                "0xa2dc",
                0,
                link_layer="Ethernet",
                rate="200 Gb/sec (2X NDR)",
            )  # fmt: skip
        )
    for d in devs:
        d.counters = dict(base)
        d.pkeys = DEFAULT_PKEYS if d.link_layer == "InfiniBand" else ETHERNET_PKEYS
    _fabric_faults(node, devs)
    by_name = {d.name: d for d in devs}
    for f in node.faults:
        hit = by_name.get(f.arg or "mlx5_4")
        if hit is None or f.kind not in FAULTS:
            continue
        d = hit
        if f.kind == "hca_missing":
            devs.remove(d)
        elif f.kind == "hca_old_firmware":
            d.fw_ver = OLD_FW
        elif f.kind == "hca_port_down":
            # What a port without a link partner reads (corpus ibstatus: 40 Gb/sec (4X QDR)).
            d.state, d.phys_state, d.rate = "1: DOWN", "2: Polling", "40 Gb/sec (4X QDR)"
        elif f.kind == "hca_port_2x":
            d.rate = "200 Gb/sec (2X NDR)"
        elif f.kind == "hca_port_hdr":
            d.rate = "200 Gb/sec (4X HDR)"
        elif f.kind == "hca_symbol_errors":
            d.symbol_errors = SYMBOL_ERRORS
        elif f.kind == "hca_pcie_x8":
            d.pcie_width = 8
        elif f.kind == "hca_high_ber":
            d.ber = ("3E-4", "2E-11")
        elif f.kind == "hca_module_fault":
            d.rx_los_lane = 2
    return sorted(devs, key=lambda d: d.name)


# The default partition (full member) and the compute partition 0x0001 (full member), in a
# table cut to 16 entries (mlx5 ports have 128); a RoCE port's table holds the default only.
PKEY_TABLE = 16
DEFAULT_PKEYS = ("0xffff", "0x8001") + ("0x0000",) * (PKEY_TABLE - 2)
ETHERNET_PKEYS = ("0xffff",) + ("0x0000",) * (PKEY_TABLE - 1)


def _fabric_faults(node: SimNode, devs: list[Hca]) -> None:
    """What the fabric's node faults (sim/fabric.py, ARG a rail) change on the host side."""
    for f in node.faults:
        if f.kind not in ("fabric_rail_unplugged", "fabric_pkey_missing"):
            continue
        name = f"mlx5_{f.arg or '4'}"
        for d in devs:
            if d.name != name:
                continue
            if f.kind == "fabric_rail_unplugged":  # no cable: what hca_port_down reads
                d.state, d.phys_state, d.rate = "1: DOWN", "2: Polling", "40 Gb/sec (4X QDR)"
            else:
                d.pkeys = ("0xffff", "0x0000", *d.pkeys[2:])


_LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""  # noqa: E501
_CPUS = ("0-55,112-167", "56-111,168-223")  # 2 x 56-core sockets with SMT


def topo_matrix(devs: list[Hca], gpus: int = 8) -> str:
    """`nvidia-smi topo -m` of an HGX H100 board: GPU i and mlx5_i share a PCIe switch (PIX)."""
    nics = sorted(devs, key=lambda d: (d.numa, d.name != "mlx5_bond_0", len(d.name), d.name))
    gpu_numa = [i * 2 // gpus for i in range(gpus)]
    names = [f"GPU{i}" for i in range(gpus)] + [f"NIC{k}" for k in range(len(nics))]

    def rel(a: int, b: int) -> str:  # indices into names
        if a == b:
            return " X "
        if a < gpus and b < gpus:
            return "NV18"
        na = gpu_numa[a] if a < gpus else nics[a - gpus].numa
        nb = gpu_numa[b] if b < gpus else nics[b - gpus].numa
        g, n = (a, b) if a < gpus else (b, a)
        if g < gpus and n >= gpus and nics[n - gpus].name == f"mlx5_{g}":
            return "PIX"
        return "NODE" if na == nb else "SYS"

    head = "\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = [head]
    for a, name in enumerate(names):
        cells = [rel(a, b) for b in range(len(names))]
        tail = [_CPUS[gpu_numa[a]], str(gpu_numa[a]), "", "N/A"] if a < gpus else []
        rows.append("\t".join([name, *cells, *tail]))
    legend = "\n".join(f"  NIC{k}: {d.name}" for k, d in enumerate(nics))
    return "\n".join(rows) + "\n" + _LEGEND + "\nNIC Legend:\n\n" + legend + "\n"


def _mlxlink_template() -> str:
    path = "sim/data/mlxlink-json__cx7-osfp-mft4.34.json"
    return resources.files("nodegate").joinpath(path).read_text()


def mlxlink_json(d: Hca, template: str) -> str:
    """`mlxlink -d <dev> -m -c --json` of an IB NDR port: the corpus capture with this port's
    speed, BER and flags substituted (tabs and `" : "` kept as mlxlink prints them)."""
    out = template
    if d.link_layer == "InfiniBand":  # the capture is of a 400GbE port: an IB port differs here
        out = out.replace('"Speed" : "400G"', '"Speed" : "IB-NDR"')
        out = out.replace('"Physical state" : "ETH_AN_FSM_ENABLE"', '"Physical state" : "LinkUp"')
    out = out.replace('"Raw Physical BER" : "5E-10"', f'"Raw Physical BER" : "{d.ber[0]}"')
    out = out.replace(
        '"Effective Physical BER" : "15E-255"', f'"Effective Physical BER" : "{d.ber[1]}"'
    )
    if d.rx_los_lane is not None:
        head, sep, tail = out.partition('"Rx LOS [per lane]" :')
        lanes = ['"1"' if i == d.rx_los_lane else '"0"' for i in range(4)]
        block = tail.split("]", 1)
        values = ",\n".join("\t\t\t\t\t\t" + v for v in lanes)
        tail = block[0].split("[", 1)[0] + "[\n" + values + "\n\t\t\t\t\t]" + block[1]
        out = head + sep + tail
    return out


TOPO_PRELUDE = """case "$*" in "topo --matrix") set -- topo -m ;; esac"""
# mlxlink's options in any order: -d/--device DEV, -m/--show_module, -c/--show_counters, --json.
MLXLINK_PRELUDE = """ng_d= ng_m= ng_c= ng_j= ng_x= ng_next=
for ng_a do
  if [ -n "$ng_next" ]; then ng_d=$ng_a; ng_next=; continue; fi
  case $ng_a in
    -d|--device) ng_next=1 ;;
    -m|--show_module) ng_m=-m ;;
    -c|--show_counters) ng_c=-c ;;
    --json) ng_j=--json ;;
    *) ng_x=1 ;;
  esac
done
[ -n "$ng_x$ng_next" ] || [ -z "$ng_d" ] || set -- -d "$ng_d" $ng_m $ng_c $ng_j"""


def tools(node: SimNode) -> Iterable[SimTool]:
    devs = node_hcas(node)
    yield SimTool(
        "nvidia-smi",
        {"topo -m": Response(topo_matrix(devs))},
        prelude=TOPO_PRELUDE,
        usage=NVIDIA_SMI_USAGE,
    )
    from nodegate.sim.tools import hca_diag  # it builds on Hca: imported here, not at the top

    yield from hca_diag.tools(devs)
    template = _mlxlink_template()
    yield SimTool(
        "mlxlink",
        {
            f"-d {d.name} -m -c --json": Response(mlxlink_json(d, template))
            for d in devs
            if d.name.startswith("mlx5_") and d.name != "mlx5_bond_0"
        },
        prelude=MLXLINK_PRELUDE,
        usage=bad_arguments("mlxlink", 1),
    )


def files(node: SimNode) -> dict[str, Entry]:
    """The node's RDMA devices in /sys (read by the node's real `grep`/`cat`), peermem state."""
    out = sysfs_tree(node_hcas(node))
    if node.fault("peermem_missing") is None:
        out["/sys/module/nvidia_peermem/initstate"] = "live\n"
    return out


PROVIDER = Provider(name="hca", tools=tools, files=files, faults=FAULTS)
