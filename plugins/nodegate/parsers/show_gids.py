"""Parser for `show_gids` (mlnx-tools / MLNX_OFED): every GID of every RDMA port, read by the
script from /sys/class/infiniband/<dev>/ports/<port>/{gids,gid_attrs/types,gid_attrs/ndevs}.

Columns `DEV PORT INDEX GID IPv4 VER DEV`, tab- or space-separated (corpus captures show both);
IPv4 is empty for non-IPv4 GIDs and the netdev is empty for a port without one; a footer
`n_gids_found=N` closes the table (a table without it, or with another count, is cut).

>>> t = parse_show_gids("DEV\\tPORT\\tINDEX\\tGID\\tIPv4\\tVER\\tDEV\\n---\\n"
...     "mlx5_0\\t1\\t3\\t0000:0000:0000:0000:0000:ffff:0a64:0001\\t10.100.0.1\\tv2\\tens1\\n"
...     "n_gids_found=1\\n")
>>> t.entries[0].roce_version, t.entries[0].ipv4
(2, '10.100.0.1')
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_TOOL = "show_gids"
_GID = re.compile(r"^[0-9a-f]{4}(?::[0-9a-f]{4}){7}$")
_FOOTER = re.compile(r"^n_gids_found=(?P<n>\d+)$")


@dataclass(frozen=True, slots=True)
class GidEntry:
    """One GID table entry of one port."""

    device: str
    port: int
    index: int
    gid: str
    ipv4: str | None
    roce_version: int  # 1 (RoCE v1 / IB) or 2 (RoCE v2), from VER v1/v2
    netdev: str | None


@dataclass(frozen=True, slots=True)
class GidTable:
    entries: tuple[GidEntry, ...]

    def at(self, device: str, port: int, index: int) -> GidEntry | None:
        return next(
            (e for e in self.entries if (e.device, e.port, e.index) == (device, port, index)),
            None,
        )


def _entry(lineno: int, tokens: list[str]) -> GidEntry:
    if len(tokens) < 5 or not tokens[1].isdigit() or not tokens[2].isdigit():
        raise ParseError(_TOOL, f"line {lineno}: unrecognised row {' '.join(tokens)[:80]!r}")
    dev, port, index, gid, rest = tokens[0], int(tokens[1]), int(tokens[2]), tokens[3], tokens[4:]
    if not _GID.match(gid):
        raise ParseError(_TOOL, f"line {lineno}: {gid!r} is not a GID")
    ipv4 = None
    if rest and rest[0] not in ("v1", "v2"):
        try:
            ipv4 = str(ipaddress.IPv4Address(rest[0]))
        except ValueError:
            raise ParseError(_TOOL, f"line {lineno}: {rest[0]!r} is not an IPv4 address") from None
        rest = rest[1:]
    if not rest or rest[0] not in ("v1", "v2") or len(rest) > 2:
        raise ParseError(_TOOL, f"line {lineno}: no VER v1/v2 where expected (cut row?)")
    return GidEntry(
        dev, port, index, gid, ipv4, int(rest[0][1]), rest[1] if len(rest) > 1 else None
    )


def parse_show_gids(text: str) -> GidTable:
    """Parse the whole table; rows in the order printed."""
    lines = [ln for ln in clean_lines(text) if ln.strip()]
    if not lines or lines[0].split()[:3] != ["DEV", "PORT", "INDEX"]:
        raise ParseError(_TOOL, "no 'DEV PORT INDEX GID IPv4 VER DEV' header")
    entries: list[GidEntry] = []
    found: int | None = None
    for lineno, line in enumerate(lines[1:], 2):
        if found is not None:
            raise ParseError(_TOOL, f"line {lineno}: text after n_gids_found")
        if set(line.split()) <= {"---", "----", "-----", "------------"}:
            continue
        if m := _FOOTER.match(line.strip()):
            found = int(m["n"])
            continue
        entries.append(_entry(lineno, line.split()))
    if found is None:
        raise ParseError(_TOOL, "no n_gids_found footer (truncated?)")
    if found != len(entries):
        raise ParseError(_TOOL, f"n_gids_found={found} but {len(entries)} rows")
    return GidTable(tuple(entries))
