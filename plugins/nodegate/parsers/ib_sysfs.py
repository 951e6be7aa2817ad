"""Parser for /sys/class/infiniband read as a `grep -H -r .` listing (or a ttar fixture tree).

The gather command (SYSFS_GATHER_COMMAND) prints one `relative/path:value` line per sysfs
file line, e.g. `mlx5_0/ports/1/rate:400 Gb/sec (4X NDR)`. The same facts come out of the
ttar trees that prometheus/procfs and node_exporter keep as fixtures (`Path:`/`Lines:` records).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from nodegate.core.errors import ParseError
from nodegate.parsers.ib_rate import IbRate, canonical_guid, decode_rate, state_with_code
from nodegate.parsers.text import clean_lines, natural_key

_TOOL = "ib_sysfs"

# The device entries are symlinks; naming them on the command line makes grep -r follow them
# (it does not follow links it meets while recursing, so device/, gids/ etc. stay out).
SYSFS_GATHER_COMMAND = (
    "cd /sys/class/infiniband && grep -H -r . "
    "*/fw_ver */board_id */node_desc */hca_type */node_guid */sys_image_guid "
    "*/ports/*/state */ports/*/phys_state */ports/*/rate */ports/*/link_layer "
    "*/ports/*/lid */ports/*/sm_lid */ports/*/counters */ports/*/hw_counters 2>/dev/null"
)

# Counters that read this string have no PMA behind them (e.g. Intel i40iw iWARP); procfs
# skips them (sysfs/class_infiniband.go, node_exporter#966). They become None, flagged.
NO_PMA = "N/A (no PMA)"

_DEVICE_FILES = ("fw_ver", "board_id", "node_desc", "hca_type", "node_guid", "sys_image_guid")
_PORT_FILES = ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid")
_COUNTER_DIRS = ("counters", "hw_counters", "counters_ext")
_PATH_RE = re.compile(r"^/?[\w.\-]+(?:/[\w.\-]+)+$")
_TTAR_SEP = "# ttar"
# Paths repeat on every node of a fleet (a node lists ~1,000); the caches that read them are
# bounded since node output is untrusted.
_PATH_CACHE_SIZE = 8192


@dataclass(frozen=True, slots=True)
class IbSysfsPort:
    """One port directory.

    counters/* keep their sysfs names and raw values; note port_rcv_data/port_xmit_data count
    4-octet words (procfs multiplies them by 4). counters_ext/* exist only before kernel 4.5.
    """

    port: int
    state: str
    state_code: int | None
    phys_state: str
    phys_state_code: int | None
    rate: IbRate
    link_layer: str | None
    lid: int | None
    sm_lid: int | None
    counters: Mapping[str, int | None]
    hw_counters: Mapping[str, int | None]
    counters_ext: Mapping[str, int | None]
    counters_no_pma: bool  # some counter read 'N/A (no PMA)' and is None


@dataclass(frozen=True, slots=True)
class IbSysfsDevice:
    """One /sys/class/infiniband/<dev> entry; board_id is the PSID on Mellanox/NVIDIA HCAs."""

    name: str
    fw_ver: str | None
    board_id: str | None
    node_desc: str | None
    hca_type: str | None
    node_guid: str | None
    sys_image_guid: str | None
    ports: tuple[IbSysfsPort, ...]


@dataclass(frozen=True, slots=True)
class IbSysfs:
    """All devices, sorted naturally by name."""

    devices: tuple[IbSysfsDevice, ...]


@lru_cache(maxsize=_PATH_CACHE_SIZE)
def _is_sysfs_path(path: str) -> bool:
    return _PATH_RE.match(path) is not None


def _grep_records(lines: list[str]) -> Iterator[tuple[str, str]]:
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        path, sep, value = line.partition(":")
        if not sep or not _is_sysfs_path(path):
            raise ParseError(_TOOL, f"line {lineno}: not a 'path:value' line: {line[:60]!r}")
        yield path, value


def _ttar_records(lines: list[str]) -> Iterator[tuple[str, str]]:
    """Records of a ttar archive: `Path:` + `Lines: N` + N lines (last one may end in EOF)."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line or line.startswith((_TTAR_SEP, "Mode: ", "Directory: ")):
            i += 1
            continue
        if not line.startswith("Path: "):
            raise ParseError(_TOOL, f"ttar line {i + 1}: unexpected {line[:60]!r}")
        path = line[len("Path: ") :].strip()
        header = lines[i + 1] if i + 1 < len(lines) else ""
        if header.startswith("SymlinkTo: "):
            i += 2
            continue
        m = re.fullmatch(r"Lines: (\d+)", header)
        if m is None:
            raise ParseError(_TOOL, f"ttar line {i + 2}: expected 'Lines: N' after {path!r}")
        count = int(m.group(1))
        body = lines[i + 2 : i + 2 + count]
        if len(body) != count:
            raise ParseError(_TOOL, f"ttar record {path!r} is cut short (truncated?)")
        if body and body[-1].endswith("EOF"):
            body[-1] = body[-1][: -len("EOF")]  # ttar marks a file without trailing newline
        yield path, "\n".join(body)
        i += 2 + count


def _relative(path: str) -> list[str]:
    marker = "class/infiniband/"
    if marker in path:
        path = path.split(marker, 1)[1]
    return [p for p in path.split("/") if p]


# Where a record's value goes: (device, None, -1, file) for a device file, (device, group or
# None, port, file) for a port file (group None: ports/<n>/<file>; file "" when unused).
_Slot = tuple[str, str | None, int, str]


@lru_cache(maxsize=_PATH_CACHE_SIZE)
def _slot(path: str) -> _Slot | None:
    parts = _relative(path)
    if len(parts) == 2 and parts[1] in _DEVICE_FILES:
        return parts[0], None, -1, parts[1]
    if len(parts) >= 4 and parts[1] == "ports" and parts[2].isascii() and parts[2].isdigit():
        num = int(parts[2])
        if len(parts) == 4 and parts[3] in _PORT_FILES:
            return parts[0], None, num, parts[3]
        if len(parts) == 5 and parts[3] in _COUNTER_DIRS:
            return parts[0], parts[3], num, parts[4]
        return parts[0], None, num, ""  # the port exists, the file is not read
    return None


class _Port:
    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.groups: dict[str, dict[str, str]] = {g: {} for g in _COUNTER_DIRS}


def _counter(where: str, name: str, value: str) -> int | None:
    if value == NO_PMA:
        return None
    try:
        return int(value, 0)
    except ValueError:
        raise ParseError(_TOOL, f"{where}: counter {name} reads {value!r}") from None


def _optional_int(where: str, name: str, value: str | None) -> int | None:
    return None if value is None else _counter(where, name, value)


def _build_port(dev: str, num: int, port: _Port) -> IbSysfsPort:
    where = f"{dev} port {num}"
    files = port.files
    missing = [f for f in ("state", "phys_state", "rate") if f not in files]
    if missing:
        raise ParseError(_TOOL, f"{where}: no {', '.join(missing)} file (truncated?)")
    rate = decode_rate(files["rate"])
    if rate is None:
        raise ParseError(_TOOL, f"{where}: unreadable rate {files['rate']!r}")
    state, state_code = state_with_code(files["state"], physical=False)
    phys, phys_code = state_with_code(files["phys_state"], physical=True)
    groups = {
        g: {k: _counter(where, k, v) for k, v in sorted(vals.items())}
        for g, vals in port.groups.items()
    }
    no_pma = any(NO_PMA in vals.values() for vals in port.groups.values())
    return IbSysfsPort(
        port=num,
        state=state,
        state_code=state_code,
        phys_state=phys,
        phys_state_code=phys_code,
        rate=rate,
        link_layer=files.get("link_layer") or None,
        lid=_optional_int(where, "lid", files.get("lid")),
        sm_lid=_optional_int(where, "sm_lid", files.get("sm_lid")),
        counters=groups["counters"],
        hw_counters=groups["hw_counters"],
        counters_ext=groups["counters_ext"],
        counters_no_pma=no_pma,
    )


def parse_ib_sysfs(text: str) -> IbSysfs:
    """Parse the sysfs listing (grep `path:value` lines or a ttar tree) into per-port facts."""
    lines = clean_lines(text)
    is_ttar = any(line.startswith((_TTAR_SEP, "Path: ")) for line in lines[:5])
    records = _ttar_records(lines) if is_ttar else _grep_records(lines)
    devices: dict[str, dict[str, str]] = {}
    ports: dict[str, dict[int, _Port]] = {}
    for path, value in records:
        slot = _slot(path)
        if slot is None:
            continue
        dev, group, num, name = slot
        value = value.strip()
        if num < 0:
            files = devices.setdefault(dev, {})
            files[name] = f"{files[name]}\n{value}" if name in files else value
            continue
        dev_ports = ports.get(dev)
        if dev_ports is None:
            dev_ports = ports[dev] = {}
            devices.setdefault(dev, {})
        port = dev_ports.get(num)
        if port is None:
            port = dev_ports[num] = _Port()
        if group is not None:
            port.groups[group][name] = value
        elif name:
            port.files[name] = value
    if not devices:
        raise ParseError(_TOOL, "no /sys/class/infiniband/<dev>/... entries found")
    built: list[IbSysfsDevice] = []
    for name in sorted(devices, key=natural_key):
        files = devices[name]
        dev_ports = ports.get(name, {})
        if not dev_ports:
            raise ParseError(_TOOL, f"{name}: no ports/<n>/ files (truncated?)")
        guid = files.get("node_guid")
        sys_guid = files.get("sys_image_guid")
        built.append(
            IbSysfsDevice(
                name=name,
                fw_ver=files.get("fw_ver") or None,
                board_id=files.get("board_id") or None,
                node_desc=files.get("node_desc") or None,
                hca_type=files.get("hca_type") or None,
                node_guid=canonical_guid(guid) if guid else None,
                sys_image_guid=canonical_guid(sys_guid) if sys_guid else None,
                ports=tuple(_build_port(name, n, dev_ports[n]) for n in sorted(dev_ports)),
            )
        )
    return IbSysfs(devices=tuple(built))
