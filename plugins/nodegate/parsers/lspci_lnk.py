"""Parse `lspci -vv [-s <bdf>] | grep Lnk` fragments: LnkCap/LnkCtl/LnkSta(2/3) lines without
their device header, read with lspci.py's own link readings. A fragment block starts where a
key repeats (so `grep LnkSta` over many devices gives one block per device); the device itself
is unknown here, which is why no stage reads this (pcie_gpu reads the whole `lspci -vvv`).

Corpus: lspci-vv-grep-Lnk__* (grep of the hgx-h100 `lspci -vvv` capture, lines unchanged).

>>> parse_lspci_lnk("\\t\\tLnkSta:\\tSpeed 16GT/s (downgraded), Width x4 (ok)\\n")[0].link_status
LinkStatus(speed_gts=16.0, width_lanes=4, pcie_gen=4, speed_status='downgraded', width_status='ok')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.lspci import LinkCapability, LinkStatus, _Block, _link_detail
from nodegate.parsers.text import clean_lines

TOOL = "lspci -vv | grep Lnk"
_LINE = re.compile(r"^\s*(?P<key>Lnk(?:Cap|Ctl|Sta)[23]?):\s*(?P<value>.*)$")
_ASPM = re.compile(r"^ASPM (?P<aspm>[^;]+)")


@dataclass(frozen=True, slots=True)
class LnkFragment:
    """One device's Lnk lines; a field is None when its line was not in the fragment."""

    keys: tuple[str, ...]  # the Lnk keys present, in output order
    link_cap: LinkCapability | None
    link_status: LinkStatus | None
    aspm_control: str | None  # LnkCtl: "Disabled", "L1 Enabled", "L0s L1 Enabled"
    supported_speeds: str | None
    max_supported_speed_gts: float | None
    target_speed_gts: float | None


def _fragment(keys: list[str], block: _Block, aspm: str | None) -> LnkFragment:
    return LnkFragment(
        tuple(keys), block.link_cap, block.link_status, aspm, block.supported_speeds,
        block.max_supported_speed_gts, block.target_speed_gts,
    )  # fmt: skip


def parse_lspci_lnk(text: str) -> tuple[LnkFragment, ...]:
    out: list[LnkFragment] = []
    keys: list[str] = []
    block, aspm = _Block(), None
    for lineno, line in enumerate(clean_lines(text), 1):
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            raise ParseError(TOOL, f"line {lineno}: not an Lnk line: {line.strip()[:60]!r}")
        key, value = m["key"], m["value"]
        if key in keys:
            out.append(_fragment(keys, block, aspm))
            keys, block, aspm = [], _Block(), None
        keys.append(key)
        if key == "LnkCtl":
            am = _ASPM.match(value)
            if am is None:
                raise ParseError(TOOL, f"line {lineno}: unreadable LnkCtl: {value[:60]!r}")
            aspm = am["aspm"].strip()
        else:
            try:
                _link_detail(key, value, block, lineno)
            except ParseError as exc:
                raise ParseError(TOOL, exc.reason) from None
    if keys:
        out.append(_fragment(keys, block, aspm))
    if not out:
        raise ParseError(TOOL, "no Lnk line")
    return tuple(out)
