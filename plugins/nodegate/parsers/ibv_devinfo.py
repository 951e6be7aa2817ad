"""Parsers for `ibv_devinfo` (plain and `-v`) and `ibv_devices` (rdma-core)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.ib_rate import (
    IbRate,
    canonical_guid,
    rate_from_parts,
    split_coded,
    state_with_code,
)
from nodegate.parsers.text import clean_lines, natural_key

_TOOL = "ibv_devinfo"
# Continuation lines of -v flag lists (device_cap_flags, *_odp_caps) sit at 5 tabs / 40 columns,
# deeper than any key (device keys 1 tab, port keys 3 tabs); see ibv_devinfo__v-cx4-...-excerpt.
_CONTINUATION_COLUMN = 32
_NESTED_COLUMN = 16  # members of -v groups (`rss_caps:` -> `max_rwq_indirection_tables:`)
_GID_KEY_RE = re.compile(r"^GID\[\s*(?P<idx>\d+)\]$")
_PLAIN_PORT_KEYS = ("state", "active_mtu", "link_layer")
# Keys only `ibv_devinfo -v` prints; their presence makes phys_state required per port.
_VERBOSE_MARKERS = ("max_mr_size", "max_qp", "device_cap_flags")
_DEVICE_FIELDS = {
    "transport",
    "fw_ver",
    "node_guid",
    "sys_image_guid",
    "vendor_id",
    "vendor_part_id",
    "hw_ver",
    "board_id",
    "phys_port_cnt",
    "device_cap_flags",
}
_PORT_FIELDS = {
    "state",
    "max_mtu",
    "active_mtu",
    "sm_lid",
    "port_lid",
    "port_lmc",
    "link_layer",
    "active_width",
    "active_speed",
    "phys_state",
}


@dataclass(frozen=True, slots=True)
class IbvGid:
    """One `GID[n]:` line of `ibv_devinfo -v`; gid_type like 'RoCE v2' when printed."""

    index: int
    gid: str
    gid_type: str | None


@dataclass(frozen=True, slots=True)
class IbvPort:
    """One port; rate (width/speed/lane) only with `-v`, which prints active_width/speed."""

    port: int
    state: str
    state_code: int | None
    max_mtu_bytes: int | None
    active_mtu_bytes: int | None
    sm_lid: int | None
    port_lid: int | None
    port_lmc: int | None
    link_layer: str | None
    phys_state: str | None
    phys_state_code: int | None
    rate: IbRate | None
    gids: tuple[IbvGid, ...]
    extra: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class IbvDevice:
    """One hca_id block; board_id is the PSID; GUIDs as 16 lowercase hex digits."""

    hca_id: str
    transport: str | None
    fw_ver: str | None
    node_guid: str | None
    sys_image_guid: str | None
    vendor_id: str | None
    vendor_part_id: int | None
    hw_ver: str | None
    board_id: str | None
    phys_port_cnt: int
    device_cap_flags_mask: str | None
    device_cap_flags: tuple[str, ...]
    flag_lists: Mapping[str, tuple[str, ...]]  # other -v keys listing names, e.g. rc_odp_caps
    extra: Mapping[str, str]  # other -v scalar keys (max_qp, rss_caps.rx_hash_function, ...)
    notes: tuple[str, ...]  # -v remarks without a value, e.g. 'core clock not supported'
    ports: tuple[IbvPort, ...]


@dataclass(frozen=True, slots=True)
class IbvDevinfoReport:
    """All devices, sorted naturally by hca_id."""

    devices: tuple[IbvDevice, ...]


@dataclass(frozen=True, slots=True)
class IbvDevicesEntry:
    """One row of `ibv_devices`."""

    device: str
    node_guid: str


@dataclass(frozen=True, slots=True)
class IbvDevicesReport:
    """All rows of `ibv_devices`, in printed order."""

    devices: tuple[IbvDevicesEntry, ...]


class _Block:
    """Key/value accumulator for one device or port block."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.kv: dict[str, str] = {}
        self.lists: dict[str, list[str]] = {}
        self.order: list[str] = []
        self.notes: list[str] = []

    def put(self, key: str, value: str) -> None:
        self.kv[key] = value
        self.order.append(key)


def _int(where: str, key: str, value: str | None) -> int | None:
    if value is None:
        return None
    code, name = split_coded(value)  # `4096 (5)` -> name '4096'
    try:
        return int(name, 0)
    except ValueError:
        raise ParseError(_TOOL, f"{where}: {key} {value!r} is not a number") from None


def _build_port(dev: str, block: _Block, verbose: bool) -> IbvPort:
    where = f"{dev} port {block.name}"
    kv = block.kv
    required = (*_PLAIN_PORT_KEYS, "phys_state") if verbose else _PLAIN_PORT_KEYS
    missing = [k for k in required if k not in kv]
    if missing:
        raise ParseError(_TOOL, f"{where}: missing {', '.join(missing)} (truncated?)")
    state, state_code = state_with_code(kv["state"], physical=False)
    phys: str | None = None
    phys_code: int | None = None
    if "phys_state" in kv:
        phys, phys_code = state_with_code(kv["phys_state"], physical=True)
    gids: list[IbvGid] = []
    extra: dict[str, str] = {}
    for key in block.order:
        m = _GID_KEY_RE.match(key)
        if m:
            gid, _, gtype = kv[key].partition(",")
            gids.append(IbvGid(int(m["idx"]), gid.strip(), gtype.strip() or None))
        elif key not in _PORT_FIELDS:
            extra[key] = kv[key]
    return IbvPort(
        port=int(block.name),
        state=state,
        state_code=state_code,
        max_mtu_bytes=_int(where, "max_mtu", kv.get("max_mtu")),
        active_mtu_bytes=_int(where, "active_mtu", kv.get("active_mtu")),
        sm_lid=_int(where, "sm_lid", kv.get("sm_lid")),
        port_lid=_int(where, "port_lid", kv.get("port_lid")),
        port_lmc=_int(where, "port_lmc", kv.get("port_lmc")),
        link_layer=kv.get("link_layer") or None,
        phys_state=phys,
        phys_state_code=phys_code,
        rate=rate_from_parts(kv.get("active_width"), kv.get("active_speed")),
        gids=tuple(gids),
        extra=extra,
    )


def _build_device(block: _Block, ports: list[_Block]) -> IbvDevice:
    kv = block.kv
    where = f"hca_id {block.name}"
    if "phys_port_cnt" not in kv:
        raise ParseError(_TOOL, f"{where}: no phys_port_cnt line (truncated?)")
    count = _int(where, "phys_port_cnt", kv["phys_port_cnt"])
    if count != len(ports):
        raise ParseError(
            _TOOL, f"{where}: phys_port_cnt is {count} but {len(ports)} port blocks (truncated?)"
        )
    verbose = any(k in kv for k in _VERBOSE_MARKERS)
    built = tuple(_build_port(block.name, p, verbose) for p in ports)
    transport = kv.get("transport")
    node_guid = kv.get("node_guid")
    sys_guid = kv.get("sys_image_guid")
    return IbvDevice(
        hca_id=block.name,
        transport=split_coded(transport)[1] if transport else None,
        fw_ver=kv.get("fw_ver") or None,
        node_guid=canonical_guid(node_guid) if node_guid else None,
        sys_image_guid=canonical_guid(sys_guid) if sys_guid else None,
        vendor_id=kv.get("vendor_id") or None,
        vendor_part_id=_int(where, "vendor_part_id", kv.get("vendor_part_id")),
        hw_ver=kv.get("hw_ver") or None,
        board_id=kv.get("board_id") or None,
        phys_port_cnt=len(built),
        device_cap_flags_mask=kv.get("device_cap_flags") or None,
        device_cap_flags=tuple(block.lists.get("device_cap_flags", ())),
        flag_lists={k: tuple(v) for k, v in block.lists.items() if k != "device_cap_flags"},
        extra={k: kv[k] for k in block.order if k not in _DEVICE_FIELDS and kv[k]},
        notes=tuple(block.notes),
        ports=tuple(sorted(built, key=lambda p: p.port)),
    )


def parse_ibv_devinfo(text: str) -> IbvDevinfoReport:
    """Parse `ibv_devinfo` / `ibv_devinfo -v`; every device must list phys_port_cnt ports."""
    devices: list[tuple[_Block, list[_Block]]] = []
    current: _Block | None = None
    last_key: tuple[_Block, str] | None = None
    parent: str | None = None  # -v groups like `rss_caps:` whose members sit one tab deeper
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        expanded = raw.expandtabs(8)
        indent = len(expanded) - len(expanded.lstrip())
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if sep and key == "hca_id":
            current = _Block(value)
            devices.append((current, []))
            last_key, parent = None, None
            continue
        if current is None:
            raise ParseError(_TOOL, f"no 'hca_id:' line; output starts with {line[:80]!r}")
        if indent >= _CONTINUATION_COLUMN and last_key is not None:
            block, lkey = last_key
            block.lists.setdefault(lkey, []).append(line)
            continue
        in_ports = bool(devices[-1][1])
        if not sep or not key:
            if in_ports:
                raise ParseError(_TOOL, f"line {lineno}: unrecognised line {line[:60]!r}")
            # -v prints bare remarks such as `tag matching not supported`.
            current.notes.append(line)
            last_key = None
            continue
        if key == "port":
            if not value.isdigit():
                raise ParseError(_TOOL, f"line {lineno}: bad port number {value!r}")
            current = _Block(value)
            devices[-1][1].append(current)
            last_key, parent = None, None
            continue
        if not in_ports and indent >= _NESTED_COLUMN and parent is not None:
            key = f"{parent}.{key}"
        elif not in_ports:
            parent = key if not value else None
        current.put(key, value)
        last_key = (current, key)
    if not devices:
        raise ParseError(_TOOL, "no 'hca_id:' line found")
    built = [_build_device(dev, ports) for dev, ports in devices]
    return IbvDevinfoReport(devices=tuple(sorted(built, key=lambda d: natural_key(d.hca_id))))


def parse_ibv_devices(text: str) -> IbvDevicesReport:
    """Parse `ibv_devices`: a 'device / node GUID' header, a dashes row, then one row per device."""
    lines = [line.strip() for line in clean_lines(text) if line.strip()]
    if len(lines) < 2 or lines[0].split() != ["device", "node", "GUID"]:
        raise ParseError("ibv_devices", "no 'device  node GUID' header")
    if set(lines[1].replace(" ", "").replace("\t", "")) != {"-"}:
        raise ParseError("ibv_devices", "no dashes row under the header")
    rows: list[IbvDevicesEntry] = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != 2:
            raise ParseError("ibv_devices", f"unrecognised row {line[:60]!r}")
        guid = canonical_guid(parts[1])
        if guid is None:
            raise ParseError("ibv_devices", f"row {line[:60]!r}: {parts[1]!r} is not a GUID")
        rows.append(IbvDevicesEntry(device=parts[0], node_guid=guid))
    return IbvDevicesReport(devices=tuple(rows))
