"""Parser for `flint -d <dev> q` (MFT; mstflint prints the same), also a switch's firmware in band.

flint/subcommands.cpp of mstflint prints `Key:` padded to column 23 and the value; `Rom Info:`
continues on indented lines. Run from a node as `flint -d lid-<lid>,<ca>,<port> q` it queries
the switch at that LID through the node's HCA port (mtcr_ul/mtcr_ib_ofed.c: `lid-` devices);
`parse_switch_firmware` keeps what the fabric stage compares.

>>> parse_switch_firmware("FW Version:            31.2012.1068\nPSID:  MT_0000000693\n", 7)
SwitchFirmware(lid=7, version='31.2012.1068', psid='MT_0000000693')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.ib_rate import canonical_guid
from nodegate.parsers.text import clean_lines

# `Key:   value` with the value column at 23; continuation lines (Rom Info) are blank-keyed.
_FLINT_KV_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ()/_.-]*?):\s*(?P<value>.*)$")
_ROM_RE = re.compile(r"(?P<key>type|version|cpu|devid|proto)=(?P<value>.*?)(?=\s+\w+=|$)")


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


@dataclass(frozen=True, slots=True)
class SwitchFirmware:
    """A switch's running firmware as `flint -d lid-<lid>,... q` reports it."""

    lid: int
    version: str  # the running version: FW Version(Running) while a newer image awaits a reset
    psid: str | None


def parse_switch_firmware(text: str, lid: int) -> SwitchFirmware:
    """The firmware of the switch at `lid` (the LID the command named) from its flint q output."""
    q = parse_flint_query(text)
    if not re.fullmatch(r"\d{1,3}\.\d{1,5}\.\d{1,5}", q.fw_version):
        raise ParseError("flint", f"FW Version {q.fw_version[:40]!r} is not major.minor.subminor")
    return SwitchFirmware(lid=lid, version=q.fw_version_running or q.fw_version, psid=q.psid)


_LID_MARK_RE = re.compile(r"^# lid (\d{1,5})$")
_MAX_SWITCHES = 4096  # a subnet's switches; more markers than that is not a fabric's answer


def parse_switch_firmware_loop(text: str) -> tuple[SwitchFirmware, ...]:
    """Parse a loop's output: `# lid <n>` then that switch's `flint -d lid-<n>,... q`, per switch.

    Text before the first marker, a marker without output, a LID twice, or a block that
    parse_switch_firmware refuses raise ParseError naming the LID."""
    blocks: list[tuple[int, list[str]]] = []
    for lineno, raw in enumerate(clean_lines(text), 1):
        m = _LID_MARK_RE.match(raw.strip())
        if m is not None:
            if len(blocks) == _MAX_SWITCHES:
                raise ParseError("flint", f"more than {_MAX_SWITCHES} switches")
            blocks.append((int(m.group(1)), []))
        elif not blocks:
            if raw.strip():
                raise ParseError("flint", f"line {lineno}: output before the first '# lid N'")
        else:
            blocks[-1][1].append(raw)
    if not blocks:
        raise ParseError("flint", "no '# lid N' marker (no switch queried)")
    out: list[SwitchFirmware] = []
    seen: set[int] = set()
    for lid, lines in blocks:
        if lid in seen:
            raise ParseError("flint", f"lid {lid}: queried twice")
        seen.add(lid)
        body = "\n".join(lines)
        if not body.strip():
            raise ParseError("flint", f"lid {lid}: no flint output")
        try:
            out.append(parse_switch_firmware(body, lid))
        except ParseError as exc:
            raise ParseError("flint", f"lid {lid}: {exc.reason}") from None
    return tuple(out)
