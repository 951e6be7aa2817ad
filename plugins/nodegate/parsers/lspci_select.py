"""Pick devices of one kind from an lspci report: NVIDIA GPUs and NVSwitches, Mellanox HCAs,
PCIe switch ports (by class code when `-nn` printed it, else by class name).
"""

from __future__ import annotations

from nodegate.parsers.lspci import LspciReport, PciDevice


def _is_nvidia(dev: PciDevice) -> bool:
    return dev.vendor_id == "10de" or dev.vendor_name == "NVIDIA Corporation"


def _in_class(dev: PciDevice, classes: dict[str, str]) -> bool:
    """Match on the class code when -nn printed it, else on the class name."""
    if dev.class_code:
        return dev.class_code in classes.values()
    return dev.class_name in classes


_GPU_CLASSES = {"3D controller": "0302", "VGA compatible controller": "0300"}
_HCA_CLASSES = {"Infiniband controller": "0207", "Ethernet controller": "0200"}


def gpus(report: LspciReport) -> tuple[PciDevice, ...]:
    """NVIDIA 3D controllers (0302) and VGA controllers (0300)."""
    return tuple(d for d in report.devices if _is_nvidia(d) and _in_class(d, _GPU_CLASSES))


def nvswitches(report: LspciReport) -> tuple[PciDevice, ...]:
    """NVIDIA devices of class `Bridge` (0680); Grace root ports are `PCI bridge` (0604)."""
    return tuple(d for d in report.devices if _is_nvidia(d) and _in_class(d, {"Bridge": "0680"}))


def mellanox_hcas(report: LspciReport) -> tuple[PciDevice, ...]:
    """Mellanox (15b3) Infiniband (0207) or Ethernet (0200) functions, VFs included."""
    return tuple(
        d
        for d in report.devices
        if (d.vendor_id == "15b3" or d.vendor_name == "Mellanox Technologies")
        and _in_class(d, _HCA_CLASSES)
    )


def pcie_switch_ports(report: LspciReport) -> tuple[PciDevice, ...]:
    """PCI bridges (0604) except root ports; without -vv the port type is unknown, all count."""
    return tuple(
        d
        for d in report.devices
        if _in_class(d, {"PCI bridge": "0604"}) and d.express_type != "Root Port"
    )
