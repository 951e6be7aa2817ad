"""Parser for a node's partition keys read from sysfs with `grep -H . <pkeys files>`.

Each line is `/sys/class/infiniband/<dev>/ports/<port>/pkeys/<index>:<value>`, the value as
the kernel's show_port_pkey prints it (`0x%04x`). Bit 15 is the membership type (1: full member,
0: limited); the low 15 bits are the partition. Unused table entries read 0x0000 and are dropped.

>>> parse_pkeys("/sys/class/infiniband/mlx5_0/ports/1/pkeys/0:0xffff\\n")[0]
PkeyEntry(device='mlx5_0', port=1, index=0, pkey=32767, full_member=True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines, natural_key

_TOOL = "pkeys"
_LINE_RE = re.compile(
    r"^(?:/sys/class/infiniband/)?(?P<dev>[A-Za-z0-9_.\-]{1,64})/ports/(?P<port>\d{1,3})"
    r"/pkeys/(?P<index>\d{1,5}):(?P<value>0x[0-9a-fA-F]{4})$"
)
_FULL_MEMBER = 0x8000


@dataclass(frozen=True, slots=True)
class PkeyEntry:
    """One used P_Key table entry of one port: the 15-bit partition and its membership type."""

    device: str
    port: int
    index: int
    pkey: int  # 15-bit base, e.g. 0x7fff for the default partition
    full_member: bool


def parse_pkeys(text: str) -> tuple[PkeyEntry, ...]:
    """Parse the grep listing into entries sorted by device, port, index; 0x0000 entries dropped."""
    entries: dict[tuple[str, int, int], PkeyEntry] = {}
    seen: set[tuple[str, int, int]] = set()
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        m = _LINE_RE.match(line)
        if m is None:
            raise ParseError(_TOOL, f"line {lineno}: not a pkeys 'path:0xNNNN' line: {line[:80]!r}")
        key = (m["dev"], int(m["port"]), int(m["index"]))
        if key in seen:
            raise ParseError(_TOOL, f"line {lineno}: {m['dev']} port {key[1]} index {key[2]} twice")
        seen.add(key)
        value = int(m["value"], 16)
        if value == 0:
            continue
        entries[key] = PkeyEntry(
            device=key[0],
            port=key[1],
            index=key[2],
            pkey=value & ~_FULL_MEMBER,
            full_member=bool(value & _FULL_MEMBER),
        )
    if not seen:
        raise ParseError(_TOOL, "no pkeys lines (no InfiniBand port?)")
    return tuple(entries[k] for k in sorted(entries, key=lambda k: (natural_key(k[0]), k[1], k[2])))
