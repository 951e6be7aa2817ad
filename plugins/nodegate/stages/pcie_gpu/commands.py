"""What the `pcie_gpu` stage runs on a node: command ids (they name the evidence,
`raw/<node>/pcie_gpu.json#<id>`, and the facts read from it). The simulated fleet answers the
stage's exact command lines, so they change only together with it."""

from __future__ import annotations

NVSMI = "nvsmi"  # nvidia-smi -q
LSPCI = "lspci"  # lspci -vvv
NVLINK = "nvlink"  # nvidia-smi nvlink -s
KERNEL_LOG = "kernel_log"  # journalctl -k over the profile's Xid window
FABRICMANAGER = "fabricmanager"  # systemctl status nvidia-fabricmanager (when the SKU has one)
DCGM = "dcgm"  # dcgmi diag -r <level> -j

CMD_TIMEOUT_S = 60.0
