"""Parsers for `ibstat` (infiniband-diags) and `ibstatus` output.

Example: ``parse_ibstat(out).cas[0].ports[0].rate_gbps`` -> ``400`` for an NDR port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.ib_rate import IbRate, canonical_guid, decode_rate, state_with_code
from nodegate.parsers.text import clean_lines, natural_key, number

_CA_RE = re.compile(r"^CA '(?P<name>[^']+)'$")
_PORT_RE = re.compile(r"^Port (?P<num>\d+):$")
_KV_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<value>.*)$")
# ibstat prints `Rate: 2.5` for 1X SDR and `Rate: 40 (FDR10)` for FDR10 (ibstat.c port_dump).
_IBSTAT_RATE_RE = re.compile(r"^(?P<rate>\d+(?:\.\d+)?)(?:\s*\((?P<note>[^)]*)\))?$")
_IBSTATUS_HDR_RE = re.compile(r"^Infiniband device '(?P<dev>[^']+)' port (?P<port>\d+) status:$")

_CA_KEYS = {
    "CA type": "ca_type",
    "Number of ports": "num_ports",
    "Firmware version": "fw_version",
    "Hardware version": "hw_version",
    "Node GUID": "node_guid",
    "System image GUID": "system_image_guid",
}
# Port GUID and Link layer are optional: old ibstat builds lack `Link layer`, and the Broadcom
# excerpt (ibstat__broadcom-bnxt-re-roce-100g-excerpt.txt) stops after `Capability mask`.
_PORT_REQUIRED = ("State", "Physical state", "Rate", "Base lid", "LMC", "SM lid", "Capability mask")
_PORT_KEYS = (*_PORT_REQUIRED, "Port GUID", "Link layer")


@dataclass(frozen=True, slots=True)
class IbstatPort:
    """One CA port as ibstat reports it; RoCE ports show base_lid 0, down IB ports 65535."""

    port: int
    state: str
    state_code: int | None
    phys_state: str
    phys_state_code: int | None
    rate_gbps: float
    rate_note: str | None  # `(FDR10)` suffix when ibstat prints one
    base_lid: int
    lmc: int
    sm_lid: int
    capability_mask: str
    port_guid: str | None
    link_layer: str | None


@dataclass(frozen=True, slots=True)
class IbstatCa:
    """One channel adapter (HCA); ca_type is free text for non-Mellanox devices."""

    name: str
    ca_type: str | None
    num_ports: int | None
    fw_version: str | None
    hw_version: str | None
    node_guid: str | None
    system_image_guid: str | None
    ports: tuple[IbstatPort, ...]


@dataclass(frozen=True, slots=True)
class IbstatReport:
    """All CAs, sorted naturally by name (mlx5_2 before mlx5_10)."""

    cas: tuple[IbstatCa, ...]


@dataclass(frozen=True, slots=True)
class IbstatusPort:
    """One port block of `ibstatus`; default_gid is None when it reads 'unknown' (Ethernet VF)."""

    device: str
    port: int
    default_gid: str | None
    base_lid: int
    sm_lid: int
    state: str
    state_code: int | None
    phys_state: str
    phys_state_code: int | None
    rate: IbRate
    link_layer: str | None


@dataclass(frozen=True, slots=True)
class IbstatusReport:
    """All ports, sorted by (device, port)."""

    ports: tuple[IbstatusPort, ...]


def _int(tool: str, where: str, key: str, value: str) -> int:
    try:
        return int(value, 0)
    except ValueError:
        raise ParseError(tool, f"{where}: {key} {value!r} is not an integer") from None


def _build_port(where: str, num: int, kv: dict[str, str]) -> IbstatPort:
    missing = [k for k in _PORT_REQUIRED if k not in kv]
    if missing:
        raise ParseError("ibstat", f"{where} port {num}: missing {', '.join(missing)} (truncated?)")
    m = _IBSTAT_RATE_RE.match(kv["Rate"])
    rate = number(m["rate"]) if m else None
    if m is None or rate is None:
        raise ParseError("ibstat", f"{where} port {num}: unreadable Rate {kv['Rate']!r}")
    state, state_code = state_with_code(kv["State"], physical=False)
    phys, phys_code = state_with_code(kv["Physical state"], physical=True)
    guid = kv.get("Port GUID")
    return IbstatPort(
        port=num,
        state=state,
        state_code=state_code,
        phys_state=phys,
        phys_state_code=phys_code,
        rate_gbps=rate,
        rate_note=m["note"],
        base_lid=_int("ibstat", where, "Base lid", kv["Base lid"]),
        lmc=_int("ibstat", where, "LMC", kv["LMC"]),
        sm_lid=_int("ibstat", where, "SM lid", kv["SM lid"]),
        capability_mask=kv["Capability mask"],
        port_guid=canonical_guid(guid) if guid is not None else None,
        link_layer=kv.get("Link layer") or None,
    )


class _Ca:
    """Mutable accumulator for one CA block while scanning."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.kv: dict[str, str] = {}
        self.ports: list[tuple[int, dict[str, str]]] = []

    def build(self) -> IbstatCa:
        where = f"CA {self.name!r}"
        ports = tuple(_build_port(where, num, kv) for num, kv in self.ports)
        if not ports:
            raise ParseError("ibstat", f"{where}: no 'Port N:' block (truncated?)")
        nports_raw = self.kv.get("Number of ports")
        nports = _int("ibstat", where, "Number of ports", nports_raw) if nports_raw else None
        if nports is not None and nports != len(ports):
            raise ParseError(
                "ibstat", f"{where}: says {nports} ports but {len(ports)} listed (truncated?)"
            )
        guid = self.kv.get("Node GUID")
        sys_guid = self.kv.get("System image GUID")
        return IbstatCa(
            name=self.name,
            ca_type=self.kv.get("CA type") or None,
            num_ports=nports,
            fw_version=self.kv.get("Firmware version") or None,
            hw_version=self.kv.get("Hardware version") or None,
            node_guid=canonical_guid(guid) if guid else None,
            system_image_guid=canonical_guid(sys_guid) if sys_guid else None,
            ports=tuple(sorted(ports, key=lambda p: p.port)),
        )


def parse_ibstat(text: str) -> IbstatReport:
    """Parse `ibstat` (all CAs, tabs or spaces); an `ibpanic:` line raises ParseError with it."""
    cas: list[_Ca] = []
    port_kv: dict[str, str] | None = None
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(("ibpanic:", "ibwarn:", "ibstat: iberror")):
            # ibstat exits 255 after ibpanic (ibstat__a100-azure-...-ibpanic-exit255.txt).
            raise ParseError("ibstat", f"ibstat reported an error: {line}")
        if m := _CA_RE.match(line):
            cas.append(_Ca(m["name"]))
            port_kv = None
            continue
        if not cas:
            raise ParseError("ibstat", f"line {lineno}: {line[:60]!r} before any CA header")
        ca = cas[-1]
        if m := _PORT_RE.match(line):
            port_kv = {}
            ca.ports.append((int(m["num"]), port_kv))
            continue
        kv = _KV_RE.match(line)
        if kv is None:
            raise ParseError("ibstat", f"line {lineno}: unrecognised line {line[:60]!r}")
        key, value = kv["key"], kv["value"].strip()
        if port_kv is not None and key in _PORT_KEYS:
            port_kv[key] = value
        elif port_kv is None and key in _CA_KEYS:
            ca.kv[key] = value
        else:
            raise ParseError("ibstat", f"line {lineno}: unexpected field {key!r} in {ca.name}")
    if not cas:
        raise ParseError("ibstat", "no \"CA '...'\" header found")
    names = [c.name for c in cas]
    if len(set(names)) != len(names):
        raise ParseError("ibstat", "the same CA is listed twice")
    built = [c.build() for c in cas]
    return IbstatReport(cas=tuple(sorted(built, key=lambda c: natural_key(c.name))))


def _build_status_port(dev: str, port: int, kv: dict[str, str]) -> IbstatusPort:
    where = f"{dev} port {port}"
    missing = [k for k in ("state", "phys state", "rate", "base lid", "sm lid") if k not in kv]
    if missing:
        raise ParseError("ibstatus", f"{where}: missing {', '.join(missing)} (truncated?)")
    rate = decode_rate(kv["rate"])
    if rate is None:
        raise ParseError("ibstatus", f"{where}: unreadable rate {kv['rate']!r}")
    state, state_code = state_with_code(kv["state"], physical=False)
    phys, phys_code = state_with_code(kv["phys state"], physical=True)
    gid = kv.get("default gid")
    return IbstatusPort(
        device=dev,
        port=port,
        default_gid=gid if gid and gid != "unknown" else None,
        base_lid=_int("ibstatus", where, "base lid", kv["base lid"]),
        sm_lid=_int("ibstatus", where, "sm lid", kv["sm lid"]),
        state=state,
        state_code=state_code,
        phys_state=phys,
        phys_state_code=phys_code,
        rate=rate,
        link_layer=kv.get("link_layer") or None,
    )


def parse_ibstatus(text: str) -> IbstatusReport:
    """Parse `ibstatus`: one 'Infiniband device ... status:' block per port."""
    blocks: list[tuple[str, int, dict[str, str]]] = []
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if m := _IBSTATUS_HDR_RE.match(line):
            blocks.append((m["dev"], int(m["port"]), {}))
            continue
        key, sep, value = line.partition(":")
        if not blocks or not sep:
            raise ParseError("ibstatus", f"line {lineno}: unrecognised line {line[:60]!r}")
        blocks[-1][2][key.strip()] = value.strip()
    if not blocks:
        raise ParseError("ibstatus", "no \"Infiniband device '...' port N status:\" header found")
    ports = [_build_status_port(dev, port, kv) for dev, port, kv in blocks]
    keys = [(p.device, p.port) for p in ports]
    if len(set(keys)) != len(keys):
        raise ParseError("ibstatus", "the same port is listed twice")
    return IbstatusReport(ports=tuple(sorted(ports, key=lambda p: (natural_key(p.device), p.port))))
