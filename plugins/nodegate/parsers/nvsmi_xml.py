"""Parse `nvidia-smi -q -x` (DTD v11-v13) into NvsmiReport; also builds GPUs for the text parser.

The GPU builder reads a flat mapping of lowercase XML paths (`pci/pci_bus_id`,
`ecc_errors/volatile/sram_correctable`, ...); `nvsmi_text` maps its labels onto the same paths.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.gpu_facts import (
    ClockEventReasons,
    EccCounts,
    EccReport,
    FabricInfo,
    MigDevice,
    ModeState,
    NvsmiGpu,
    PcieLink,
    PowerReadings,
    RemappedRows,
    RetiredPages,
    Temperatures,
    active,
    enabled,
    int_value,
    normalize_bus_id,
    pstate_value,
    text_value,
    vendor_device,
    watts_value,
    yes_no,
)

TOOL = "nvidia-smi -q -x"

# Repeated or bulky subtrees the facts do not use; MIG devices are read on their own.
_SKIPPED = frozenset({"processes", "accounted_processes", "supported_clocks", "mig_devices"})
_DOCTYPE = re.compile(r"<!DOCTYPE[^>\[]*(\[.*?\])?\s*>", re.DOTALL)
_DTD_NAME = re.compile(r'<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+"([^"]+)"')
_LINK = "pci/pci_gpu_link_info/"
_HISTOGRAM = ("max", "high", "partial", "low", "none")
# Text labels and old element names -> the reason names of `--query-gpu clocks_event_reasons.*`.
_REASON_ALIASES = {"idle": "gpu_idle", "display_clock_setting": "display_clocks_setting"}


@dataclass(frozen=True, slots=True)
class NvsmiReport:
    """`nvidia-smi -q -x`: report-level versions and one NvsmiGpu per `<gpu>` element.

    `attached_gpus` is what the driver counted; it may exceed len(gpus) (published captures
    cut to one `<gpu>`); both are kept for the evaluator.
    """

    dtd: str | None
    timestamp: str | None
    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    gpus: tuple[NvsmiGpu, ...]


def parse_nvsmi_xml(text: str) -> NvsmiReport:
    """Parse `nvidia-smi -q -x` output; raises ParseError on anything else.

    >>> parse_nvsmi_xml(open("q.xml").read()).gpus[0].pcie.width_current_lanes
    16
    """
    if not text.strip():
        raise ParseError(TOOL, "empty output")
    # nvidia-smi never declares entities; refuse them rather than let expat expand them.
    if "<!ENTITY" in text:
        raise ParseError(TOOL, "entity declarations are not accepted")
    dtd_match = _DTD_NAME.search(text)
    # The DOCTYPE names an external DTD (nvsmi_device_v12.dtd) that is never fetched: drop it.
    body = _DOCTYPE.sub("", text, count=1)
    try:
        root = ET.fromstring(body.strip())
    except ET.ParseError as exc:
        raise ParseError(TOOL, f"not well-formed XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(TOOL, f"root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus = tuple(_gpu(i, element) for i, element in enumerate(root.findall("gpu")))
    attached = int_value(root.findtext("attached_gpus"))
    if not gpus and attached is None:
        raise ParseError(TOOL, "neither <attached_gpus> nor any <gpu> element")
    return NvsmiReport(
        dtd=dtd_match.group(1) if dtd_match else None,
        timestamp=text_value(root.findtext("timestamp")),
        driver_version=text_value(root.findtext("driver_version")),
        cuda_version=text_value(root.findtext("cuda_version")),
        attached_gpus=attached,
        gpus=gpus,
    )


def _flatten(element: ET.Element, prefix: str, out: dict[str, str]) -> None:
    for child in element:
        tag = child.tag.lower()
        if tag in _SKIPPED and not prefix:
            continue
        path = prefix + tag
        if len(child):
            _flatten(child, path + "/", out)
        else:
            out.setdefault(path, (child.text or "").strip())


def _gpu(index: int, element: ET.Element) -> NvsmiGpu:
    fields: dict[str, str] = {}
    _flatten(element, "", fields)
    bus_raw = element.get("id") or fields.get("pci/pci_bus_id")
    if normalize_bus_id(bus_raw) is None:
        raise ParseError(TOOL, f"<gpu> #{index} has no usable PCI bus id ({bus_raw!r})")
    return build_gpu(index, bus_raw, fields, _xml_mig_devices(element))


def _xml_mig_devices(gpu: ET.Element) -> tuple[MigDevice, ...] | None:
    container = gpu.find("mig_devices")
    if container is None:
        return None
    if not len(container):
        # Plain text: "None" means no MIG devices exist; "N/A" means not applicable/unknown.
        return () if (container.text or "").strip() == "None" else None
    devices = []
    for device in container.findall("mig_device"):
        fields: dict[str, str] = {}
        _flatten(device, "", fields)
        devices.append(mig_device(fields))
    return tuple(devices)


def mig_device(fields: Mapping[str, str]) -> MigDevice:
    """One MIG device from its flattened fields (XML names; text maps onto them)."""
    return MigDevice(
        index=int_value(fields.get("index")),
        gpu_instance_id=int_value(fields.get("gpu_instance_id")),
        compute_instance_id=int_value(fields.get("compute_instance_id")),
        multiprocessor_count=int_value(fields.get("device_attributes/shared/multiprocessor_count")),
        memory_total_mib=int_value(fields.get("fb_memory_usage/total")),
        sram_uncorrectable_volatile=int_value(
            fields.get("ecc_error_count/volatile_count/sram_uncorrectable")
        ),
    )


def _under(fields: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in fields.items() if k.startswith(prefix)}


def _sections(fields: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """`_under(fields, "<top>/")` for every top element at once (one pass over the fields)."""
    out: dict[str, dict[str, str]] = {}
    for key, value in fields.items():
        top, slash, rest = key.partition("/")
        if slash:
            if top in out:
                out[top][rest] = value
            else:
                out[top] = {rest: value}
    return out


def build_gpu(
    index: int,
    bus_raw: str | None,
    fields: Mapping[str, str],
    mig_devices: tuple[MigDevice, ...] | None,
) -> NvsmiGpu:
    """Assemble one GPU's facts from flattened `-q -x`-style fields."""
    get = fields.get
    sections = _sections(fields)
    section = sections.get
    return NvsmiGpu(
        index=index,
        pci_bus_id=normalize_bus_id(bus_raw),
        pci_bus_id_raw=bus_raw,
        product_name=text_value(get("product_name")),
        product_brand=text_value(get("product_brand")),
        product_architecture=text_value(get("product_architecture")),
        serial=text_value(get("serial")),
        uuid=text_value(get("uuid")),
        minor_number=int_value(get("minor_number")),
        module_id=int_value(get("platforminfo/module_id") or get("gpu_module_id")),
        pci_device_id=text_value(get("pci/pci_device_id")),
        pci_vendor_device=vendor_device(get("pci/pci_device_id")),
        vbios_version=text_value(get("vbios_version")),
        persistence_mode=enabled(get("persistence_mode")),
        virtualization_mode=text_value(get("gpu_virtualization_mode/virtualization_mode")),
        reset_required=yes_no(get("gpu_reset_status/reset_required")),
        drain_and_reset_recommended=yes_no(get("gpu_reset_status/drain_and_reset_recommended")),
        recovery_action=text_value(get("gpu_recovery_action")),
        mig_mode=_mode(fields, "mig_mode/current_mig", "mig_mode/pending_mig"),
        mig_devices=mig_devices,
        memory_total_mib=int_value(get("fb_memory_usage/total")),
        performance_state=pstate_value(get("performance_state")),
        pcie=_pcie(fields, section("pci", {})),
        clock_event_reasons=_reasons(sections),
        ecc=_ecc(fields, section("ecc_errors", {})),
        retired_pages=_retired(section("retired_pages", {})),
        remapped_rows=_remapped(section("remapped_rows", {})),
        temperature=_temperatures(section("temperature", {})),
        power=_power(sections, "gpu_power_readings") or _power(sections, "power_readings"),
        module_power=_power(sections, "module_power_readings"),
        fabric=_fabric(section("fabric", {})),
    )


def _mode(fields: Mapping[str, str], current: str, pending: str) -> ModeState | None:
    if current not in fields and pending not in fields:
        return None
    cur, pend = fields.get(current), fields.get(pending)
    return ModeState(enabled(cur), enabled(pend), cur, pend)


def _pcie(fields: Mapping[str, str], pci: Mapping[str, str]) -> PcieLink | None:
    link = _under(pci, _LINK.removeprefix("pci/"))
    if not link:
        return None
    return PcieLink(
        gen_current=int_value(link.get("pcie_gen/current_link_gen")),
        gen_max=int_value(link.get("pcie_gen/max_link_gen")),
        gen_device_current=int_value(link.get("pcie_gen/device_current_link_gen")),
        gen_device_max=int_value(link.get("pcie_gen/max_device_link_gen")),
        gen_host_max=int_value(link.get("pcie_gen/max_host_link_gen")),
        width_current_lanes=int_value(link.get("link_widths/current_link_width")),
        width_max_lanes=int_value(link.get("link_widths/max_link_width")),
        replay_count=int_value(fields.get("pci/replay_counter")),
        replay_rollover_count=int_value(fields.get("pci/replay_rollover_counter")),
    )


def _reasons(sections: Mapping[str, Mapping[str, str]]) -> ClockEventReasons | None:
    # Drivers >= 535 say clocks_event_reasons, older ones clocks_throttle_reasons (corpus: the
    # dtd-v11 captures vs the dtd-v12/v13 ones); one mapping either way.
    for naming in ("event", "throttle"):
        section = sections.get(f"clocks_{naming}_reasons", {})
        if section:
            reasons: dict[str, bool | None] = {}
            for key, value in section.items():
                name = key.removeprefix(f"clocks_{naming}_reason_")
                reasons[_REASON_ALIASES.get(name, name)] = active(value)
            return ClockEventReasons(naming=naming, active=reasons)
    return None


def _counts(scope: Mapping[str, str]) -> tuple[str | None, EccCounts | None]:
    if not scope:
        return None, None
    counts = {k.replace("/", "."): int_value(v) for k, v in scope.items()}
    counts.pop("sram_threshold_exceeded", None)  # a Yes/No flag, kept on EccReport
    if any(k.startswith(("single_bit.", "double_bit.")) for k in counts):
        layout = "single_double_bit"
        corr, unc = _bit_total(counts, "single_bit."), _bit_total(counts, "double_bit.")
    else:
        split = "sram_uncorrectable_parity" in counts or "sram_uncorrectable_secded" in counts
        layout = "sram_parity_secded" if split else "sram_dram"
        corr = _sum(counts, ("sram_correctable", "dram_correctable"))
        unc = _sum(
            counts,
            (
                "sram_uncorrectable",
                "sram_uncorrectable_parity",
                "sram_uncorrectable_secded",
                "dram_uncorrectable",
            ),
        )
    return layout, EccCounts(correctable=corr, uncorrectable=unc, fields=counts)


def _bit_total(counts: Mapping[str, int | None], prefix: str) -> int | None:
    total = counts.get(prefix + "total")
    if total is not None:
        return total
    return _sum(counts, tuple(k for k in counts if k.startswith(prefix)))


def _sum(counts: Mapping[str, int | None], keys: tuple[str, ...]) -> int | None:
    numbers = [n for n in (counts.get(k) for k in keys) if n is not None]
    return sum(numbers) if numbers else None


def _ecc(fields: Mapping[str, str], errors: Mapping[str, str]) -> EccReport | None:
    mode = _mode(fields, "ecc_mode/current_ecc", "ecc_mode/pending_ecc")
    if mode is None and not errors:
        return None
    layout, volatile = _counts(_under(errors, "volatile/"))
    aggregate_layout, aggregate = _counts(_under(errors, "aggregate/"))
    sources = _under(errors, "aggregate_uncorrectable_sram_sources/")
    return EccReport(
        mode=mode,
        layout=layout or aggregate_layout,
        volatile=volatile,
        aggregate=aggregate,
        sram_threshold_exceeded=yes_no(errors.get("aggregate/sram_threshold_exceeded")),
        aggregate_uncorrectable_sram_sources={k: int_value(v) for k, v in sources.items()},
        channel_repair_pending=yes_no(errors.get("channel_repair_pending")),
        tpc_repair_pending=yes_no(errors.get("tpc_repair_pending")),
        unrepairable_memory=yes_no(errors.get("unrepairable_memory")),
    )


def _retired(section: Mapping[str, str]) -> RetiredPages | None:
    if not section:
        return None
    # Old drivers say "pending_blacklist", newer add "pending_retirement": either one set wins.
    flags = [yes_no(section.get(k)) for k in ("pending_retirement", "pending_blacklist")]
    pending = True if True in flags else (False if False in flags else None)
    return RetiredPages(
        single_bit_count=int_value(section.get("multiple_single_bit_retirement/retired_count")),
        double_bit_count=int_value(section.get("double_bit_retirement/retired_count")),
        pending=pending,
    )


def _remapped(rows: Mapping[str, str]) -> RemappedRows | None:
    # `<remapped_rows>N/A</remapped_rows>` (Turing/Volta, or any GPU in MIG mode) -> None.
    if not rows:
        return None
    hist = "row_remapper_histogram/row_remapper_histogram_"
    return RemappedRows(
        correctable=int_value(rows.get("remapped_row_corr")),
        uncorrectable=int_value(rows.get("remapped_row_unc")),
        correctable_inactive=int_value(rows.get("remapped_row_corr_inactive")),
        uncorrectable_inactive=int_value(rows.get("remapped_row_unc_inactive")),
        pending=yes_no(rows.get("remapped_row_pending")),
        failure=yes_no(rows.get("remapped_row_failure")),
        histogram_banks={k: int_value(rows.get(hist + k)) for k in _HISTOGRAM if hist + k in rows},
    )


def _temperatures(temp: Mapping[str, str]) -> Temperatures | None:
    if not temp:
        return None
    return Temperatures(
        gpu_temp_c=int_value(temp.get("gpu_temp")),
        memory_temp_c=int_value(temp.get("memory_temp")),
        gpu_tlimit_temp_c=int_value(temp.get("gpu_temp_tlimit")),
        shutdown_temp_c=int_value(temp.get("gpu_temp_max_threshold")),
        slowdown_temp_c=int_value(temp.get("gpu_temp_slow_threshold")),
        max_operating_temp_c=int_value(temp.get("gpu_temp_max_gpu_threshold")),
        memory_max_operating_temp_c=int_value(temp.get("gpu_temp_max_mem_threshold")),
        target_temp_c=int_value(temp.get("gpu_target_temperature")),
        shutdown_tlimit_c=int_value(temp.get("gpu_temp_max_tlimit_threshold")),
        slowdown_tlimit_c=int_value(temp.get("gpu_temp_slow_tlimit_threshold")),
        max_operating_tlimit_c=int_value(temp.get("gpu_temp_max_gpu_tlimit_threshold")),
        memory_max_operating_tlimit_c=int_value(temp.get("gpu_temp_max_mem_tlimit_threshold")),
    )


def _power(sections: Mapping[str, Mapping[str, str]], block: str) -> PowerReadings | None:
    power = sections.get(block, {})
    if not power:
        return None
    # The old <power_readings> block names the software limit power_limit and the effective
    # one enforced_power_limit; the new blocks say requested_ and current_power_limit.
    return PowerReadings(
        block=block,
        power_state=text_value(power.get("power_state")),
        power_draw_w=watts_value(power.get("power_draw")),
        average_power_draw_w=watts_value(power.get("average_power_draw")),
        instant_power_draw_w=watts_value(power.get("instant_power_draw")),
        current_limit_w=watts_value(
            power.get("current_power_limit") or power.get("enforced_power_limit")
        ),
        requested_limit_w=watts_value(
            power.get("requested_power_limit") or power.get("power_limit")
        ),
        default_limit_w=watts_value(power.get("default_power_limit")),
        min_limit_w=watts_value(power.get("min_power_limit")),
        max_limit_w=watts_value(power.get("max_power_limit")),
    )


def _fabric(fabric: Mapping[str, str]) -> FabricInfo | None:
    if not fabric:
        return None
    health = _under(fabric, "health/")
    return FabricInfo(
        state=text_value(fabric.get("state")),
        status=text_value(fabric.get("status")),
        clique_id=int_value(fabric.get("cliqueid")),
        cluster_uuid=text_value(fabric.get("clusteruuid")),
        health_summary=text_value(health.get("summary")),
        health={k: text_value(v) for k, v in health.items() if k != "summary"},
    )
