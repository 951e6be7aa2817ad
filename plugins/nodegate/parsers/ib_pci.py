"""PCI facts of RDMA devices from `/sys/class/infiniband/<dev>/device/*`, read as `grep -H` lines.

The `hca` stage reads these attributes in the same `grep -H -r .` listing as the rest of
/sys/class/infiniband (nodegate.parsers.ib_sysfs ignores them), so no `lspci`/`mst` name
mapping is needed. Formats are the kernel's (drivers/pci/pci-sysfs.c): `vendor`/`device` print
`0x15b3`; `current_link_speed` prints `pci_speed_string()`, `32.0 GT/s PCIe` since Linux 5.5
and `8 GT/s` / `8.0 GT/s` before, `Unknown` when the link is down; `*_link_width` and
`numa_node` print decimals (`-1`: no NUMA affinity).

>>> parse_ib_pci("mlx5_0/device/current_link_width:16")["mlx5_0"].width_lanes
16
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.pci import pcie_gen
from nodegate.parsers.text import clean_lines, natural_key

_TOOL = "ib_pci"
# The PCI attributes of an RDMA device's sysfs `device/` directory the hca stage reads.
PCI_ATTRS = (
    "vendor",
    "device",
    "numa_node",
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
)
_SPEED_RE = re.compile(r"^(?P<gts>\d+(?:\.\d+)?) GT/s(?: PCIe)?$")
_HEX_ID_RE = re.compile(r"^0x(?P<id>[0-9a-fA-F]{4})$")


@dataclass(frozen=True, slots=True)
class IbPciLink:
    """One RDMA device's PCI function: ids, NUMA node and PCIe link (absent: None)."""

    device: str
    pci_id: str | None  # 'vendor:device', lowercase hex, e.g. '15b3:1021'
    numa_node: int | None  # None when the kernel reports -1 (no affinity) or nothing
    speed_gts: float | None
    gen: int | None
    width_lanes: int | None
    max_speed_gts: float | None
    max_gen: int | None
    max_width_lanes: int | None


def _speed(where: str, value: str | None) -> float | None:
    if value is None or value == "Unknown":
        return None
    m = _SPEED_RE.match(value)
    if m is None:
        raise ParseError(_TOOL, f"{where}: unreadable link speed {value!r}")
    return float(m["gts"])


def _int(where: str, name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ParseError(_TOOL, f"{where}: {name} reads {value!r}") from None


def _hex_id(where: str, name: str, value: str | None) -> str | None:
    if value is None:
        return None
    m = _HEX_ID_RE.match(value)
    if m is None:
        raise ParseError(_TOOL, f"{where}: {name} reads {value!r}")
    return m["id"].lower()


def parse_ib_pci(text: str) -> dict[str, IbPciLink]:
    """Per RDMA device, the PCI attributes found in a `path:value` listing (other lines skipped)."""
    found: dict[str, dict[str, str]] = {}
    for line in clean_lines(text):
        # Only <dev>/device/<attr> paths are read; most lines of the listing are other files.
        if "/device/" not in line:
            continue
        path, sep, value = line.partition(":")
        if not sep:
            continue
        if "class/infiniband/" in path:
            path = path.split("class/infiniband/", 1)[1]
        parts = [p for p in path.split("/") if p]
        if len(parts) == 3 and parts[1] == "device" and parts[2] in PCI_ATTRS:
            found.setdefault(parts[0], {})[parts[2]] = value.strip()
    out: dict[str, IbPciLink] = {}
    for dev in sorted(found, key=natural_key):
        a = found[dev]
        where = f"{dev} device"
        vendor = _hex_id(where, "vendor", a.get("vendor"))
        device = _hex_id(where, "device", a.get("device"))
        numa = _int(where, "numa_node", a.get("numa_node"))
        speed = _speed(where, a.get("current_link_speed"))
        max_speed = _speed(where, a.get("max_link_speed"))
        out[dev] = IbPciLink(
            device=dev,
            pci_id=f"{vendor}:{device}" if vendor and device else None,
            numa_node=numa if numa is not None and numa >= 0 else None,
            speed_gts=speed,
            gen=pcie_gen(speed),
            width_lanes=_int(where, "current_link_width", a.get("current_link_width")),
            max_speed_gts=max_speed,
            max_gen=pcie_gen(max_speed),
            max_width_lanes=_int(where, "max_link_width", a.get("max_link_width")),
        )
    return out
