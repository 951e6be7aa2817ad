"""Parse kernel logs (dmesg, dmesg -T, dmesg --time-format iso, journalctl -k, syslog).

Extracts GPU/NVSwitch/HCA health events: NVRM Xid, NVSwitch SXid, "fallen off the bus",
PCIe bandwidth-limited notices (mlx5_core and other drivers), nvidia-peermem lines and the
NVIDIA driver load banner.

>>> ev = parse_kernel_log("[ 12.5] NVRM: Xid (PCI:0000:52:00): 79, pid=7, name=x, GPU fell")
>>> (ev.xids[0].xid, ev.xids[0].bdf, ev.xids[0].timestamp.seconds_since_boot)
(79, '0000:52:00.0', 12.5)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.kernel_log_lines import LogTimestamp, logical_lines, split_prefix
from nodegate.parsers.pci import normalize_bdf

TOOL = "kernel_log"

_XID = re.compile(r"NVRM: Xid \((?P<bdf>[^)]*)\): (?P<code>\d+)(?:,\s*(?P<rest>.*))?$")
_PIDNAME = re.compile(r"^pid=(?P<pid>'?<unknown>'?|\d+), name=(?P<name>[^,]*)(?:,\s*(?P<msg>.*))?$")
_CAUSED = re.compile(r"caused by previous Xid (?P<prev>\d+)")
_CHANNEL = re.compile(r"^Ch (?P<ch>[0-9a-fA-F]{8})\b")
_SXID = re.compile(
    r"(?P<dev>nvidia-nvswitch\d*): SXid \((?P<bdf>[^)]*)\): (?P<code>\d+),\s*(?P<rest>.*)$"
)
_SXID_HEAD = re.compile(r"^(?P<sev>Non-fatal|Fatal)(?:,\s*Link (?P<link>\d+))?\s*(?P<msg>.*)$")
_FALLEN_BDF = re.compile(
    r"GPU (?:at )?(?:PCI:)?(?P<bdf>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
)
_PCI_ID = re.compile(r"\(PCI ID: (?P<ven>[0-9a-fA-F]{4}):(?P<dev>[0-9a-fA-F]{4})\)")
_LINK = r"(?:(?P<{0}s>[\d.]+) GT/s PCIe|Unknown) x(?P<{0}w>\d+) link"
# Kernel pcie_print_link_status(): `<avail> Gb/s available PCIe bandwidth, limited by <speed>
# x<w> link at <bdf> (capable of <max> Gb/s with <speed> x<w> link)` or, when not limited,
# `<avail> Gb/s available PCIe bandwidth (<speed> x<w> link)`.
_BW_LIMITED = re.compile(
    r"^(?P<drv>\S+) (?P<bdf>\S+): (?P<avail>[\d.]+) Gb/s available PCIe bandwidth, limited by "
    + _LINK.format("lim")
    + r" at (?P<at>\S+) \(capable of (?P<cap>[\d.]+) Gb/s with "
    + _LINK.format("cap")
    + r"\)"
)
_BW_FULL = re.compile(
    r"^(?P<drv>\S+) (?P<bdf>\S+): (?P<avail>[\d.]+) Gb/s available PCIe bandwidth \("
    + _LINK.format("cap")
    + r"\)"
)
_PEERMEM = re.compile(r"^(?:NVIDIA )?nvidia[-_]peermem:?\s*(?P<msg>.*)$", re.IGNORECASE)
_PEERMEM_LOAD = re.compile(
    r"loading|loaded|module (?:verification|license)|taint|registered|init", re.IGNORECASE
)
# Open modules: `NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release
# Build ...` (corpus dmesg__fallen-off-bus-*); the proprietary module names the arch first:
# `NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 ... 2024`.
_DRIVER_LOAD = re.compile(
    r"NVRM: loading NVIDIA UNIX (?:(?P<open>Open )Kernel Module for (?P<arch>\S+)"
    r"|(?P<parch>\S+) Kernel Module)\s+(?P<ver>\d+\.\d+(?:\.\d+)*)\b"
)


@dataclass(frozen=True, slots=True)
class XidEvent:
    """`NVRM: Xid (PCI:<bdf>): <code>, pid=<pid>, name=<name>, <message>`."""

    line_no: int
    timestamp: LogTimestamp | None
    xid: int
    bdf: str
    bdf_raw: str
    pid: int | None
    process_name: str | None
    message: str
    caused_by_xid: int | None
    channel: str | None


@dataclass(frozen=True, slots=True)
class SxidEvent:
    """NVSwitch `SXid`; follow-up `Severity`/`Data` lines of the same error go in `details`."""

    line_no: int
    timestamp: LogTimestamp | None
    sxid: int
    bdf: str
    bdf_raw: str
    switch_device: str
    fatal: bool | None
    link: int | None
    message: str
    details: tuple[str, ...]

    @property
    def key(self) -> tuple[str, int]:
        """(switch address, code): what a follow-up line names of its head line."""
        return self.bdf, self.sxid


@dataclass(frozen=True, slots=True)
class FallenOffBusEvent:
    """NVRM "GPU ... has fallen off the bus", logged with or without an Xid 79."""

    line_no: int
    timestamp: LogTimestamp | None
    bdf: str | None
    pci_id: str | None
    message: str


@dataclass(frozen=True, slots=True)
class PcieBandwidthEvent:
    """Kernel PCIe bandwidth notice; `limited` when a slower/narrower upstream link caps it."""

    line_no: int
    timestamp: LogTimestamp | None
    driver: str
    bdf: str
    limited: bool
    available_bandwidth_gbps: float
    limiting_bdf: str | None
    limiting_speed_gts: float | None
    limiting_width_lanes: int | None
    capable_bandwidth_gbps: float | None
    capable_speed_gts: float | None
    capable_width_lanes: int


@dataclass(frozen=True, slots=True)
class PeermemEvent:
    """A line from the nvidia-peermem module (GPUDirect RDMA)."""

    line_no: int
    timestamp: LogTimestamp | None
    message: str
    is_error: bool
    is_load: bool


@dataclass(frozen=True, slots=True)
class DriverLoadEvent:
    """`NVRM: loading NVIDIA UNIX Open Kernel Module for <arch>  <version>` or, proprietary,
    `NVRM: loading NVIDIA UNIX <arch> Kernel Module  <version>`."""

    line_no: int
    timestamp: LogTimestamp | None
    version: str
    open_kernel_module: bool


@dataclass(frozen=True, slots=True)
class KernelLogEvents:
    """Events by kind, each in log order; `kernel_lines` counts lines recognised as kernel log."""

    xids: tuple[XidEvent, ...]
    sxids: tuple[SxidEvent, ...]
    fallen_off_bus: tuple[FallenOffBusEvent, ...]
    pcie_bandwidth: tuple[PcieBandwidthEvent, ...]
    peermem: tuple[PeermemEvent, ...]
    driver_loads: tuple[DriverLoadEvent, ...]
    kernel_lines: int


@dataclass(slots=True)
class _Collector:
    xids: list[XidEvent]
    sxids: list[SxidEvent]
    fallen: list[FallenOffBusEvent]
    bandwidth: list[PcieBandwidthEvent]
    peermem: list[PeermemEvent]
    loads: list[DriverLoadEvent]


def _bdf(raw: str, line_no: int, what: str) -> str:
    bdf = normalize_bdf(raw)
    if bdf is None:
        raise ParseError(TOOL, f"line {line_no}: {what} with unreadable PCI address {raw!r}")
    return bdf


def _xid(no: int, ts: LogTimestamp | None, msg: str) -> XidEvent:
    m = _XID.search(msg)
    if m is None:
        raise ParseError(TOOL, f"line {no}: malformed Xid line (cut?): {msg[:100]!r}")
    rest = (m["rest"] or "").strip()
    if rest and "pid=".startswith(rest):
        raise ParseError(TOOL, f"line {no}: Xid line ends inside 'pid=' (cut?)")
    pid: int | None = None
    name: str | None = None
    if rest.startswith("pid="):
        pm = _PIDNAME.match(rest)
        if pm is None:
            raise ParseError(TOOL, f"line {no}: malformed Xid pid/name (cut?): {rest[:80]!r}")
        pid = int(pm["pid"]) if pm["pid"].isdigit() else None
        name = None if pm["name"].strip() in ("<unknown>", "") else pm["name"].strip()
        rest = (pm["msg"] or "").strip()
    caused = _CAUSED.search(rest)
    channel = _CHANNEL.match(rest)
    return XidEvent(
        line_no=no,
        timestamp=ts,
        xid=int(m["code"]),
        bdf=_bdf(m["bdf"], no, "Xid"),
        bdf_raw=m["bdf"],
        pid=pid,
        process_name=name,
        message=rest,
        caused_by_xid=int(caused["prev"]) if caused else None,
        channel=channel["ch"].lower() if channel else None,
    )


def _sxid(no: int, ts: LogTimestamp | None, msg: str, out: list[SxidEvent]) -> None:
    m = _SXID.search(msg)
    if m is None:
        raise ParseError(TOOL, f"line {no}: malformed SXid line (cut?): {msg[:100]!r}")
    code, bdf, rest = int(m["code"]), _bdf(m["bdf"], no, "SXid"), m["rest"].strip()
    # The driver logs one SXid as a head line then `Severity ...` and `Data {...}` lines
    # (corpus: dmesg__sxid-22013...); keep them with the head, not as new errors. Lines of
    # several switches interleave: a follow-up belongs to the latest SXid of its switch and code.
    if not _SXID_HEAD.match(rest):
        at = next((i for i in reversed(range(len(out))) if out[i].key == (bdf, code)), None)
        if at is not None:
            out[at] = dataclasses.replace(out[at], details=(*out[at].details, rest))
            return
    hm = _SXID_HEAD.match(rest)
    out.append(
        SxidEvent(
            line_no=no,
            timestamp=ts,
            sxid=code,
            bdf=bdf,
            bdf_raw=m["bdf"],
            switch_device=m["dev"],
            fatal=(hm["sev"] == "Fatal") if hm else None,
            link=int(hm["link"]) if hm and hm["link"] else None,
            message=hm["msg"].strip() if hm else rest,
            details=(),
        )
    )


def _bandwidth(no: int, ts: LogTimestamp | None, msg: str) -> PcieBandwidthEvent:
    if m := _BW_LIMITED.match(msg):
        return PcieBandwidthEvent(
            line_no=no,
            timestamp=ts,
            driver=m["drv"],
            bdf=_bdf(m["bdf"], no, "PCIe bandwidth notice"),
            limited=True,
            available_bandwidth_gbps=float(m["avail"]),
            limiting_bdf=_bdf(m["at"], no, "PCIe bandwidth notice"),
            limiting_speed_gts=float(m["lims"]) if m["lims"] else None,
            limiting_width_lanes=int(m["limw"]),
            capable_bandwidth_gbps=float(m["cap"]),
            capable_speed_gts=float(m["caps"]) if m["caps"] else None,
            capable_width_lanes=int(m["capw"]),
        )
    if m := _BW_FULL.match(msg):
        return PcieBandwidthEvent(
            line_no=no,
            timestamp=ts,
            driver=m["drv"],
            bdf=_bdf(m["bdf"], no, "PCIe bandwidth notice"),
            limited=False,
            available_bandwidth_gbps=float(m["avail"]),
            limiting_bdf=None,
            limiting_speed_gts=None,
            limiting_width_lanes=None,
            capable_bandwidth_gbps=None,
            capable_speed_gts=float(m["caps"]) if m["caps"] else None,
            capable_width_lanes=int(m["capw"]),
        )
    raise ParseError(TOOL, f"line {no}: malformed PCIe bandwidth line (cut?): {msg[:100]!r}")


def _classify(no: int, ts: LogTimestamp | None, msg: str, out: _Collector) -> bool:
    """Record the event in `msg`, if any; True when it was one."""
    if "NVRM: Xid" in msg:
        out.xids.append(_xid(no, ts, msg))
    elif ": SXid (" in msg:
        _sxid(no, ts, msg, out.sxids)
    elif "fallen off the bus" in msg and "NVRM" in msg:
        bm = _FALLEN_BDF.search(msg)
        pm = _PCI_ID.search(msg)
        out.fallen.append(
            FallenOffBusEvent(
                line_no=no,
                timestamp=ts,
                bdf=normalize_bdf(bm["bdf"]) if bm else None,
                pci_id=f"{pm['ven']}:{pm['dev']}".lower() if pm else None,
                message=msg,
            )
        )
    elif "available PCIe bandwidth" in msg:
        out.bandwidth.append(_bandwidth(no, ts, msg))
    elif pm := _PEERMEM.match(msg):
        text = pm["msg"].strip()
        is_err = bool(re.search(r"\bERROR\b|\berror\b|failed", text))
        load = bool(_PEERMEM_LOAD.search(text)) and not is_err
        out.peermem.append(PeermemEvent(no, ts, text, is_err, load))
    elif dm := _DRIVER_LOAD.search(msg):
        out.loads.append(DriverLoadEvent(no, ts, dm["ver"], bool(dm["open"])))
    else:
        return False
    return True


def parse_kernel_log(text: str) -> KernelLogEvents:
    """Parse dmesg/journal/syslog text; no events is fine, unrecognisable text is not."""
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    out = _Collector([], [], [], [], [], [])
    kernel_lines = 0
    for no, line in logical_lines(text):
        ts, msg, recognised = split_prefix(line)
        is_event = _classify(no, ts, msg, out)
        kernel_lines += recognised or is_event
    if kernel_lines == 0:
        raise ParseError(
            TOOL, "no kernel-log lines (no [time]/ISO/syslog/'kernel:' prefix, no known event)"
        )
    return KernelLogEvents(
        xids=tuple(out.xids),
        sxids=tuple(out.sxids),
        fallen_off_bus=tuple(out.fallen),
        pcie_bandwidth=tuple(out.bandwidth),
        peermem=tuple(out.peermem),
        driver_loads=tuple(out.loads),
        kernel_lines=kernel_lines,
    )
