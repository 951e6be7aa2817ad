"""Facts shared by the nvidia-smi parsers (`-q -x`, `-q`), and the value readers they share."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Cell texts that mean "no value": nvidia-smi prints these instead of a number or a mode.
# "Unknown Error" is how a GPU that lost its ECC state after an Xid 48 answers (corpus:
# nvidia-smi-q-d-ecc-row-remapper__...-ecc-mode-unknown-error-annotated.txt); callers keep the
# raw text where it carries meaning.
UNAVAILABLE = frozenset(
    {
        "",
        "N/A",
        "Not Supported",
        "Unknown Error",
        "Insufficient Permissions",
        "Requested functionality has been deprecated",
    }
)

_BUS_ID = re.compile(
    r"^(?P<dom>[0-9A-Fa-f]{4,8}):(?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})\.(?P<fn>[0-7])$"
)
_PSTATE = re.compile(r"^P(\d{1,2})$")
_INT = re.compile(r"^(-?\d+)\s*(?:x|%|C|us|MiB|bank\(s\))?$")
_WATTS = re.compile(r"^(-?\d+(?:\.\d+)?)\s*W$")


@dataclass(frozen=True, slots=True)
class ModeState:
    """An Enabled/Disabled setting (ECC, MIG): current and pending, with the raw texts."""

    current: bool | None
    pending: bool | None
    current_raw: str | None
    pending_raw: str | None


@dataclass(frozen=True, slots=True)
class MigDevice:
    """One MIG device (GPU instance + compute instance) of a MIG-enabled GPU."""

    index: int | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    multiprocessor_count: int | None
    memory_total_mib: int | None
    sram_uncorrectable_volatile: int | None


@dataclass(frozen=True, slots=True)
class PcieLink:
    """PCIe link of the GPU as nvidia-smi sees it (generation and width, current vs max)."""

    gen_current: int | None
    gen_max: int | None
    gen_device_current: int | None
    gen_device_max: int | None
    gen_host_max: int | None
    width_current_lanes: int | None
    width_max_lanes: int | None
    replay_count: int | None
    replay_rollover_count: int | None


@dataclass(frozen=True, slots=True)
class ClockEventReasons:
    """Clock event (formerly "throttle") reasons: normalized reason name -> active.

    `naming` is "event" or "throttle": which of the two element/section names the output used.
    Reason names follow NVML/`--query-gpu` (`gpu_idle`, `sw_power_cap`, `hw_slowdown`, ...).
    """

    naming: str
    active: dict[str, bool | None]


@dataclass(frozen=True, slots=True)
class EccCounts:
    """ECC error counts of one scope (volatile or aggregate).

    `correctable`/`uncorrectable` are totals over the layout's fields (None when no field
    reported a number); `fields` keeps every raw per-field count (`single_bit.device_memory`,
    `sram_uncorrectable_parity`, ...).
    """

    correctable: int | None
    uncorrectable: int | None
    fields: dict[str, int | None]


@dataclass(frozen=True, slots=True)
class EccReport:
    """ECC mode and error counters.

    `layout`: "single_double_bit" (Volta and older), "sram_dram" (Ampere-era drivers) or
    "sram_parity_secded" (SRAM uncorrectable split into parity and SEC-DED, driver >= 550).
    """

    mode: ModeState | None
    layout: str | None
    volatile: EccCounts | None
    aggregate: EccCounts | None
    sram_threshold_exceeded: bool | None
    aggregate_uncorrectable_sram_sources: dict[str, int | None]
    channel_repair_pending: bool | None
    tpc_repair_pending: bool | None
    unrepairable_memory: bool | None


@dataclass(frozen=True, slots=True)
class RetiredPages:
    """Dynamic page retirement (pre-Ampere): pages retired per cause, and pending retirement."""

    single_bit_count: int | None
    double_bit_count: int | None
    pending: bool | None


@dataclass(frozen=True, slots=True)
class RemappedRows:
    """Row remapping (Ampere and newer); `histogram_banks`: max/high/partial/low/none."""

    correctable: int | None
    uncorrectable: int | None
    correctable_inactive: int | None
    uncorrectable_inactive: int | None
    pending: bool | None
    failure: bool | None
    histogram_banks: dict[str, int | None]


@dataclass(frozen=True, slots=True)
class Temperatures:
    """GPU and memory temperatures with their thresholds (T.Limit ones are relative)."""

    gpu_temp_c: int | None
    memory_temp_c: int | None
    gpu_tlimit_temp_c: int | None
    shutdown_temp_c: int | None
    slowdown_temp_c: int | None
    max_operating_temp_c: int | None
    memory_max_operating_temp_c: int | None
    target_temp_c: int | None
    shutdown_tlimit_c: int | None
    slowdown_tlimit_c: int | None
    max_operating_tlimit_c: int | None
    memory_max_operating_tlimit_c: int | None


@dataclass(frozen=True, slots=True)
class PowerReadings:
    """One power block; `block` names it: power_readings (old) or gpu_/module_power_readings."""

    block: str
    power_state: str | None
    power_draw_w: float | None
    average_power_draw_w: float | None
    instant_power_draw_w: float | None
    current_limit_w: float | None
    requested_limit_w: float | None
    default_limit_w: float | None
    min_limit_w: float | None
    max_limit_w: float | None


@dataclass(frozen=True, slots=True)
class FabricInfo:
    """NVLink fabric registration (fabric manager / IMEX) state as raw strings."""

    state: str | None
    status: str | None
    clique_id: int | None
    cluster_uuid: str | None
    health_summary: str | None
    health: dict[str, str | None]


@dataclass(frozen=True, slots=True)
class NvsmiGpu:
    """Everything the pcie_gpu stage reads about one GPU from `nvidia-smi -q` (XML or text).

    `index` is the GPU's position in the output; `pci_bus_id` is lowercase with a 4-digit
    domain (`0000:9b:00.0`), `pci_bus_id_raw` as printed. Blocks absent from the output are None.
    """

    index: int
    pci_bus_id: str | None
    pci_bus_id_raw: str | None
    product_name: str | None
    product_brand: str | None
    product_architecture: str | None
    serial: str | None
    uuid: str | None
    minor_number: int | None
    module_id: int | None
    pci_device_id: str | None
    pci_vendor_device: str | None
    vbios_version: str | None
    persistence_mode: bool | None
    virtualization_mode: str | None
    reset_required: bool | None
    drain_and_reset_recommended: bool | None
    recovery_action: str | None
    mig_mode: ModeState | None
    mig_devices: tuple[MigDevice, ...] | None
    memory_total_mib: int | None
    # `Performance State : P8` -> 8: P0 is full speed, higher numbers lower power (P8: idle).
    performance_state: int | None
    pcie: PcieLink | None
    clock_event_reasons: ClockEventReasons | None
    ecc: EccReport | None
    retired_pages: RetiredPages | None
    remapped_rows: RemappedRows | None
    temperature: Temperatures | None
    power: PowerReadings | None
    module_power: PowerReadings | None
    fabric: FabricInfo | None


def text_value(raw: str | None) -> str | None:
    """Free text with the 'no value' markers (N/A, [N/A], deprecated, ...) turned into None."""
    if raw is None:
        return None
    value = raw.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1].strip()
    return None if value in UNAVAILABLE else value


def int_value(raw: str | None) -> int | None:
    """An integer count, optionally with nvidia-smi's unit (`16x`, `41 C`, `2559 bank(s)`)."""
    value = text_value(raw)
    if value is None:
        return None
    match = _INT.match(value)
    return int(match.group(1)) if match else None


def pstate_value(raw: str | None) -> int | None:
    """A performance state such as `P8`."""
    value = text_value(raw)
    match = _PSTATE.match(value) if value is not None else None
    return int(match.group(1)) if match else None


def watts_value(raw: str | None) -> float | None:
    """A power reading such as `69.85 W`."""
    value = text_value(raw)
    if value is None:
        return None
    match = _WATTS.match(value)
    return float(match.group(1)) if match else None


def word_bool(raw: str | None, true: str, false: str) -> bool | None:
    """True/False for the first word(s) of the value matching `true`/`false`, else None.

    Matching on the leading words tolerates annotations appended after the value (corpus:
    `Pending : Yes   <===` in nvidia-smi-q-d-ecc-row-remapper__...-annotated.txt).
    """
    value = text_value(raw)
    if value is None:
        return None
    for word, result in ((true, True), (false, False)):
        if value == word or value.startswith(word + " "):
            return result
    return None


def yes_no(raw: str | None) -> bool | None:
    """Yes -> True, No -> False."""
    return word_bool(raw, "Yes", "No")


def enabled(raw: str | None) -> bool | None:
    """Enabled -> True, Disabled -> False."""
    return word_bool(raw, "Enabled", "Disabled")


def active(raw: str | None) -> bool | None:
    """Active -> True, Not Active -> False (clock event reasons)."""
    return word_bool(raw, "Active", "Not Active")


def normalize_bus_id(raw: str | None) -> str | None:
    """`00000000:9B:00.0` -> `0000:9b:00.0` (lspci's form); None when not a PCI address."""
    if raw is None:
        return None
    match = _BUS_ID.match(raw.strip())
    if match is None:
        return None
    domain = int(match.group("dom"), 16)
    return f"{domain:04x}:{match['bus'].lower()}:{match['dev'].lower()}.{match['fn']}"


def vendor_device(raw: str | None) -> str | None:
    """nvidia-smi's PCI device id `0x233010DE` (device then vendor) -> `10de:2330`."""
    value = text_value(raw)
    if value is None:
        return None
    digits = value[2:] if value.lower().startswith("0x") else value
    if not re.fullmatch(r"[0-9A-Fa-f]{8}", digits):
        return None
    return f"{digits[4:].lower()}:{digits[:4].lower()}"
