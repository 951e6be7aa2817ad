"""PCI addresses and PCIe generations as the tools spell them (lspci, kernel log, DCGM, FM).

>>> (normalize_bdf("PCI:0000:52:00"), pcie_gen(32.0))
('0000:52:00.0', 5)
"""

from __future__ import annotations

import re

# PCIe signalling rate (GT/s) -> generation.
GEN_BY_SPEED_GTS: dict[float, int] = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}

_BDF = re.compile(
    r"^(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?$"
)


def normalize_bdf(raw: str) -> str | None:
    """`9b:00.0`, `PCI:0000:52:00`, `00000000:83:00.0` -> `0000:9b:00.0`; None if not a BDF."""
    text = raw.strip()
    if text.upper().startswith("PCI:"):
        text = text[4:]
    m = _BDF.match(text)
    if m is None:
        return None
    dom = int(m["dom"] or "0", 16)
    fn = m["fn"] or "0"
    return f"{dom:04x}:{int(m['bus'], 16):02x}:{int(m['dev'], 16):02x}.{fn}"


def pcie_gen(speed_gts: float | None) -> int | None:
    """32.0 -> 5; None for speeds that are not a PCIe generation."""
    return None if speed_gts is None else GEN_BY_SPEED_GTS.get(speed_gts)
