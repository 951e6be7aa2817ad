"""Shared InfiniBand decoding: rate/width/speed strings, port states, GUID forms.

Every IB tool spells the same facts differently (ibstat `Rate: 400`, sysfs
`400 Gb/sec (4X NDR)`, ibv_devinfo `active_width: 4X (2)` + `active_speed: 100.0 Gbps (128)`,
rdma `state ACTIVE`); the helpers here turn each spelling into the same typed values so the
`hca` checks can judge width, speed and rate each on its own.

>>> decode_rate("200 Gb/sec (2X NDR)")
IbRate(raw='200 Gb/sec (2X NDR)', rate_gbps=200, width_lanes=2, speed='NDR', lane_gbps=100)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.parsers.text import number

# Nominal per-lane data rate (Gb/s) of each IB speed name, as the kernel's rate_show uses it.
SPEED_LANE_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5,
    "QDR": 10,
    "FDR10": 10,
    "FDR": 14,
    "EDR": 25,
    "HDR": 50,
    "NDR": 100,
    "XDR": 200,
}

# ibv_devinfo prints `active_speed: <lane Gb/s> Gbps (<enum>)`; the enum names the speed
# unambiguously (FDR10 and QDR are both 10 Gb/s per lane, told apart only by the enum).
_SPEED_ENUM: dict[int, str] = {
    1: "SDR",
    2: "DDR",
    4: "QDR",
    8: "FDR10",
    16: "FDR",
    32: "EDR",
    64: "HDR",
    128: "NDR",
    256: "XDR",
}

# IBTA PortInfo codes; tools print the names in different cases and spellings.
_PORT_STATE_CODES: dict[str, int] = {
    "nop": 0,
    "down": 1,
    "init": 2,
    "initializing": 2,
    "armed": 3,
    "active": 4,
    "activedefer": 5,
}
_PHYS_STATE_CODES: dict[str, int] = {
    "nop": 0,
    "nostatechange": 0,
    "sleep": 1,
    "polling": 2,
    "disabled": 3,
    "portconfigurationtraining": 4,
    "linkup": 5,
    "linkerrorrecovery": 6,
    "phytest": 7,
}

_RATE_RE = re.compile(
    r"^(?P<rate>\d+(?:\.\d+)?)\s*Gb/sec\s*\((?P<width>\d+)X(?:\s+(?P<speed>[A-Z][A-Z0-9]*))?\)$"
)
_CODED_PREFIX_RE = re.compile(r"^(?P<code>\d+)\s*:\s*(?P<name>\S.*)$")  # sysfs `4: ACTIVE`
_CODED_SUFFIX_RE = re.compile(r"^(?P<name>\S.*?)\s*\((?P<code>\d+)\)$")  # verbs `PORT_ACTIVE (4)`
_GUID_HEX_RE = re.compile(r"^[0-9a-f]{1,16}$")


@dataclass(frozen=True, slots=True)
class IbRate:
    """A decoded link rate: total Gb/s, lanes, speed name and per-lane Gb/s (each may be absent)."""

    raw: str
    rate_gbps: float | None
    width_lanes: int | None
    speed: str | None
    lane_gbps: float | None


def _compact(value: float) -> float:
    """100.0 -> 100 so facts read like the tools print them; 2.5 stays 2.5."""
    return int(value) if float(value).is_integer() else value


def decode_rate(text: str) -> IbRate | None:
    """Decode sysfs/ibstatus rate strings: '400 Gb/sec (4X NDR)', '10 Gb/sec (4X)'.

    The speed name is only what the string says: an old kernel prints SDR as '(4X)' and
    that stays speed=None. The link layer is never inferred from it (RoCE ports print
    IB-style rates too).
    """
    m = _RATE_RE.match(text.strip())
    if m is None:
        return None
    rate = number(m["rate"])
    width = int(m["width"])
    speed = m["speed"]
    lane: float | None = None
    if rate is not None and width > 0:
        lane = _compact(round(rate / width, 4))
    return IbRate(raw=text.strip(), rate_gbps=rate, width_lanes=width, speed=speed, lane_gbps=lane)


def decode_width(text: str) -> int | None:
    """ibv_devinfo/mlxlink width: '4X (2)' -> 4, '4x' -> 4, '16X (16X)' -> 16; else None."""
    m = re.match(r"^\s*(\d+)\s*[xX]\b", text)
    return int(m.group(1)) if m else None


def decode_active_speed(text: str) -> tuple[str | None, float | None]:
    """ibv_devinfo active_speed '100.0 Gbps (128)' -> ('NDR', 100); no enum -> (None, lane)."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*Gbps\s*(?:\((\d+)\))?\s*$", text)
    if m is None:
        return None, None
    lane = number(m.group(1))
    lane = _compact(lane) if lane is not None else None
    name = _SPEED_ENUM.get(int(m.group(2))) if m.group(2) else None
    return name, lane


def rate_from_parts(width_text: str | None, speed_text: str | None) -> IbRate | None:
    """Combine ibv_devinfo active_width + active_speed into one IbRate (rate = lanes x lane)."""
    if width_text is None and speed_text is None:
        return None
    width = decode_width(width_text) if width_text is not None else None
    speed, lane = decode_active_speed(speed_text) if speed_text is not None else (None, None)
    rate = _compact(round(width * lane, 4)) if width is not None and lane is not None else None
    raw = " / ".join(t.strip() for t in (width_text, speed_text) if t is not None)
    return IbRate(raw=raw, rate_gbps=rate, width_lanes=width, speed=speed, lane_gbps=lane)


def split_coded(text: str) -> tuple[int | None, str]:
    """Split a state into (code, name): '4: ACTIVE', 'PORT_ACTIVE (4)'; a bare name has no code."""
    text = text.strip()
    m = _CODED_PREFIX_RE.match(text) or _CODED_SUFFIX_RE.match(text)
    if m is None:
        return None, text
    return int(m["code"]), m["name"].strip()


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name).lower()


def port_state_code(name: str) -> int | None:
    """IBTA port state code for any spelling: 'Active', 'ACTIVE', 'PORT_ACTIVE' -> 4."""
    key = _key(name)
    if key.startswith("port"):
        key = key[4:]
    return _PORT_STATE_CODES.get(key)


def phys_state_code(name: str) -> int | None:
    """IBTA physical state code for any spelling: 'LinkUp', 'LINK_UP' -> 5, 'Disabled' -> 3."""
    return _PHYS_STATE_CODES.get(_key(name))


def state_with_code(text: str, *, physical: bool) -> tuple[str, int | None]:
    """Name and code of a (physical) port state; a printed code wins over the name table."""
    code, name = split_coded(text)
    if code is None:
        code = phys_state_code(name) if physical else port_state_code(name)
    return name, code


def canonical_guid(text: str) -> str | None:
    """Any GUID spelling ('0x0c42..', '0c42:a103:0040:29a0', bare) -> 16 lowercase hex digits."""
    value = text.strip().lower()
    if value.startswith("0x"):
        value = value[2:]
    value = value.replace(":", "")
    if not _GUID_HEX_RE.match(value):
        return None
    return value.rjust(16, "0")
