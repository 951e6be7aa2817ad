"""Parser for `mst status -v` (NVIDIA MFT): which HCA is which PCI function, RDMA and net device."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_TOOL = "mst status"
_COLUMNS = ("DEVICE_TYPE", "MST", "PCI", "RDMA", "NET", "NUMA")
_SHORT_BDF_RE = re.compile(r"^[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


@dataclass(frozen=True, slots=True)
class MstDevice:
    """One `PCI devices:` row; pci_address always carries the domain (0000:e3:00.0)."""

    device_type: str  # e.g. 'ConnectX7(rev:0)'
    mst_device: str  # e.g. '/dev/mst/mt4129_pciconf8'
    pci_address: str
    rdma_device: str | None
    netdevs: tuple[str, ...]  # NET column without mst's 'net-' prefix, in printed order
    numa_node: int  # -1 as printed means no NUMA affinity


@dataclass(frozen=True, slots=True)
class MstStatus:
    """Module load state and devices sorted by PCI address."""

    pci_module_loaded: bool | None
    pciconf_module_loaded: bool | None
    devices: tuple[MstDevice, ...]


def _cells(line: str, starts: list[int]) -> list[str]:
    """Split a row into the header's columns: by whitespace if the count fits, else by offset."""
    tokens = line.split()
    if len(tokens) == len(starts):
        return tokens
    # An empty RDMA/NET cell shifts the tokens; fall back to the header's column offsets.
    ends = [*starts[1:], max(len(line), starts[-1]) + 1]
    return [line[a:b].strip() for a, b in zip(starts, ends, strict=True)]


def _module_state(lines: list[str], name: str) -> bool | None:
    for line in lines:
        text = line.strip()
        if text.startswith(f"MST {name} module"):
            return "not loaded" not in text
    return None


def parse_mst_status(text: str) -> MstStatus:
    """Parse `mst status -v`; blank lines between rows and trailing blanks are tolerated."""
    lines = clean_lines(text)
    header_idx = next((i for i, ln in enumerate(lines) if ln.split()[:1] == ["DEVICE_TYPE"]), None)
    if header_idx is None:
        if any("MST PCI" in ln for ln in lines):
            raise ParseError(_TOOL, "no DEVICE_TYPE table (plain `mst status` without -v?)")
        raise ParseError(_TOOL, "no 'DEVICE_TYPE  MST  PCI ...' header found")
    header = lines[header_idx]
    names = header.split()
    if names != list(_COLUMNS):
        raise ParseError(_TOOL, f"unexpected columns {names}")
    starts = [header.index(name) for name in _COLUMNS]
    devices: list[MstDevice] = []
    for lineno, line in enumerate(lines[header_idx + 1 :], header_idx + 2):
        if not line.strip():
            continue
        cells = _cells(line, starts)
        dtype, mst, pci, rdma, net, numa = cells
        if not mst.startswith("/dev/mst/") or not re.fullmatch(r"[0-9a-fA-F:.]+", pci):
            raise ParseError(_TOOL, f"line {lineno}: unrecognised row {line.strip()[:80]!r}")
        try:
            numa_node = int(numa)  # always printed by -v (-1 without affinity); blank = cut row
        except ValueError:
            raise ParseError(_TOOL, f"line {lineno}: NUMA {numa!r} is not a number") from None
        address = f"0000:{pci}" if _SHORT_BDF_RE.match(pci) else pci
        nets = tuple(n.removeprefix("net-") for n in net.split(",") if n)
        devices.append(
            MstDevice(
                device_type=dtype,
                mst_device=mst,
                pci_address=address.lower(),
                rdma_device=rdma or None,
                netdevs=nets,
                numa_node=numa_node,
            )
        )
    pre = lines[:header_idx]
    return MstStatus(
        pci_module_loaded=_module_state(pre, "PCI"),
        pciconf_module_loaded=_module_state(pre, "PCI configuration"),
        devices=tuple(sorted(devices, key=lambda d: d.pci_address)),  # fixed-width hex
    )
