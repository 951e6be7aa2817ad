"""Parsers for `ethtool <netdev>` (link settings) and `ethtool -S <netdev>` (NIC statistics).

`ethtool <if>` (corpus ethtool__e1000e-1g-unprivileged-netlink-error-fixture): `Settings for
<if>:` then tab-indented `Key: value` lines, list values continued on deeper-indented lines,
`netlink error: ...` lines where an unprivileged run could not read a part (kept as warnings:
the keys printed are still valid), `Speed: 400000Mb/s` or `Speed: Unknown!`.
`ethtool -S <if>` (corpus ethtool_S__*): `NIC statistics:` then `     name: value`; mlx5
names per kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst
(`rx_prio3_pause`, `tx_pause_storm_error_events`, `rx_discards_phy`).

>>> parse_ethtool("Settings for ens1:\\n\\tSpeed: 400000Mb/s\\n\\tLink detected: yes\\n").speed_mbps
400000
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_SPEED = re.compile(r"^(?P<n>\d+)Mb/s$")
_STAT = re.compile(r"^(?P<name>[A-Za-z0-9_.\[\]:-]+?):\s+(?P<value>-?\d+)$")

# Keys of `ethtool <if>` that contain spaces (all of them but a few do); a line is a
# continuation when its text before ':' is not a key, e.g. `drv probe link`.
_KNOWN_SPACED = frozenset(
    {
        "Supported ports", "Supported link modes", "Supported pause frame use",
        "Supports auto-negotiation", "Supported FEC modes", "Advertised link modes",
        "Advertised pause frame use", "Advertised auto-negotiation", "Advertised FEC modes",
        "Link partner advertised link modes", "Link partner advertised pause frame use",
        "Link partner advertised auto-negotiation", "Link partner advertised FEC modes",
        "Current message level", "Link detected", "Auto-negotiation", "Supports Wake-on",
        "Wake-on", "Lanes", "Duplex", "Port", "Speed", "PHYAD", "Transceiver", "MDI-X",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class EthtoolSettings:
    """`ethtool <if>`: speed in Mb/s (None when `Unknown!`), link detected, every key as printed."""

    interface: str
    speed_mbps: int | None
    link_detected: bool | None
    fields: Mapping[str, str]
    warnings: tuple[str, ...]


def parse_ethtool(text: str) -> EthtoolSettings:
    """Parse `ethtool <if>`; lines before `Settings for` (a fixture's comment) are skipped."""
    lines = clean_lines(text)
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Settings for ")), None)
    if start is None:
        raise ParseError("ethtool", "no 'Settings for <if>:' line")
    iface = lines[start][len("Settings for ") :].rstrip(":").strip()
    fields: dict[str, str] = {}
    warnings: list[str] = []
    last: str | None = None
    for lineno, raw in enumerate(lines[start + 1 :], start + 2):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("netlink error:"):
            warnings.append(line)
            continue
        key, sep, value = line.partition(":")
        name = key.strip()
        # A continuation of a list value (link modes, message level flags) has no key of its own.
        if not sep or (" " in name and name not in _KNOWN_SPACED):
            if last is None:
                raise ParseError("ethtool", f"line {lineno}: unrecognised line {line[:60]!r}")
            fields[last] = f"{fields[last]} {line}".strip()
            continue
        last = name
        fields[last] = value.strip()
    speed_text = fields.get("Speed")
    speed = None
    if speed_text is not None and (m := _SPEED.match(speed_text)):
        speed = int(m["n"])
    elif speed_text not in (None, "Unknown!"):
        raise ParseError("ethtool", f"Speed {speed_text!r} not understood")
    link = fields.get("Link detected")
    if link not in (None, "yes", "no"):
        raise ParseError("ethtool", f"Link detected {link!r} not understood")
    if speed_text is None and link is None:
        raise ParseError("ethtool", "neither Speed nor Link detected printed (truncated?)")
    return EthtoolSettings(
        iface, speed, None if link is None else link == "yes", fields, tuple(warnings)
    )


def parse_ethtool_stats(text: str) -> Mapping[str, int]:
    """Parse `ethtool -S <if>` (or a grep of it): counter name -> value."""
    out: dict[str, int] = {}
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line or line == "NIC statistics:":
            continue
        m = _STAT.match(line)
        if m is None:
            raise ParseError("ethtool -S", f"line {lineno}: unrecognised line {line[:60]!r}")
        if m["name"] in out:
            raise ParseError("ethtool -S", f"line {lineno}: {m['name']} printed twice")
        out[m["name"]] = int(m["value"])
    if not out:
        raise ParseError("ethtool -S", "no 'name: value' counter")
    return out
