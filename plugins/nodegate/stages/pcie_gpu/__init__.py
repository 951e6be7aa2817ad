"""Stage `pcie_gpu` (GPUs, their PCIe links, memory health, Xid, NVLink, fabric, DCGM)."""

from nodegate.stages.pcie_gpu.stage import STAGE

__all__ = ["STAGE"]
