"""Parse `nvidia-smi topo -m` / `topo --matrix` (GPU/NIC connection matrix and affinities)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError

TOOL = "nvidia-smi topo -m"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Attribute columns after the device columns; "GPU NUMA ID" appears with driver >= 535.
_ATTRIBUTES = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_DEVICE = re.compile(r"^(?:GPU\d+|NIC\d+|mlx\d+_\d+|[A-Za-z][A-Za-z0-9_]*\d)$")
# Connection kinds of the legend; SOC is the pre-NODE name of SYS on old drivers.
_KINDS = frozenset({"X", "SYS", "NODE", "PHB", "PXB", "PIX", "SOC"})
_NVLINK = re.compile(r"^NV(\d+)$")
_LEGEND = re.compile(r"^(?P<key>\S+)\s*=\s*(?P<text>.+)$")
_NIC_LEGEND = re.compile(r"^(?P<nic>NIC\d+):\s*(?P<name>\S+)$")
_CPU_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True, slots=True)
class TopoRow:
    """One matrix row: connection to every column device (X = self, NV12, PIX, SYS, ...).

    Affinity fields are None on NIC rows and where nvidia-smi prints N/A;
    `cpu_affinity_ranges` are inclusive (first, last) CPU numbers of `cpu_affinity`.
    """

    device: str
    links: dict[str, str]
    cpu_affinity: str | None
    cpu_affinity_ranges: tuple[tuple[int, int], ...] | None
    numa_affinity: int | None
    gpu_numa_id: int | None


@dataclass(frozen=True, slots=True)
class TopoMatrix:
    """The whole `topo -m` output.

    `devices` are the column devices in order (GPUn, then NICn or mlx5_n on old drivers);
    `nic_names` maps NICn to its HCA name from the NIC Legend; `legend` maps each
    connection kind (`NV#`, `PIX`, ...) to its explanation.
    """

    devices: tuple[str, ...]
    rows: tuple[TopoRow, ...]
    nic_names: dict[str, str]
    legend: dict[str, str]


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Parse `nvidia-smi topo -m`; tabs or spaces, ANSI underline on the header row."""
    lines = [
        line.rstrip()
        for line in _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    ]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        raise ParseError(TOOL, "empty output")
    devices, attributes = _header(lines[0])
    rows: list[TopoRow] = []
    legend: dict[str, str] = {}
    nic_names: dict[str, str] = {}
    section = "matrix"
    for line in lines[1:]:
        stripped = line.strip()
        if not stripped:
            section = "after" if section == "matrix" else section
            continue
        if stripped in ("Legend:", "NIC Legend:"):
            section = stripped
        elif section == "matrix":
            rows.append(_row(stripped, devices, attributes))
        elif section == "Legend:" and (match := _LEGEND.match(stripped)):
            legend[match["key"]] = match["text"]
        elif section == "NIC Legend:" and (match := _NIC_LEGEND.match(stripped)):
            nic_names[match["nic"]] = match["name"]
        else:
            raise ParseError(TOOL, f"unrecognized line {stripped[:60]!r}")
    _check(devices, rows, legend, nic_names)
    return TopoMatrix(devices=devices, rows=tuple(rows), nic_names=nic_names, legend=legend)


def _header(line: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    text = line.strip()
    attributes: list[str] = []
    # Multi-word column names come last; cut them off, then the rest is one word per device.
    while True:
        for name in _ATTRIBUTES:
            if text.endswith(name):
                attributes.insert(0, name)
                text = text[: -len(name)].rstrip()
                break
        else:
            break
    devices = tuple(text.split())
    if not devices or not all(_DEVICE.match(d) for d in devices) or "GPU0" not in devices:
        raise ParseError(TOOL, f"first line is not a topology header: {line.strip()[:60]!r}")
    return devices, tuple(attributes)


def _row(line: str, devices: tuple[str, ...], attributes: tuple[str, ...]) -> TopoRow:
    # Splitting on any whitespace also drops the empty cell the tab-separated output leaves
    # between 'NUMA Affinity' and 'GPU NUMA ID' (corpus: topo-m__h100-8gpu-vm-tabs-no-nics).
    cells = line.split()
    device, values = cells[0], cells[1:]
    if device not in devices:
        raise ParseError(TOOL, f"row {device!r} is not one of the column devices")
    if len(values) not in (len(devices), len(devices) + len(attributes)):
        raise ParseError(TOOL, f"row {device} has {len(values)} cells for {len(devices)} devices")
    extra = dict(zip(attributes, values[len(devices) :], strict=False))
    cpus = _value(extra.get("CPU Affinity"))
    return TopoRow(
        device=device,
        links=dict(zip(devices, values[: len(devices)], strict=True)),
        cpu_affinity=cpus,
        cpu_affinity_ranges=_ranges(cpus),
        numa_affinity=_int(extra.get("NUMA Affinity")),
        gpu_numa_id=_int(extra.get("GPU NUMA ID")),
    )


def _value(cell: str | None) -> str | None:
    return None if cell is None or cell == "N/A" else cell


def _int(cell: str | None) -> int | None:
    value = _value(cell)
    return int(value) if value is not None and value.isdigit() else None


def _ranges(cpus: str | None) -> tuple[tuple[int, int], ...] | None:
    if cpus is None:
        return None
    ranges = []
    for part in cpus.split(","):
        match = _CPU_RANGE.match(part)
        if match is None:
            raise ParseError(TOOL, f"CPU affinity {cpus!r} is not a CPU list")
        first = int(match.group(1))
        ranges.append((first, int(match.group(2) or first)))
    return tuple(ranges)


def _check(
    devices: tuple[str, ...], rows: list[TopoRow], legend: dict[str, str], nics: dict[str, str]
) -> None:
    seen = [row.device for row in rows]
    if sorted(seen) != sorted(devices):
        missing = [d for d in devices if d not in seen]
        raise ParseError(TOOL, f"matrix rows missing for {missing}: truncated?")
    kinds = _KINDS | set(legend)
    for row in rows:
        if row.links[row.device] != "X":
            raise ParseError(TOOL, f"{row.device} is not X (self) on the diagonal")
        for peer, kind in row.links.items():
            if kind not in kinds and not _NVLINK.match(kind):
                raise ParseError(TOOL, f"{row.device}->{peer}: unknown connection {kind!r}")
    nic_columns = [d for d in devices if d.startswith("NIC")]
    if nic_columns and sorted(nics) != sorted(nic_columns):
        raise ParseError(TOOL, "NICn columns without a complete 'NIC Legend' block: truncated?")
