"""Firmware identity parsers: `flint`/`mstflint -d <dev> q` and `ethtool -i` (fw + PSID).

>>> parse_ethtool_i("driver: mlx5_core\\nfirmware-version: 14.23.1020 (MT_2420110034)\\n").psid
'MT_2420110034'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.ib_rate import canonical_guid
from nodegate.parsers.text import clean_lines

# `Key:   value` with the value column at 23; continuation lines (Rom Info) are blank-keyed.
_FLINT_KV_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ()/_.-]*?):\s*(?P<value>.*)$")
_ROM_RE = re.compile(r"(?P<key>type|version|cpu|devid|proto)=(?P<value>.*?)(?=\s+\w+=|$)")
_ETHTOOL_FW_RE = re.compile(r"^(?P<fw>\S+)(?:\s+\((?P<psid>[A-Z][A-Z0-9_]+)\))?$")


@dataclass(frozen=True, slots=True)
class RomInfo:
    """One expansion ROM image listed under `Rom Info:` (type may contain spaces)."""

    type: str
    version: str | None
    cpu: str | None


@dataclass(frozen=True, slots=True)
class FlintQuery:
    """`flint q` facts; fw_version_running is set only while a newer image awaits a reset."""

    image_type: str | None
    fw_version: str
    fw_version_running: str | None
    fw_release_date: str | None
    product_version: str | None
    rom_info: tuple[RomInfo, ...]
    base_guid: str | None
    base_guid_count: int | None
    base_mac: str | None
    base_mac_count: int | None
    image_vsd: str | None
    device_vsd: str | None
    psid: str | None
    security_attributes: tuple[str, ...] | None  # () when flint prints N/A


@dataclass(frozen=True, slots=True)
class EthtoolDriverInfo:
    """`ethtool -i`; mlx5_core appends the PSID: firmware-version '14.23.1020 (MT_2420110034)'."""

    driver: str
    version: str | None
    firmware_version: str  # the whole value as printed
    fw_version: str | None
    psid: str | None
    expansion_rom_version: str | None
    bus_info: str | None
    supports: Mapping[str, bool]  # supports-statistics -> {'statistics': True}, ...


def _na(value: str | None) -> str | None:
    return None if value is None or value in ("", "N/A") else value


def _guid_and_count(value: str | None) -> tuple[str | None, int | None]:
    """'08c0eb030053eaec        16' -> ('08c0eb030053eaec', 16)."""
    if not value or value == "N/A":
        return None, None
    parts = value.split()
    count = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return parts[0].lower(), count


def _rom(line: str) -> RomInfo:
    fields = {m["key"]: m["value"].strip() for m in _ROM_RE.finditer(line)}
    return RomInfo(
        type=fields.get("type", line), version=fields.get("version"), cpu=fields.get("cpu")
    )


def parse_flint_query(text: str) -> FlintQuery:
    """Parse `flint -d <dev> q` (also mstflint); '-E-' errors raise ParseError quoting them."""
    fields: dict[str, list[str]] = {}
    last: str | None = None
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("-E-"):
            raise ParseError("flint", f"flint reported an error: {line}")
        if line.startswith("-W-"):
            continue  # warnings (e.g. about a missing expansion ROM) do not change the facts
        if raw[:1].isspace() and last is not None:
            fields[last].append(line)  # `Rom Info:` lists one image per indented line
            continue
        m = _FLINT_KV_RE.match(line)
        if m is None:
            raise ParseError("flint", f"line {lineno}: unrecognised line {line[:60]!r}")
        last = m["key"].strip()
        fields[last] = [m["value"].strip()]
    missing = [k for k in ("FW Version", "PSID") if k not in fields]
    if missing:
        raise ParseError("flint", f"no {' or '.join(missing)} line (truncated or not flint q?)")

    def one(key: str) -> str | None:
        return _na(fields[key][0]) if key in fields else None

    guid, guid_count = _guid_and_count(one("Base GUID"))
    mac, mac_count = _guid_and_count(one("Base MAC"))
    roms = [r for r in fields.get("Rom Info", []) if r and r != "N/A"]
    security = fields.get("Security Attributes")
    attrs: tuple[str, ...] | None = None
    if security is not None:
        sec = _na(security[0])
        attrs = tuple(a.strip() for a in sec.split(",") if a.strip()) if sec else ()
    return FlintQuery(
        image_type=one("Image type"),
        fw_version=fields["FW Version"][0],
        fw_version_running=one("FW Version(Running)"),
        fw_release_date=one("FW Release Date"),
        product_version=one("Product Version"),
        rom_info=tuple(_rom(r) for r in roms),
        base_guid=canonical_guid(guid) if guid else None,
        base_guid_count=guid_count,
        base_mac=mac,
        base_mac_count=mac_count,
        image_vsd=one("Image VSD"),
        device_vsd=one("Device VSD"),
        psid=one("PSID"),
        security_attributes=attrs,
    )


def parse_ethtool_i(text: str) -> EthtoolDriverInfo:
    """Parse `ethtool -i <netdev>`: driver, firmware-version (+ PSID for mlx5), bus-info."""
    kv: dict[str, str] = {}
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep or not re.fullmatch(r"[a-z][a-z-]*", key):
            raise ParseError("ethtool -i", f"line {lineno}: unrecognised line {line[:60]!r}")
        kv[key] = value.strip()
    if "driver" not in kv or "firmware-version" not in kv:
        raise ParseError("ethtool -i", "no 'driver:' and 'firmware-version:' lines")
    fw = kv["firmware-version"]
    m = _ETHTOOL_FW_RE.match(fw)
    supports = {
        k[len("supports-") :]: v == "yes" for k, v in kv.items() if k.startswith("supports-")
    }
    return EthtoolDriverInfo(
        driver=kv["driver"],
        version=kv.get("version") or None,
        firmware_version=fw,
        fw_version=m["fw"] if m else None,
        psid=m["psid"] if m else None,
        expansion_rom_version=kv.get("expansion-rom-version") or None,
        bus_info=kv.get("bus-info") or None,
        supports=supports,
    )
