"""Parser for `mlxlink` (NVIDIA MFT) link/module/BER reports, `--json` and the plain-text layout.

Both layouts carry the same sections (`Operational Info`, `Module Info`, `Physical Counters and
BER Info`, ...). JSON nests them under result.output and lists per-lane data as {"values": [..]};
plain text prints `Title` / `-----` / `Key   : value` with per-lane data comma-separated.
FEC histogram and serdes tables are read from JSON only (text prints them as free tables).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.ib_rate import decode_width
from nodegate.parsers.mlxlink_sections import Section, read_sections

_TOOL = "mlxlink"

_KNOWN_SECTIONS = frozenset(
    ("Operational Info", "Supported Info", "Troubleshooting Info", "Tool Information")
    + ("Module Info", "Physical Counters and BER Info", "Histogram of FEC Errors")
    + ("Serdes Tuning Transmitter Info", "PCIe Operational (Enabled) Info")
    + ("EYE Opening Info (PCIe)",)
)
# Module Info keys that get typed fields; every other scalar lands in MlxlinkModule.fields.
_MODULE_TYPED = frozenset(
    ("Identifier", "Compliance", "Cable Type", "Vendor Name", "Vendor Part Number")
    + ("Vendor Serial Number", "FW Version", "Temperature [C]", "Voltage [mV]")
    + ("Bias Current [mA]", "Rx Power Current [dBm]", "Tx Power Current [dBm]")
)
# `61 [-10..80]`, `3.583,3.253,3.233,2.658 [-9.914..6.999]`: readings with the alarm range.
_RANGED_RE = re.compile(r"^(?P<vals>[-\d.,\s]+?)\s*\[(?P<lo>-?[\d.]+)\.\.(?P<hi>-?[\d.]+)\]$")
_MASKED_RE = re.compile(r"^(?P<mask>0x[0-9A-Fa-f]+)\s*\((?P<vals>[^)]*)\)$")  # text Supported Info
_TEXT_LANE_KEYS = ("[per lane]", "Per Lane", "CDR RX", "CDR TX", "Lanes [dB]", "FOM", "Lane")
# A key naming any of _TEXT_LANE_KEYS (one regex search instead of a substring test per name).
_TEXT_LANE_KEY_RE = re.compile("|".join(re.escape(k) for k in _TEXT_LANE_KEYS))
_LANE_SPLIT_RE = re.compile(r"[,\s]+")
_INT_RE = re.compile(r"-?\d+")


@dataclass(frozen=True, slots=True)
class RangedReading:
    """A module reading with its alarm range; one value, or one per lane."""

    values: tuple[float, ...]
    low: float | None
    high: float | None


@dataclass(frozen=True, slots=True)
class MaskedList:
    """Supported Info entry: capability mask and the speed names it decodes to."""

    mask: str | None
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MlxlinkOperational:
    """Operational Info; speed as printed ('IB-NDR', '400G', '25GbE') plus its decoded forms."""

    state: str | None
    physical_state: str | None
    speed: str | None
    ib_speed: str | None
    eth_rate_gbps: int | None
    width_lanes: int | None
    fec: str | None
    loopback_mode: str | None
    auto_negotiation: str | None


@dataclass(frozen=True, slots=True)
class MlxlinkModule:
    """Module Info: identity, DDM readings, per-lane flags (Tx Fault, Rx LOS, ...) and the rest."""

    identifier: str | None
    compliance: str | None
    cable_type: str | None
    vendor_name: str | None
    vendor_part_number: str | None
    vendor_serial_number: str | None
    fw_version: str | None
    temperature_c: RangedReading | None
    voltage_mv: RangedReading | None
    bias_current_ma: RangedReading | None
    rx_power_dbm: RangedReading | None
    tx_power_dbm: RangedReading | None
    lane_values: Mapping[str, tuple[str, ...]]  # per-lane lists as printed; () when N/A
    fields: Mapping[str, str]  # every other scalar, as printed


@dataclass(frozen=True, slots=True)
class MlxlinkCounters:
    """Physical Counters and BER Info. mlxlink prints BER 15E-255 when no error was counted."""

    time_since_last_clear_min: float | None
    effective_physical_errors: int | None
    effective_physical_ber: float | None
    raw_physical_ber: float | None
    raw_physical_ber_per_lane: tuple[float | None, ...]
    raw_physical_errors_per_lane: tuple[int | None, ...]
    link_down_counter: int | None
    link_error_recovery_counter: int | None


@dataclass(frozen=True, slots=True)
class FecBin:
    """One bin of the RS-FEC corrected-symbols histogram."""

    bin: int
    range: str
    occurrences: int


@dataclass(frozen=True, slots=True)
class MlxlinkPcie:
    """`--port_type PCIE`: active and enabled speed/width ('32G-Gen 5', 16 lanes) and eye FOMs."""

    speed_active: str | None
    speed_enabled: str | None
    gen_active: int | None
    gen_enabled: int | None
    width_active_lanes: int | None
    width_enabled_lanes: int | None
    depth_pcie_index_node: str | None
    eye_fom_mode: str | None
    eye_initial_fom: tuple[int | None, ...]
    eye_last_fom: tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class MlxlinkReport:
    """Everything one mlxlink run printed; a section it did not print is None / empty."""

    sections: tuple[str, ...]
    operational: MlxlinkOperational | None
    enabled_link_speed: MaskedList | None
    supported_cable_speed: MaskedList | None
    status_opcode: int | None
    group_opcode: str | None
    recommendation: str | None
    firmware_version: str | None
    mft_version: str | None
    module: MlxlinkModule | None
    counters: MlxlinkCounters | None
    fec_histogram: tuple[FecBin, ...]
    serdes_tx: Mapping[str, Mapping[str, int | None]]  # 'Lane 0' -> {'fir_main': 43, ...}
    pcie: MlxlinkPcie | None


def _na(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value in ("", "N/A") else value


def _float(value: str | None) -> float | None:
    value = _na(value)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    value = _na(value)
    return int(value) if value is not None and _INT_RE.fullmatch(value) else None


def _scalar(sec: Section, key: str) -> str | None:
    value = sec.get(key)
    return _na(value) if isinstance(value, str) else None


def _lanes(sec: Section, key: str) -> tuple[str, ...]:
    value = sec.get(key)
    if isinstance(value, str):
        value = tuple(v.strip() for v in _LANE_SPLIT_RE.split(value.strip()) if v.strip())
    if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
        return ()  # absent, or a (mask, values) pair
    lanes = tuple(map(str, value))
    return () if lanes == ("N/A",) else lanes


def _masked(sec: Section, *keys: str) -> MaskedList | None:
    for key in keys:
        value = sec.get(key)
        if isinstance(value, str) and (m := _MASKED_RE.match(value.strip())):
            names = tuple(v.strip() for v in m["vals"].split(",") if v.strip())
            return MaskedList(mask=m["mask"], values=names)
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], tuple):
            mask = value[0] if isinstance(value[0], str) else None
            return MaskedList(mask=mask, values=tuple(str(v) for v in value[1]))
    return None


def _reading(sec: Section, key: str) -> RangedReading | None:
    raw = _scalar(sec, key)
    if raw is None:
        return None
    m = _RANGED_RE.match(raw)
    text, low, high = (m["vals"], float(m["lo"]), float(m["hi"])) if m else (raw, None, None)
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        return None
    return RangedReading(values=values, low=low, high=high) if values else None


def _operational(sec: Section) -> MlxlinkOperational:
    speed = _scalar(sec, "Speed")
    ib = re.fullmatch(r"IB-([A-Z0-9]+)", speed or "")
    eth = re.fullmatch(r"(\d+)G(?:bE)?(?:_\d+X)?", speed or "")
    width = _scalar(sec, "Width")
    return MlxlinkOperational(
        state=_scalar(sec, "State"),
        physical_state=_scalar(sec, "Physical state"),
        speed=speed,
        ib_speed=ib.group(1) if ib else None,
        eth_rate_gbps=int(eth.group(1)) if eth else None,
        width_lanes=decode_width(width) if width else None,
        fec=_scalar(sec, "FEC"),
        loopback_mode=_scalar(sec, "Loopback Mode"),
        auto_negotiation=_scalar(sec, "Auto Negotiation"),
    )


def _module(sec: Section) -> MlxlinkModule:
    lane_keys = [k for k, v in sec.items() if isinstance(v, tuple) or _TEXT_LANE_KEY_RE.search(k)]
    skip = _MODULE_TYPED | set(lane_keys)
    return MlxlinkModule(
        identifier=_scalar(sec, "Identifier"),
        compliance=_scalar(sec, "Compliance"),
        cable_type=_scalar(sec, "Cable Type"),
        vendor_name=_scalar(sec, "Vendor Name"),
        vendor_part_number=_scalar(sec, "Vendor Part Number"),
        vendor_serial_number=_scalar(sec, "Vendor Serial Number"),
        fw_version=_scalar(sec, "FW Version"),
        temperature_c=_reading(sec, "Temperature [C]"),
        voltage_mv=_reading(sec, "Voltage [mV]"),
        bias_current_ma=_reading(sec, "Bias Current [mA]"),
        rx_power_dbm=_reading(sec, "Rx Power Current [dBm]"),
        tx_power_dbm=_reading(sec, "Tx Power Current [dBm]"),
        lane_values={k: _lanes(sec, k) for k in lane_keys},
        fields={k: v for k, v in sec.items() if k not in skip and isinstance(v, str)},
    )


def _counters(sec: Section) -> MlxlinkCounters:
    return MlxlinkCounters(
        time_since_last_clear_min=_float(_scalar(sec, "Time Since Last Clear [Min]")),
        effective_physical_errors=_int(_scalar(sec, "Effective Physical Errors")),
        effective_physical_ber=_float(_scalar(sec, "Effective Physical BER")),
        raw_physical_ber=_float(_scalar(sec, "Raw Physical BER")),
        raw_physical_ber_per_lane=tuple(
            _float(v) for v in _lanes(sec, "Raw Physical BER Per Lane")
        ),
        raw_physical_errors_per_lane=tuple(
            _int(v) for v in _lanes(sec, "Raw Physical Errors Per Lane")
        ),
        link_down_counter=_int(_scalar(sec, "Link Down Counter")),
        link_error_recovery_counter=_int(_scalar(sec, "Link Error Recovery Counter")),
    )


def _fec_histogram(sec: Section) -> tuple[FecBin, ...]:
    bins = []
    for key, value in sec.items():
        m = re.fullmatch(r"Bin (\d+)", key)
        if m and isinstance(value, tuple) and len(value) == 2:
            count = _int(str(value[1]))
            if count is None:
                raise ParseError(_TOOL, f"FEC histogram {key}: occurrences {value[1]!r}")
            bins.append(FecBin(bin=int(m.group(1)), range=str(value[0]), occurrences=count))
    return tuple(sorted(bins, key=lambda b: b.bin))


def _serdes(sec: Section) -> dict[str, dict[str, int | None]]:
    names = _lanes(sec, "Serdes TX parameters")
    lanes = sorted((k for k in sec if re.fullmatch(r"Lane \d+", k)), key=lambda k: int(k[5:]))
    return {k: {n: _int(v) for n, v in zip(names, _lanes(sec, k), strict=False)} for k in lanes}


def _pcie(op: Section, eye: Section) -> MlxlinkPcie:
    def split(key: str) -> tuple[str | None, str | None]:
        m = re.fullmatch(r"(.+?)\s*\(([^()]*)\)", _scalar(op, key) or "")
        return (_na(m.group(1)), _na(m.group(2))) if m else (_scalar(op, key), None)

    def gen(text: str | None) -> int | None:
        m = re.search(r"Gen\s*(\d+)", text or "")
        return int(m.group(1)) if m else None

    speed_a, speed_e = split("Link Speed Active (Enabled)")
    width_a, width_e = split("Link Width Active (Enabled)")
    mode = _lanes(eye, "FOM Mode")
    return MlxlinkPcie(
        speed_active=speed_a,
        speed_enabled=speed_e,
        gen_active=gen(speed_a),
        gen_enabled=gen(speed_e),
        width_active_lanes=decode_width(width_a) if width_a else None,
        width_enabled_lanes=decode_width(width_e) if width_e else None,
        depth_pcie_index_node=_scalar(op, "Depth, pcie index, node"),
        eye_fom_mode=mode[0] if mode else None,
        eye_initial_fom=tuple(_int(v) for v in _lanes(eye, "Initial FOM")),
        eye_last_fom=tuple(_int(v) for v in _lanes(eye, "Last FOM")),
    )


def parse_mlxlink(text: str) -> MlxlinkReport:
    """Parse mlxlink output in either layout (JSON when it starts with '{')."""
    sections = read_sections(text)
    known = [name for name in sections if name in _KNOWN_SECTIONS]
    if not known:
        raise ParseError(_TOOL, "no known mlxlink section (Operational Info, Module Info, ...)")
    empty = [name for name in known if not sections[name]]
    if empty:
        raise ParseError(_TOOL, f"section {empty[0]!r} is empty (truncated?)")
    op, module = sections.get("Operational Info"), sections.get("Module Info")
    counters = sections.get("Physical Counters and BER Info")
    sup, trouble = sections.get("Supported Info", {}), sections.get("Troubleshooting Info", {})
    tool = sections.get("Tool Information", {})
    pcie_op = sections.get("PCIe Operational (Enabled) Info")
    pcie_eye = sections.get("EYE Opening Info (PCIe)")
    return MlxlinkReport(
        sections=tuple(sorted(sections)),
        operational=_operational(op) if op is not None else None,
        enabled_link_speed=_masked(sup, "Enabled Link Speed (Ext.)", "Enabled Link Speed"),
        supported_cable_speed=_masked(sup, "Supported Cable Speed (Ext.)", "Supported Cable Speed"),
        status_opcode=_int(_scalar(trouble, "Status Opcode")),
        group_opcode=_scalar(trouble, "Group Opcode"),
        recommendation=_scalar(trouble, "Recommendation"),
        firmware_version=_scalar(tool, "Firmware Version"),
        mft_version=_scalar(tool, "MFT Version"),
        module=_module(module) if module is not None else None,
        counters=_counters(counters) if counters is not None else None,
        fec_histogram=_fec_histogram(sections.get("Histogram of FEC Errors", {})),
        serdes_tx=_serdes(sections.get("Serdes Tuning Transmitter Info", {})),
        pcie=_pcie(pcie_op or {}, pcie_eye or {}) if pcie_op or pcie_eye else None,
    )


def parse_mlxlink_json(text: str) -> MlxlinkReport:
    """Parse `mlxlink ... --json`; anything that is not mlxlink JSON raises ParseError."""
    if not text.lstrip().startswith("{"):
        raise ParseError(_TOOL, "expected --json output (a JSON object)")
    return parse_mlxlink(text)
