"""The GPUDirect preamble `ib_write_bw --use_cuda` prints: device picked, its name, DMA-BUF use."""

from __future__ import annotations

import re
from dataclasses import dataclass

_CUDA_PICK_RE = re.compile(r"^Picking device No\. (?P<idx>\d+)$")
_CUDA_NAME_RE = re.compile(r"^\[pid = \d+, dev = \d+\] device name = \[(?P<name>[^\]]*)\]$")
_CUDA_LIST_RE = re.compile(r"^CUDA device (?P<idx>\d+): PCIe address is (?P<addr>\S+)$")
_CUDA_NOISE_RE = re.compile(
    r"^(initializing CUDA|Listing all CUDA devices in system:|creating CUDA Ctx"
    r"|making it the current CUDA Ctx|CUDA device integrated: \d+|cuMemAlloc\(\) of a .*"
    r"|allocated GPU buffer address at .*|Calling ibv_reg_dmabuf_mr\(.*|deallocating GPU buffer .*"
    r"|destroying current CUDA Ctx)$"
)
_DMABUF_RE = re.compile(r"^using DMA-BUF for GPU buffer .*$")
# Every line of the preamble, so the run scanner keeps them apart from the result.
CUDA_LINE_RES = (_CUDA_NOISE_RE, _CUDA_PICK_RE, _CUDA_NAME_RE, _CUDA_LIST_RE, _DMABUF_RE)


@dataclass(frozen=True, slots=True)
class PerftestCuda:
    """GPUDirect preamble (`--use_cuda`): device picked, its name, and whether DMA-BUF was used."""

    device_index: int | None
    device_name: str | None
    dmabuf: bool
    pcie_addresses: tuple[str, ...]


def cuda_preamble(lines: list[str]) -> PerftestCuda | None:
    """The preamble's facts from its lines (as the scanner collected them); None without any."""
    if not lines:
        return None
    idx = name = None
    addrs: list[str] = []
    dmabuf = False
    for line in lines:
        if m := _CUDA_PICK_RE.match(line):
            idx = int(m["idx"])
        elif m := _CUDA_NAME_RE.match(line):
            name = m["name"]
        elif m := _CUDA_LIST_RE.match(line):
            addrs.append(m["addr"])
        elif _DMABUF_RE.match(line):
            dmabuf = True
    return PerftestCuda(idx, name, dmabuf, tuple(addrs))
