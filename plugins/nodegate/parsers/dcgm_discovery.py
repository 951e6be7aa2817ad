"""Parse `dcgmi discovery -l`: the GPUs (PCI address, UUID), NVSwitches and CPUs DCGM sees."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.dcgm import TABLE_BORDER, dcgmi_lines
from nodegate.parsers.pci import normalize_bdf

TOOL = "dcgmi"

_FOUND = re.compile(r"^(?P<n>\d+) (?P<kind>[A-Za-z]+?)(?:es|s)? found\.$")


@dataclass(frozen=True, slots=True)
class DcgmGpu:
    """One GPU row of `dcgmi discovery -l`."""

    gpu_id: int
    name: str | None
    bdf: str | None
    bdf_raw: str | None
    uuid: str | None


@dataclass(frozen=True, slots=True)
class DcgmDiscovery:
    """Entities DCGM sees; ids only for NVSwitches and CPUs."""

    gpus: tuple[DcgmGpu, ...]
    nvswitch_ids: tuple[int, ...]
    cpu_ids: tuple[int, ...]


def parse_dcgmi_discovery(text: str) -> DcgmDiscovery:
    """Parse `dcgmi discovery -l`; each `N <kind> found.` count must match its table."""
    rows: dict[str, list[dict[str, str]]] = {}
    counts: dict[str, int] = {}
    kind: str | None = None
    for no, line in enumerate(dcgmi_lines(text), 1):
        if not line.strip() or TABLE_BORDER.match(line) or re.fullmatch(r"\+-+\+", line):
            continue
        if fm := _FOUND.match(line.strip()):
            kind = fm["kind"].lower()
            counts[kind], rows[kind] = int(fm["n"]), []
            continue
        if kind is None or not (line.startswith("|") and line.endswith("|")):
            raise ParseError(TOOL, f"line {no}: not part of a discovery table: {line[:80]!r}")
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].isdigit():
            rows[kind].append({"id": cells[0]})
        elif cells[0] and not rows[kind]:
            continue  # column header (`GPU ID | Device Information`)
        elif not rows[kind]:
            raise ParseError(TOOL, f"line {no}: detail row before any entry")
        if len(cells) > 1 and ":" in cells[1]:
            key, _, value = cells[1].partition(":")
            rows[kind][-1][key.strip()] = value.strip()
    if "gpu" not in counts:
        raise ParseError(TOOL, "no 'N GPUs found.' line")
    for k, n in counts.items():
        if len(rows[k]) != n:
            raise ParseError(TOOL, f"{n} {k}(s) announced but {len(rows[k])} listed (truncated?)")
    gpus = tuple(
        DcgmGpu(
            int(r["id"]),
            r.get("Name"),
            normalize_bdf(r["PCI Bus ID"]) if "PCI Bus ID" in r else None,
            r.get("PCI Bus ID"),
            r.get("Device UUID"),
        )
        for r in rows["gpu"]
    )
    ids = {k: tuple(int(r["id"]) for r in v) for k, v in rows.items()}
    return DcgmDiscovery(gpus, ids.get("nvswitch", ()), ids.get("cpu", ()))
