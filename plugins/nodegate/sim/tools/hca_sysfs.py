"""The /sys of a simulated node's RDMA devices, laid out as the kernel lays it out.

    /sys/class/infiniband/mlx5_0 -> ../../devices/pci0000:15/0000:18:00.0/infiniband/mlx5_0
    .../0000:18:00.0/{vendor,device,numa_node,current_link_speed,...}     the PCI function
    .../infiniband/mlx5_0/{fw_ver,board_id,hca_type,node_guid}
    .../infiniband/mlx5_0/device -> ../../../0000:18:00.0
    .../infiniband/mlx5_0/ports/1/{state,phys_state,rate,link_layer,counters/*,pkeys/*}

Values as the kernel prints them (drivers/infiniband/core/sysfs.c, drivers/pci/pci-sysfs.c),
from the corpus capture sysfs__infiniband-h100-cx7-ndr400-bf3-bond-gpud-fixture-grep.txt.
Each rail HCA sits on the PCIe switch of its GPU (the bus below the GPU's in the HGX lspci
capture); the PCI path is shortened to root complex / function. A port whose symbol errors
climb (`hca_symbol_errors`) holds a `Counter`: each read of the node's /sys sees it higher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodegate.parsers.ib_pci import PCI_ATTRS  # kernel attribute names, one list
from nodegate.sim.nodefs import Counter, Entry, Symlink

if TYPE_CHECKING:  # hca.py builds the devices and imports this module
    from nodegate.sim.tools.hca import Hca

CLASS = "/sys/class/infiniband"
# (root complex bus, HCA bus) per rail, then the front-end NIC.
_RAIL_PCI = (
    ("15", "18"),
    ("37", "3a"),
    ("48", "4b"),
    ("59", "5c"),
    ("97", "9a"),
    ("b7", "ba"),
    ("c7", "ca"),
    ("d7", "da"),
)
_FRONTEND_PCI = ("28", "2a")


def pci_function(d: Hca) -> tuple[str, str]:
    """(root complex, BDF) of the HCA's PCI function: ("pci0000:15", "0000:18:00.0")."""
    rail = d.name.removeprefix("mlx5_")
    root, bus = _RAIL_PCI[int(rail) % len(_RAIL_PCI)] if rail.isdigit() else _FRONTEND_PCI
    return f"pci0000:{root}", f"0000:{bus}:00.0"


def pci_values(d: Hca) -> dict[str, str]:
    """Kernel formats: hex ids, decimal widths and NUMA node, pci_speed_string()."""
    return {
        "vendor": "0x15b3",
        "device": d.pci_device,
        "numa_node": str(d.numa),
        "current_link_speed": "32.0 GT/s PCIe",
        "current_link_width": str(d.pcie_width),
        "max_link_speed": "32.0 GT/s PCIe",
        "max_link_width": "16",
    }


def device_tree(d: Hca) -> dict[str, Entry]:
    """Every file and link of one RDMA device, by absolute path."""
    root, bdf = pci_function(d)
    fn = f"/sys/devices/{root}/{bdf}"
    dev = f"{fn}/infiniband/{d.name}"
    port = f"{dev}/ports/1"
    out: dict[str, Entry] = {
        f"{CLASS}/{d.name}": Symlink(f"../../devices/{root}/{bdf}/infiniband/{d.name}"),
        f"{dev}/device": Symlink(f"../../../{bdf}"),
        f"{dev}/fw_ver": d.fw_ver + "\n",
        f"{dev}/board_id": d.board_id + "\n",
        f"{dev}/hca_type": d.hca_type + "\n",
        f"{dev}/node_guid": d.guid + "\n",
        f"{port}/state": d.state + "\n",
        f"{port}/phys_state": d.phys_state + "\n",
        f"{port}/rate": d.rate + "\n",
        f"{port}/link_layer": d.link_layer + "\n",
    }
    out.update({f"{fn}/{k}": v + "\n" for k, v in pci_values(d).items()})
    for name, value in sorted(d.counters.items()):
        out[f"{port}/counters/{name}"] = f"{value}\n"
    for i, pkey in enumerate(d.pkeys):
        out[f"{port}/pkeys/{i}"] = pkey + "\n"
    if d.symbol_errors is not None:
        first, second = d.symbol_errors
        out[f"{port}/counters/symbol_error"] = Counter(first, second - first)
    return out


def sysfs_tree(devs: list[Hca]) -> dict[str, Entry]:
    """The node's /sys/class/infiniband and the devices behind it."""
    out: dict[str, Entry] = {}
    for d in devs:
        out.update(device_tree(d))
    return out


def sysfs_listing(devs: list[Hca], read: int) -> str:
    """A fixture for the hca checks' unit tests: what a node's `grep -H -r .` prints for the
    hca stage's first (0) and second (1) read, glob by glob, a directory's files by name.
    The simulated node does not use it (it greps its tree); test_hca_sim pins the two equal."""
    lines: list[str] = []
    if read == 0:
        for attr in ("fw_ver", "board_id", "hca_type", "node_guid"):
            for d in devs:
                v = {"fw_ver": d.fw_ver, "board_id": d.board_id, "hca_type": d.hca_type}
                lines.append(f"{CLASS}/{d.name}/{attr}:{v.get(attr, d.guid)}")
    port_files = ("state", "phys_state", "rate") + (("link_layer",) if read == 0 else ())
    for name in port_files:
        for d in devs:
            v = {"state": d.state, "phys_state": d.phys_state, "rate": d.rate}
            lines.append(f"{CLASS}/{d.name}/ports/1/{name}:{v.get(name, d.link_layer)}")
    for d in devs:
        values = dict(d.counters)
        if d.symbol_errors is not None:
            values["symbol_error"] = d.symbol_errors[read]
        lines += [f"{CLASS}/{d.name}/ports/1/counters/{k}:{v}" for k, v in sorted(values.items())]
    if read == 0:
        for attr in PCI_ATTRS:
            lines += [f"{CLASS}/{d.name}/device/{attr}:{pci_values(d)[attr]}" for d in devs]
    return "\n".join(lines) + "\n"
