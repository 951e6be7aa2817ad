"""Parse `lspci -vvv` into devices plus the bus range behind each bridge, so the ports between
a root complex and a device (root port, switch upstream and downstream ports) can be named.

Example (corpus lspci-vvv__hgx-h100-8gpu-dell-pex890xx-cx7-nvswitch.txt): GPU 0000:19:00.0 sits
behind root port 0000:15:01.0, switch upstream port 0000:16:00.0, downstream port 0000:17:01.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.lspci import LspciReport, PciDevice, scan_lspci
from nodegate.parsers.pci import normalize_bdf

TOOL = "lspci"
_BUS_RANGE = re.compile(r"^\s+Bus: primary=[0-9a-f]+, secondary=(\w+), subordinate=(\w+)")
_HEADER = re.compile(r"^(?P<bdf>\S+) ")
# Where str.splitlines() breaks lines and lspci's parse (on "\n") does not (plus \x85 and
# U+2028/9, not ASCII), and the escape that starts codes the parse strips: text holding one
# has its bus ranges read line by line as splitlines() cuts it. (A regex scan costs ~1 ms.)
_ODD_ASCII = ("\x1b", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


@dataclass(frozen=True, slots=True)
class Bridge:
    """A PCI bridge (root or switch port) with the bus range behind it."""

    device: PciDevice
    domain: str
    secondary: int
    subordinate: int


@dataclass(frozen=True, slots=True)
class LspciView:
    """lspci facts plus the bridges each device sits behind (from `Bus:` lines)."""

    report: LspciReport
    bridges: tuple[Bridge, ...]

    def device(self, bdf: str) -> PciDevice | None:
        return next((d for d in self.report.devices if d.bdf == bdf), None)

    def path_to(self, bdf: str) -> tuple[Bridge, ...]:
        """Bridges above `bdf`, root port first (the narrower bus range is further down)."""
        dom, bus = bdf[:4], int(bdf[5:7], 16)
        above = [b for b in self.bridges if b.domain == dom and b.secondary <= bus <= b.subordinate]
        return tuple(sorted(above, key=lambda b: (b.subordinate - b.secondary, b.secondary))[::-1])


def parse_lspci_view(text: str) -> LspciView:
    """`lspci -vvv` -> devices and the bus ranges of their bridges."""
    report, texts = scan_lspci(text)
    if not text.isascii() or any(c in text for c in _ODD_ASCII):
        texts = _bus_range_texts(text)
    ranges: dict[str, tuple[int, int]] = {}
    for bdf, sec, sub in texts:
        try:
            ranges[bdf] = (int(sec, 16), int(sub, 16))
        except ValueError:
            raise ParseError(
                TOOL, f"{bdf}: bus range not hexadecimal (secondary={sec}, subordinate={sub})"
            ) from None
    bridges = tuple(Bridge(d, d.bdf[:4], *ranges[d.bdf]) for d in report.devices if d.bdf in ranges)
    return LspciView(report, bridges)


def _bus_range_texts(text: str) -> list[tuple[str, str, str]]:
    """Each `Bus:` line's header (normalized first word), secondary and subordinate texts."""
    ranges: list[tuple[str, str, str]] = []
    current: str | None = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            m = _HEADER.match(line)
            current = normalize_bdf(m["bdf"]) if m else None
        elif current and (bm := _BUS_RANGE.match(line)):
            ranges.append((current, bm[1], bm[2]))
    return ranges
