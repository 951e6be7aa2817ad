"""`nvidia-smi --query-*=... --format=csv` and `--help-query-gpu` parsers."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.nvsmi_csv import HELP_TOOL, TOOL, parse_nvsmi_csv, parse_nvsmi_help_query

from conftest import CORPUS, check_expected, corpus_text

FILES = sorted(p.name for p in (CORPUS / "gpu").glob("nvidia-smi-query-*"))
HELP_FILES = sorted(p.name for p in (CORPUS / "gpu").glob("nvidia-smi-help-query-gpu__*"))
H100 = "gpu/nvidia-smi-query-gpu-csv__h100-80gb-hbm3-load-wide-driver590.48.01.txt"
H200 = "gpu/nvidia-smi-query-gpu-csv__h200-idle-wide-driver590.48.01.txt"
L40S = "gpu/nvidia-smi-query-gpu-csv__l40s-idle-wide-driver595.80.txt"
P100 = "gpu/nvidia-smi-query-gpu-csv__tesla-p100-pcie-16gb-short.txt"
RETIRED = "gpu/nvidia-smi-query-retired-pages-csv__h200-na-rows-driver590.48.01.txt"
HELP_590 = "gpu/nvidia-smi-help-query-gpu__driver590.48.01.txt"


def test_corpus_is_present() -> None:
    assert (len(FILES), len(HELP_FILES)) == (5, 1)


@pytest.mark.parametrize("name", FILES)
def test_corpus(name: str) -> None:
    check_expected("nvsmi_csv", name, parse_nvsmi_csv(corpus_text("gpu/" + name)))


@pytest.mark.parametrize("name", HELP_FILES)
def test_help_corpus(name: str) -> None:
    check_expected("nvsmi_help_query", name, parse_nvsmi_help_query(corpus_text("gpu/" + name)))


def test_units_go_to_their_own_mapping() -> None:
    table = parse_nvsmi_csv(corpus_text(H100))
    assert table.units["memory.total"] == "MiB"
    assert table.units["clocks_event_reasons_counters.sw_power_cap"] == "us"
    row = table.rows[0]
    assert row["memory.total"] == "81559"  # "81559 MiB"
    assert row["power.draw"] == "631.95"  # "631.95 W"
    assert row["pcie.link.gen.gpucurrent"] == "5" and row["pcie.link.width.current"] == "16"
    assert row["clocks_event_reasons.hw_slowdown"] == "Not Active"


def test_unavailable_cells_are_none_with_reason_kept() -> None:
    table = parse_nvsmi_csv(corpus_text(H200))
    row, missing = table.rows[0], table.unavailable[0]
    assert row["display_mode"] is None
    assert missing["display_mode"] == "[Requested functionality has been deprecated]"
    assert row["pcie.link.gen.hostmax"] is None and missing["pcie.link.gen.hostmax"] == "[N/A]"
    # Unbracketed N/A (fabric.health.*) and the empty chassis serial are absent too.
    assert row["fabric.health.bandwidth"] is None and missing["fabric.health.bandwidth"] == "N/A"
    assert row["platform.chassis_serial_number"] is None
    assert row["fabric.state"] == "Completed"


def test_nounits_values_keep_header_units_and_no_trailing_newline() -> None:
    table = parse_nvsmi_csv(corpus_text(P100))
    assert table.units["power.draw"] == "W" and table.rows[0]["power.draw"] == "28.16"
    assert table.rows[0]["fan.speed"] is None
    assert table.rows[0]["name"] == "Tesla P100-PCIE-16GB"


def test_l40s_field_list_differs_from_590() -> None:
    table = parse_nvsmi_csv(corpus_text(L40S))
    assert len(table.columns) == 202
    assert table.rows[0]["kmd_version"] == "595.80"
    assert table.rows[0]["remapped_rows.correctable_inactive"] == "0"


def test_retired_pages_rows() -> None:
    table = parse_nvsmi_csv(corpus_text(RETIRED))
    assert [r["retired_pages.cause"] for r in table.rows] == ["Single Bit ECC", "Double Bit ECC"]
    assert all(r["retired_pages.address"] is None for r in table.rows)


def test_590_query_fields_exist_in_590_help() -> None:
    known = {n for f in parse_nvsmi_help_query(corpus_text(HELP_590)).fields for n in f.names}
    for rel in (H100, H200, P100):
        missing = [c for c in parse_nvsmi_csv(corpus_text(rel)).columns if c not in known]
        assert missing == [], rel


def test_help_aliases_sections_and_deprecation_text() -> None:
    fields = {f.names[0]: f for f in parse_nvsmi_help_query(corpus_text(HELP_590)).fields}
    reason = fields["clocks_event_reasons.hw_slowdown"]
    assert reason.names == (
        "clocks_event_reasons.hw_slowdown",
        "clocks_throttle_reasons.hw_slowdown",
    )
    assert reason.section == "clocks_event_reasons"
    assert "Deprecated, use pcie.link.gen.gpucurrent" in fields["pcie.link.gen.current"].description
    assert fields["remapped_rows.correctable"].names == (
        "remapped_rows.correctable",
        "remapped_rows.sbe",
    )
    assert fields["fabric.state"].section is None
    # Quoted compute-mode values inside a description are not field entries.
    assert not any(name.startswith("0: Default") for name in fields)


def test_crlf_and_ansi_are_tolerated() -> None:
    text = corpus_text(H200)
    assert parse_nvsmi_csv("\x1b[0m" + text.replace("\n", "\r\n")) == parse_nvsmi_csv(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("\n \n", id="blank"),
        pytest.param("Lorem ipsum, dolor sit amet!\nconsectetur, adipiscing\n", id="garbage"),
        pytest.param("\x00\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", id="binary"),
        pytest.param(corpus_text(H100)[: len(corpus_text(H100)) * 2 // 5], id="truncated"),
        pytest.param(corpus_text(P100)[: len(corpus_text(P100)) * 2 // 5], id="truncated-short"),
        pytest.param(corpus_text(RETIRED)[:300], id="truncated-mid-row"),
        pytest.param(
            corpus_text("gpu/nvidia-smi-nvlink-status__a100-sxm4-80gb-8gpu-12links.txt"),
            id="nvlink-status",
        ),
        pytest.param(corpus_text("gpu/nvidia-smi-q__a10-1gpu-driver535.129.03.txt"), id="text-q"),
        pytest.param("No devices were found\n", id="no-devices"),
    ],
)
def test_broken_csv_raises(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nvsmi_csv(text)
    assert info.value.tool == TOOL


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param('Lorem ipsum\n"dolor"\n', id="garbage"),
        pytest.param(corpus_text(H100), id="csv"),
        pytest.param(
            'List of valid properties to query for the switch "--query-gpu":\n\n', id="title-only"
        ),
    ],
)
def test_broken_help_raises(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nvsmi_help_query(text)
    assert info.value.tool == HELP_TOOL
