"""`nvidia-smi -q -x` parser: every corpus capture against reviewed facts, quirks, bad input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.nvsmi_xml import TOOL, parse_nvsmi_xml

from conftest import CORPUS, check_expected, corpus_text

FILES = sorted(p.name for p in (CORPUS / "gpu").glob("nvidia-smi-q-x__*"))
A100_MIG = "gpu/nvidia-smi-q-x__a100-sxm4-80gb-mig-4x1g-driver535.54.03-dtd-v12.xml"
A10G = "gpu/nvidia-smi-q-x__a10g-aws-driver515.105.01-dtd-v11.xml"
T4 = "gpu/nvidia-smi-q-x__tesla-t4-aws-driver515.105.01-dtd-v11.xml"
V100 = "gpu/nvidia-smi-q-x__tesla-v100s-pcie-32gb-8gpu-passthrough-driver460.73.01-dtd-v11.xml"
ADA = "gpu/nvidia-smi-q-x__rtx-4000-sff-ada-driver595.84-dtd-v13.xml"
A5000 = "gpu/nvidia-smi-q-x__rtx-a5000-2gpu-driver590.44.01-dtd-v13.xml"
BLACKWELL = "gpu/nvidia-smi-q-x__rtx-pro-6000-blackwell-maxq-driver590.44.01-dtd-v13.xml"


def test_corpus_is_present() -> None:
    assert len(FILES) == 7


@pytest.mark.parametrize("name", FILES)
def test_corpus(name: str) -> None:
    check_expected("nvsmi_xml", name, parse_nvsmi_xml(corpus_text("gpu/" + name)))


def test_attached_gpus_larger_than_gpu_elements_is_kept() -> None:
    report = parse_nvsmi_xml(corpus_text(A100_MIG))
    assert report.attached_gpus == 4
    assert len(report.gpus) == 1
    assert report.dtd == "nvsmi_device_v12.dtd"


def test_mig_devices_and_remapped_rows_na_in_mig_mode() -> None:
    gpu = parse_nvsmi_xml(corpus_text(A100_MIG)).gpus[0]
    assert gpu.mig_mode is not None and gpu.mig_mode.current is True
    assert gpu.mig_devices is not None and len(gpu.mig_devices) == 4
    assert [d.gpu_instance_id for d in gpu.mig_devices] == [3, 4, 5, 6]
    assert gpu.remapped_rows is None  # <remapped_rows>N/A</remapped_rows>
    assert gpu.clock_event_reasons is not None
    assert gpu.clock_event_reasons.naming == "event"


def test_mig_devices_plain_none_is_empty() -> None:
    gpu = parse_nvsmi_xml(corpus_text(A10G)).gpus[0]
    assert gpu.mig_devices == ()
    assert gpu.mig_mode is not None and gpu.mig_mode.current is None


def test_throttle_naming_normalized_to_event_names() -> None:
    gpu = parse_nvsmi_xml(corpus_text(A10G)).gpus[0]
    reasons = gpu.clock_event_reasons
    assert reasons is not None and reasons.naming == "throttle"
    assert reasons.active["gpu_idle"] is True
    assert reasons.active["hw_slowdown"] is False
    assert "display_clocks_setting" in reasons.active


def test_degraded_link_in_vm_is_reported_as_is() -> None:
    # AWS A10G at 00:1E.0: gen 1 x8 of gen 4 x16 (idle downclock plus a x8 slot).
    gpu = parse_nvsmi_xml(corpus_text(A10G)).gpus[0]
    assert gpu.pci_bus_id == "0000:00:1e.0"
    assert gpu.pci_bus_id_raw == "00000000:00:1E.0"
    assert gpu.pcie is not None
    assert (gpu.pcie.gen_current, gpu.pcie.gen_max) == (1, 4)
    assert (gpu.pcie.width_current_lanes, gpu.pcie.width_max_lanes) == (8, 16)
    assert gpu.pcie.gen_host_max is None  # element absent on driver 515


def test_single_double_bit_ecc_layout_and_old_power_block() -> None:
    report = parse_nvsmi_xml(corpus_text(V100))
    assert len(report.gpus) == 8
    gpu = report.gpus[0]
    assert gpu.ecc is not None and gpu.ecc.layout == "single_double_bit"
    assert gpu.ecc.volatile is not None
    assert gpu.ecc.volatile.fields["single_bit.texture_memory"] is None
    assert (gpu.ecc.volatile.correctable, gpu.ecc.volatile.uncorrectable) == (0, 0)
    assert gpu.power is not None and gpu.power.block == "power_readings"
    assert (gpu.power.power_draw_w, gpu.power.current_limit_w) == (232.8, 250.0)
    assert gpu.retired_pages is not None and gpu.retired_pages.pending is False
    assert [g.index for g in report.gpus] == list(range(8))


def test_retired_pages_populated_and_remapped_na_on_turing() -> None:
    gpu = parse_nvsmi_xml(corpus_text(T4)).gpus[0]
    assert gpu.retired_pages is not None
    assert (gpu.retired_pages.single_bit_count, gpu.retired_pages.double_bit_count) == (0, 0)
    assert gpu.remapped_rows is None


def test_v13_parity_secded_split_ecc_disabled_and_new_power_blocks() -> None:
    gpu = parse_nvsmi_xml(corpus_text(ADA)).gpus[0]
    assert gpu.ecc is not None and gpu.ecc.layout == "sram_parity_secded"
    assert gpu.ecc.mode is not None and gpu.ecc.mode.current is False
    assert gpu.ecc.volatile is not None and gpu.ecc.volatile.uncorrectable is None  # all N/A
    assert gpu.remapped_rows is not None and gpu.remapped_rows.correctable_inactive == 0
    assert gpu.power is not None and gpu.power.block == "gpu_power_readings"
    assert gpu.power.power_state is None  # "Requested functionality has been deprecated"
    assert gpu.power.average_power_draw_w == 8.81
    assert gpu.module_power is not None and gpu.module_power.average_power_draw_w is None
    assert gpu.fabric is not None and gpu.fabric.state is None


def test_two_gpus_in_bus_order_with_their_own_minor_numbers() -> None:
    gpus = parse_nvsmi_xml(corpus_text(A5000)).gpus
    assert [(g.index, g.pci_bus_id, g.minor_number) for g in gpus] == [
        (0, "0000:81:00.0", 1),
        (1, "0000:c1:00.0", 0),
    ]


def test_tab_indented_blackwell_schema() -> None:
    gpu = parse_nvsmi_xml(corpus_text(BLACKWELL)).gpus[0]
    assert gpu.product_architecture == "Blackwell"
    assert gpu.pcie is not None and (gpu.pcie.gen_device_max, gpu.pcie.gen_host_max) == (5, 4)
    assert gpu.pci_vendor_device == "10de:2bb4"


def test_doctype_is_not_fetched_and_entities_are_refused() -> None:
    body = "<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    report = parse_nvsmi_xml('<!DOCTYPE nvidia_smi_log SYSTEM "http://invalid/x.dtd">' + body)
    assert report.gpus == () and report.attached_gpus == 0
    bomb = '<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>'
    with pytest.raises(ParseError, match="entity"):
        parse_nvsmi_xml(bomb)


def test_gpu_without_bus_id_is_an_error() -> None:
    with pytest.raises(ParseError, match="PCI bus id"):
        parse_nvsmi_xml(
            "<nvidia_smi_log><gpu><product_name>x</product_name></gpu></nvidia_smi_log>"
        )


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("   \n\n", id="blank"),
        pytest.param("Lorem ipsum dolor sit amet\nconsectetur: adipiscing\n", id="garbage"),
        pytest.param("\x00\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", id="binary"),
        pytest.param(corpus_text(V100)[: len(corpus_text(V100)) * 2 // 5], id="truncated"),
        pytest.param(corpus_text("gpu/nvidia-smi-q__a10-1gpu-driver535.129.03.txt"), id="text-q"),
        pytest.param("<?xml version='1.0'?><rss><channel/></rss>", id="other-xml"),
        pytest.param("<nvidia_smi_log><timestamp>x</timestamp></nvidia_smi_log>", id="no-gpus"),
        pytest.param("No devices were found\n", id="no-devices"),
    ],
)
def test_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nvsmi_xml(text)
    assert info.value.tool == TOOL
