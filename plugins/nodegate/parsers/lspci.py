"""Parse `lspci` listings (`lspci`, `-nn`, `-Dnn`, `-vvv`) into per-device PCIe facts.

>>> rep = parse_lspci("19:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)")
>>> (rep.devices[0].bdf, rep.devices[0].device_id, rep.devices[0].vendor_name)
('0000:19:00.0', '2330', 'NVIDIA Corporation')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.pci import normalize_bdf, pcie_gen

TOOL = "lspci"

# lspci prints "<vendor name> <device name>" with nothing between them; these pci.ids vendor
# names (longest first at match time) let us split the two. Unknown vendors keep only the raw
# description.
_VENDOR_NAMES: tuple[str, ...] = (
    "NVIDIA Corporation",
    "Mellanox Technologies",
    "Intel Corporation",
    "Broadcom / LSI",
    "Broadcom Inc. and subsidiaries",
    "Advanced Micro Devices, Inc. [AMD/ATI]",
    "Advanced Micro Devices, Inc. [AMD]",
    "Micron Technology Inc",
    "Samsung Electronics Co Ltd",
    "PMC-Sierra Inc.",
    "Matrox Electronics Systems Ltd.",
    "ASPEED Technology, Inc.",
    "Renesas Technology Corp.",
    "Pericom Semiconductor",
    "Microsoft Corporation",
    "PLDA",
    "Red Hat, Inc.",
    "Amazon.com, Inc.",
    "Google, Inc.",
)

_VENDORS_LONGEST_FIRST = tuple(sorted(_VENDOR_NAMES, key=len, reverse=True))

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_HEADER = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[^:\[\]]+?)(?:\s+\[(?P<ccode>[0-9a-fA-F]{4})\])?:\s*(?P<rest>.*)$"
)
_PROG_IF = re.compile(r"\s*\(prog-if (?P<pi>[0-9a-fA-F]{2})(?: \[[^\]]*\])?\)$")
_REV = re.compile(r"\s*\(rev (?P<rev>[0-9a-fA-F]{2})\)$")
_IDS = re.compile(r"\s*\[(?P<ven>[0-9a-fA-F]{4}):(?P<dev>[0-9a-fA-F]{4})\]$")
# lspci's placeholders when pci.ids lacks a name: `Device 2330` (or bare `Device` beside the
# -nn ids), `Vendor 1d0f Device efa0` for an unknown vendor.
_DEVICE_PLACEHOLDER = re.compile(r"^Device(?: (?P<dev>[0-9a-fA-F]{4}))?$")
_VENDOR_PLACEHOLDER = re.compile(r"^Vendor (?P<ven>[0-9a-fA-F]{4}) Device (?P<dev>[0-9a-fA-F]{4})$")
_SPEED = r"(?P<speed>[\d.]+GT/s|unknown)"
_LNKCAP = re.compile(r"Port #(?P<port>\d+), Speed " + _SPEED + r", Width x(?P<width>\d+)")
_LNKSTA = re.compile(
    r"Speed " + _SPEED + r"(?: \((?P<sst>ok|downgraded|strange)\))?,\s*"
    r"Width x(?P<width>\d+)(?: \((?P<wst>ok|downgraded|strange)\))?"
)
_EXPRESS = re.compile(r"Express (?:\(v\d\) )?(?P<type>.+?)(?: \(Slot[+-]\))?, (?:MSI|IntMsgNum)")
_WARNING = re.compile(r"^(?:pcilib|lspci): ")
_SUPPORTED = re.compile(r"Supported Link Speeds: (?P<s>[^,]+)")
_TOP_SPEED = re.compile(r"([\d.]+)GT/s$")
_TARGET = re.compile(r"Target Link Speed: ([\d.]+)GT/s")
_NUMBER = re.compile(r"-?\d+")
# A bridge's bus range, and the first word of a header line that it is filed under.
_BUS_RANGE = re.compile(r"^\s+Bus: primary=[0-9a-f]+, secondary=(\w+), subordinate=(\w+)")
_RANGE_KEY = re.compile(r"^(\S+) ")
# Detail keys `_detail` records (besides every `Lnk*` key); `-vvv` prints ~90 lines per device,
# most of them about other things.
_DETAIL_KEYS = frozenset(
    {
        "ACSCtl",
        "Capabilities",
        "NUMA node",
        "Subsystem",
        "DeviceName",
        "Physical Slot",
        "Kernel driver in use",
        "Kernel modules",
    }
)
_FLAG = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9]*)(?P<val>[+-])")


@dataclass(frozen=True, slots=True)
class LinkCapability:
    """LnkCap: what the port can do."""

    port: int
    speed_gts: float | None
    width_lanes: int
    pcie_gen: int | None


@dataclass(frozen=True, slots=True)
class LinkStatus:
    """LnkSta: what the link trained at; statuses are lspci's own `ok`/`downgraded` notes."""

    speed_gts: float | None
    width_lanes: int
    pcie_gen: int | None
    speed_status: str | None
    width_status: str | None


@dataclass(frozen=True, slots=True)
class AcsControl:
    """ACSCtl flags (None: flag not printed); redirects on a switch port break GPU P2P."""

    src_valid: bool | None
    trans_blk: bool | None
    req_redir: bool | None
    cmplt_redir: bool | None
    upstream_fwd: bool | None
    egress_ctrl: bool | None
    direct_trans: bool | None


@dataclass(frozen=True, slots=True)
class PciDevice:
    """One device as lspci printed it; link fields are None unless `-vv`/`-vvv` was used."""

    bdf: str
    bdf_raw: str
    class_name: str
    class_code: str | None
    description: str
    vendor_name: str | None
    device_name: str | None
    vendor_id: str | None
    device_id: str | None
    revision: str | None
    prog_if: str | None
    subsystem: str | None
    device_label: str | None
    physical_slot: str | None
    numa_node: int | None
    express_type: str | None
    link_cap: LinkCapability | None
    link_status: LinkStatus | None
    supported_speeds: str | None
    max_supported_speed_gts: float | None
    target_speed_gts: float | None
    acs_control: AcsControl | None
    kernel_driver: str | None
    kernel_modules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LspciReport:
    """All devices in listing order; `verbose` says whether detail lines (-v..) were present."""

    devices: tuple[PciDevice, ...]
    verbose: bool
    numeric_ids: bool


def _speed(text: str) -> float | None:
    return None if text == "unknown" else float(text.removesuffix("GT/s"))


def _split_names(names: str) -> tuple[str | None, str | None]:
    for vendor in _VENDORS_LONGEST_FIRST:
        if names == vendor:
            return vendor, None
        if names.startswith(vendor + " "):
            return vendor, names[len(vendor) + 1 :].strip() or None
    return None, None


def _acs(text: str) -> AcsControl:
    flags = {m["name"]: m["val"] == "+" for m in _FLAG.finditer(text)}
    return AcsControl(
        src_valid=flags.get("SrcValid"),
        trans_blk=flags.get("TransBlk"),
        req_redir=flags.get("ReqRedir"),
        cmplt_redir=flags.get("CmpltRedir"),
        upstream_fwd=flags.get("UpstreamFwd"),
        egress_ctrl=flags.get("EgressCtrl"),
        direct_trans=flags.get("DirectTrans"),
    )


def _header(line: str, lineno: int) -> dict[str, str | None]:
    m = _HEADER.match(line)
    if m is None:
        raise ParseError(TOOL, f"line {lineno}: not a device header: {line[:80]!r}")
    rest = m["rest"].strip()
    fields: dict[str, str | None] = {"prog_if": None, "revision": None, "ven": None, "dev": None}
    pm = _PROG_IF.search(rest)
    if pm:
        fields["prog_if"], rest = pm["pi"].lower(), rest[: pm.start()]
    rm = _REV.search(rest)
    if rm:
        fields["revision"], rest = rm["rev"].lower(), rest[: rm.start()]
    im = _IDS.search(rest)
    if im:
        fields["ven"], fields["dev"] = im["ven"].lower(), im["dev"].lower()
        rest = rest[: im.start()]
    if not rest.strip():
        raise ParseError(TOOL, f"line {lineno}: device header without a name: {line[:80]!r}")
    fields.update(bdf=m["bdf"], cls=m["cls"].strip(), ccode=m["ccode"], names=rest.strip())
    return fields


@dataclass(slots=True)
class _Block:
    """Mutable collector for one device's detail lines (frozen into PciDevice at the end)."""

    subsystem: str | None = None
    device_label: str | None = None
    physical_slot: str | None = None
    numa_node: int | None = None
    express_type: str | None = None
    link_cap: LinkCapability | None = None
    link_status: LinkStatus | None = None
    supported_speeds: str | None = None
    max_supported_speed_gts: float | None = None
    target_speed_gts: float | None = None
    acs_control: AcsControl | None = None
    kernel_driver: str | None = None
    kernel_modules: tuple[str, ...] = ()


def _link_detail(key: str, value: str, block: _Block, lineno: int) -> None:
    if key == "LnkCap":
        m = _LNKCAP.search(value)
        if m is None:
            raise ParseError(TOOL, f"line {lineno}: unreadable LnkCap: {value[:80]!r}")
        speed = _speed(m["speed"])
        block.link_cap = LinkCapability(int(m["port"]), speed, int(m["width"]), pcie_gen(speed))
    elif key == "LnkSta":
        m = _LNKSTA.search(value)
        if m is None:
            raise ParseError(TOOL, f"line {lineno}: unreadable LnkSta: {value[:80]!r}")
        speed = _speed(m["speed"])
        block.link_status = LinkStatus(speed, int(m["width"]), pcie_gen(speed), m["sst"], m["wst"])
    elif key == "LnkCap2":
        sm = _SUPPORTED.search(value)
        if sm:
            block.supported_speeds = sm["s"].strip()
            top = _TOP_SPEED.search(block.supported_speeds)
            block.max_supported_speed_gts = float(top[1]) if top else None
    elif key == "LnkCtl2":
        tm = _TARGET.search(value)
        block.target_speed_gts = float(tm[1]) if tm else None


def _detail(key: str, value: str, block: _Block, lineno: int) -> None:
    """Record one `Key: value` detail line we care about."""
    if key.startswith("Lnk"):
        _link_detail(key, value, block, lineno)
    elif key == "ACSCtl":
        block.acs_control = _acs(value)
    elif key == "Capabilities":
        # Most capabilities are not PCI Express; the search is for the one that is.
        if block.express_type is None and "Express " in value and (em := _EXPRESS.search(value)):
            block.express_type = em["type"]
    elif key == "NUMA node":
        if not _NUMBER.fullmatch(value):
            raise ParseError(TOOL, f"line {lineno}: NUMA node is not a number: {value!r}")
        block.numa_node = int(value)
    elif key == "Subsystem":
        block.subsystem = value
    elif key == "DeviceName":
        block.device_label = value
    elif key == "Physical Slot":
        block.physical_slot = value
    elif key == "Kernel driver in use":
        block.kernel_driver = value
    elif key == "Kernel modules":
        block.kernel_modules = tuple(v.strip() for v in value.split(",") if v.strip())


def _device(head: dict[str, str | None], block: _Block) -> PciDevice:
    raw = str(head["bdf"])
    names = str(head["names"])
    vendor, device = _split_names(names)
    vendor_id, device_id = head["ven"], head["dev"]
    if device is not None and (dm := _DEVICE_PLACEHOLDER.match(device)):
        # Old pci.ids (corpus: lspci-vvv HGX H100, lspci GB200) print `Device 2330`: no name.
        device = None
        device_id = device_id or (dm["dev"].lower() if dm["dev"] else None)
    if vendor is None and (vm := _VENDOR_PLACEHOLDER.match(names)):
        vendor_id = vendor_id or vm["ven"].lower()
        device_id = device_id or vm["dev"].lower()
    return PciDevice(
        bdf=normalize_bdf(raw) or raw,
        bdf_raw=raw,
        class_name=str(head["cls"]),
        class_code=head["ccode"].lower() if head["ccode"] else None,
        description=names,
        vendor_name=vendor,
        device_name=device,
        vendor_id=vendor_id,
        device_id=device_id,
        revision=head["revision"],
        prog_if=head["prog_if"],
        subsystem=block.subsystem,
        device_label=block.device_label,
        physical_slot=block.physical_slot,
        numa_node=block.numa_node,
        express_type=block.express_type,
        link_cap=block.link_cap,
        link_status=block.link_status,
        supported_speeds=block.supported_speeds,
        max_supported_speed_gts=block.max_supported_speed_gts,
        target_speed_gts=block.target_speed_gts,
        acs_control=block.acs_control,
        kernel_driver=block.kernel_driver,
        kernel_modules=block.kernel_modules,
    )


def parse_lspci(text: str) -> LspciReport:
    """Parse plain, `-nn`/`-Dnn` or `-v..-vvv` lspci output; raises ParseError when unsure."""
    return scan_lspci(text)[0]


def scan_lspci(text: str) -> tuple[LspciReport, list[tuple[str, str, str]]]:
    """parse_lspci, plus every `Bus:` line's secondary and subordinate texts, in order, with
    the normalized first word of its header line (see lspci_bridges.parse_lspci_view)."""
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    # One final newline ends the last line; only a further empty line ends a -v block.
    body = text.replace("\r\n", "\n").removesuffix("\n")
    if "\x1b" in body:
        body = _ANSI.sub("", body)  # an escape sequence never spans lines
    devices: list[PciDevice] = []
    head: dict[str, str | None] | None = None
    block = _Block()
    verbose = False
    ended_blank = True
    bus_ranges: list[tuple[str, str, str]] = []
    range_key: str | None = None
    for lineno, raw in enumerate(body.split("\n"), 1):
        line = raw.rstrip()
        if not line:  # nothing but whitespace
            ended_blank = True
            continue
        if line[0] in " \t":
            if head is None:
                raise ParseError(TOOL, f"line {lineno}: detail line before any device header")
            verbose = True
            ended_blank = False
            key, sep, value = line.partition(":")
            key = key.strip()
            if sep and (key in _DETAIL_KEYS or key.startswith("Lnk")):
                _detail(key, value.strip(), block, lineno)
            elif key == "Bus" and range_key and (bm := _BUS_RANGE.match(line)):
                bus_ranges.append((range_key, bm[1], bm[2]))
            continue
        hm = _RANGE_KEY.match(line)
        range_key = normalize_bdf(hm[1]) if hm else None
        if _WARNING.match(line):
            continue  # stderr merged into the capture (`pcilib: sysfs_read_vpd: read failed`)
        if head is not None:
            devices.append(_device(head, block))
        head, block, ended_blank = _header(line, lineno), _Block(), False
    if head is None:
        raise ParseError(TOOL, "no device header lines ('<bus>:<dev>.<fn> <class>: <name>')")
    if verbose and not ended_blank:
        # `lspci -v..` ends every device block with an empty line; its absence after the last
        # block means the output stopped mid-device.
        raise ParseError(TOOL, f"device {head['bdf']}: block not terminated; output truncated")
    devices.append(_device(head, block))
    with_ids = sum(d.vendor_id is not None for d in devices)
    if 0 < with_ids < len(devices):
        odd = next(d.bdf_raw for d in devices if d.vendor_id is None)
        raise ParseError(TOOL, f"device {odd}: no [vendor:device] ids unlike the others (cut?)")
    return LspciReport(tuple(devices), verbose, with_ids == len(devices)), bus_ranges
