"""`nvidia-smi -q` text parser: corpus captures, -d sections, fragments, quirks, bad input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.nvsmi_text import TOOL, parse_nvsmi_text
from nodegate.parsers.nvsmi_xml import parse_nvsmi_xml

from conftest import CORPUS, check_expected, corpus_text

PATTERNS = ("nvidia-smi-q__*", "nvidia-smi-q-d-*", "nvidia-smi-q-fragment__*")
FILES = sorted(
    {p.name for pattern in PATTERNS for p in (CORPUS / "gpu").glob(pattern)}
    | {p.name for p in (CORPUS / "gpu").glob("nvidia-smi-q-grep-fragment__*")}
)
ECC_D = (
    "gpu/nvidia-smi-q-d-ecc-row-remapper__8gpu-driver550.90.07-pending-yes-ecc-mode-unknown-error"
    "-annotated.txt"
)
PAGES_D = "gpu/nvidia-smi-q-d-page-retirement__azure-8gpu-driver535.86.10.txt"
REMAP_FRAGMENT = "gpu/nvidia-smi-q-fragment__remapped-rows-uncorrectable-4-pending-yes.txt"
FABRIC_GREP = (
    "gpu/nvidia-smi-q-grep-fragment__fabric-completed-health-unhealthy-cliqueid-clusteruuid.txt"
)
A10 = "gpu/nvidia-smi-q__a10-1gpu-driver535.129.03.txt"
H100_1 = "gpu/nvidia-smi-q__h100-80gb-hbm3-1gpu-passthrough-driver590.48.01.txt"
H100_8 = "gpu/nvidia-smi-q__h100-80gb-hbm3-8gpu-driver535.161.08-fabric-completed.txt"
H100_8VM = "gpu/nvidia-smi-q__h100-80gb-hbm3-8gpu-passthrough-driver535.183.01.txt"
H200_MIG = "gpu/nvidia-smi-q__h200-mig-enabled-driver590.48.01.txt"
L40S = "gpu/nvidia-smi-q__l40s-1gpu-driver595.80.txt"
TITAN_V = "gpu/nvidia-smi-q__titan-v-volta-driver560.35.03.txt"
RTX4090 = "gpu/nvidia-smi-q__rtx4090-8gpu-server-driver535.154.05.txt"


def test_corpus_is_present() -> None:
    assert len(FILES) == 13


@pytest.mark.parametrize("name", FILES)
def test_corpus(name: str) -> None:
    check_expected("nvsmi_text", name, parse_nvsmi_text(corpus_text("gpu/" + name)))


def test_ecc_mode_unknown_error_keeps_raw_and_pending_remap_with_annotation() -> None:
    report = parse_nvsmi_text(corpus_text(ECC_D))
    assert (report.attached_gpus, len(report.gpus)) == (8, 1)  # `-i 52:00.0`
    gpu = report.gpus[0]
    assert gpu.pci_bus_id == "0000:52:00.0"
    assert gpu.ecc is not None and gpu.ecc.mode is not None
    assert gpu.ecc.mode.current is None and gpu.ecc.mode.current_raw == "Unknown Error"
    assert gpu.ecc.volatile is not None and gpu.ecc.volatile.uncorrectable is None
    assert gpu.remapped_rows is not None
    # `Pending : Yes   <===` as published: the annotation does not hide the Yes.
    assert gpu.remapped_rows.pending is True and gpu.remapped_rows.uncorrectable == 1
    assert gpu.remapped_rows.histogram_banks == {
        "max": 2559,
        "high": 1,
        "partial": 0,
        "low": 0,
        "none": 0,
    }
    assert gpu.product_name is None and gpu.pcie is None


def test_page_retirement_section_in_pci_domains_above_zero() -> None:
    report = parse_nvsmi_text(corpus_text(PAGES_D))
    assert [g.pci_bus_id for g in report.gpus] == [f"000{i}:00:00.0" for i in range(1, 9)]
    for gpu in report.gpus:
        assert gpu.retired_pages is not None
        assert (gpu.retired_pages.single_bit_count, gpu.retired_pages.pending) == (0, False)


def test_pending_page_retirement_spelling() -> None:
    text = (
        "GPU 00000000:3B:00.0\n    Retired Pages\n        Single Bit ECC : 2\n"
        "        Double Bit ECC : 1\n        Pending Page Retirement : Yes\n"
    )
    pages = parse_nvsmi_text(text).gpus[0].retired_pages
    assert pages is not None and (pages.single_bit_count, pages.double_bit_count) == (2, 1)
    assert pages.pending is True


def test_remapped_rows_fragment_without_header() -> None:
    report = parse_nvsmi_text(corpus_text(REMAP_FRAGMENT))
    assert report.fragment is True and len(report.gpus) == 1
    rows = report.gpus[0].remapped_rows
    assert rows is not None and (rows.uncorrectable, rows.pending, rows.failure) == (4, True, None)
    assert report.gpus[0].pci_bus_id is None


def test_fabric_grep_fragment_with_separator() -> None:
    fabric = parse_nvsmi_text(corpus_text(FABRIC_GREP)).gpus[0].fabric
    assert fabric is not None
    assert (fabric.state, fabric.status, fabric.clique_id) == ("Completed", "Success", 2)
    assert fabric.cluster_uuid == "dc6e40c4-d722-4357-9ba6-5291dd461278"
    assert fabric.health_summary == "Unhealthy" and fabric.health == {"bandwidth": "Full"}


def test_nested_hw_slowdown_reasons_are_read() -> None:
    # `HW Power Brake Slowdown` is indented under `HW Slowdown` in the text form.
    for gpu in parse_nvsmi_text(corpus_text(H100_8)).gpus[:5]:
        reasons = gpu.clock_event_reasons
        assert reasons is not None and reasons.naming == "event"
        assert reasons.active["hw_slowdown"] is True
        assert reasons.active["hw_power_brake_slowdown"] is True
    vm = parse_nvsmi_text(corpus_text(H100_8VM)).gpus[2].clock_event_reasons
    assert vm is not None
    active = sorted(name for name, on in vm.active.items() if on)
    assert active == ["hw_power_brake_slowdown", "sw_power_cap", "sw_thermal_slowdown"]


def test_fabric_block_and_deprecated_values() -> None:
    gpu = parse_nvsmi_text(corpus_text(H100_1)).gpus[0]
    assert gpu.fabric is not None and gpu.fabric.state == "Completed"
    assert gpu.fabric.clique_id == 0 and gpu.fabric.health_summary is None  # N/A
    assert gpu.ecc is not None and gpu.ecc.layout == "sram_parity_secded"
    assert gpu.pcie is not None and gpu.pcie.replay_count == 9
    assert gpu.pcie.gen_host_max is None  # "Host Max : N/A" in a VM
    assert gpu.module_id == 7


def test_remapped_rows_pending_on_a10() -> None:
    rows = parse_nvsmi_text(corpus_text(A10)).gpus[0].remapped_rows
    assert rows is not None
    assert (rows.correctable, rows.uncorrectable, rows.pending, rows.failure) == (0, 4, True, False)


def test_mig_devices_and_remapped_rows_na() -> None:
    gpu = parse_nvsmi_text(corpus_text(H200_MIG)).gpus[0]
    assert gpu.mig_mode is not None and gpu.mig_mode.current is True
    assert gpu.mig_devices is not None and len(gpu.mig_devices) == 5
    assert gpu.mig_devices[1].multiprocessor_count == 32
    assert gpu.remapped_rows is None  # `Remapped Rows : N/A` while in MIG mode


def test_volta_single_double_bit_layout_all_na() -> None:
    gpu = parse_nvsmi_text(corpus_text(TITAN_V)).gpus[0]
    assert gpu.ecc is not None and gpu.ecc.layout == "single_double_bit"
    assert gpu.ecc.volatile is not None and gpu.ecc.volatile.correctable is None
    assert "single_bit.texture_shm" in gpu.ecc.volatile.fields
    assert gpu.remapped_rows is None


def test_inactive_remap_counters_on_595() -> None:
    rows = parse_nvsmi_text(corpus_text(L40S)).gpus[0].remapped_rows
    assert rows is not None and (rows.correctable_inactive, rows.uncorrectable_inactive) == (0, 0)


def test_eight_gpus_in_order_and_serial_na() -> None:
    gpus = parse_nvsmi_text(corpus_text(RTX4090)).gpus
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[7].pci_bus_id == "0000:e1:00.0"
    assert all(g.serial is None for g in gpus)  # `Serial Number : N/A` on GeForce


def test_text_and_xml_agree_on_shared_facts() -> None:
    # The same GPU family in both forms: ECC layout and names line up (A10 text vs A10G XML).
    text_gpu = parse_nvsmi_text(corpus_text(A10)).gpus[0]
    xml = corpus_text("gpu/nvidia-smi-q-x__a10g-aws-driver515.105.01-dtd-v11.xml")
    xml_gpu = parse_nvsmi_xml(xml).gpus[0]
    assert text_gpu.ecc is not None and xml_gpu.ecc is not None
    assert text_gpu.ecc.volatile is not None and xml_gpu.ecc.volatile is not None
    assert text_gpu.ecc.volatile.fields.keys() == xml_gpu.ecc.volatile.fields.keys()
    assert text_gpu.remapped_rows is not None and xml_gpu.remapped_rows is not None
    assert (
        text_gpu.remapped_rows.histogram_banks.keys()
        == xml_gpu.remapped_rows.histogram_banks.keys()
    )


def test_crlf_tabs_and_ansi_are_tolerated() -> None:
    text = corpus_text(H100_1)
    mangled = "\x1b[1m" + text.replace("\n", "\r\n").replace("        ", "\t")
    assert parse_nvsmi_text(mangled) == parse_nvsmi_text(text)


def test_unrelated_top_level_lines_are_kept_as_messages() -> None:
    text = (
        corpus_text(PAGES_D) + "Unable to determine the device handle for GPU0000:9B:00.0: "
        "Unknown Error\n"
    )
    report = parse_nvsmi_text(text)
    assert report.messages == (
        "Unable to determine the device handle for GPU0000:9B:00.0: Unknown Error",
    )


def _truncated(rel: str, at_line_end: bool = False) -> str:
    text = corpus_text(rel)
    cut = len(text) * 2 // 5
    return text[: text.rindex("\n", 0, cut) + 1] if at_line_end else text[:cut]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("\n\n  \n", id="blank"),
        pytest.param("Lorem ipsum dolor sit amet\nconsectetur adipiscing elit\n", id="garbage"),
        pytest.param("\x00\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", id="binary"),
        pytest.param(_truncated(H100_8), id="truncated-8gpu"),
        pytest.param(_truncated(H100_1), id="truncated-1gpu"),
        pytest.param(_truncated(PAGES_D), id="truncated-d-section"),
        pytest.param(_truncated(H100_8, at_line_end=True), id="truncated-8gpu-line-end"),
        pytest.param(_truncated(H100_1, at_line_end=True), id="truncated-1gpu-line-end"),
        pytest.param(_truncated(PAGES_D, at_line_end=True), id="truncated-d-line-end"),
        pytest.param(corpus_text(ECC_D)[:900], id="truncated-ecc-errors"),
        pytest.param(
            corpus_text("gpu/nvidia-smi-topo-m__v100-pcie-8gpu-2nic-mlx5-names-driver470.txt"),
            id="topo-m",
        ),
        pytest.param(
            corpus_text("gpu/nvidia-smi-nvlink-status__a100-sxm4-80gb-8gpu-12links.txt"),
            id="nvlink-status",
        ),
        pytest.param(
            corpus_text("gpu/nvidia-smi-q-x__tesla-t4-aws-driver515.105.01-dtd-v11.xml"),
            id="xml",
        ),
        pytest.param("No devices were found\n", id="no-devices"),
    ],
)
def test_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nvsmi_text(text)
    assert info.value.tool == TOOL


def test_block_missing_labels_of_its_peers_raises() -> None:
    text = corpus_text(PAGES_D)
    cut = text.rindex("        Double Bit ECC")
    broken = text[:cut] + text[cut:].replace("        Double Bit ECC                    : 0\n", "")
    with pytest.raises(ParseError, match="00000008:00:00.0 lacks labels"):
        parse_nvsmi_text(broken)
