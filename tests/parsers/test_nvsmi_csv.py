"""nvidia-smi --query-gpu CSV parser: the corpus captures (one row), the looping sampler's
shape, the cell readers, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.nvsmi_csv import TOOL, parse_query_gpu_csv
from nodegate.stages.gpu_load.commands import FIELDS

from conftest import CORPUS, check_expected, corpus_text

FILES = sorted(p.name for p in (CORPUS / "gpu").glob("nvidia-smi-query-gpu-csv__*"))
H100 = "gpu/nvidia-smi-query-gpu-csv__h100-80gb-hbm3-load-wide-driver590.48.01.txt"
P100 = "gpu/nvidia-smi-query-gpu-csv__tesla-p100-pcie-16gb-short.txt"
LOOP = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "formats"
    / "nvidia-smi-query-gpu-csv-lms__h100-8gpu-3-samples-gpu3-thermal-written-from-corpus-csv.txt"
)


def test_corpus_is_present() -> None:
    assert len(FILES) == 4


@pytest.mark.parametrize("name", FILES)
def test_corpus(name: str) -> None:
    check_expected("nvsmi_csv", name, parse_query_gpu_csv(corpus_text("gpu/" + name)))


def test_the_sampled_fields_are_spelled_as_the_driver_prints_them() -> None:
    q = parse_query_gpu_csv(corpus_text(H100), FIELDS)
    s = q.samples[0]
    assert (s.number("power.draw"), s.number("clocks.current.sm"), s.number("temperature.gpu")) == (
        631.95, 1980.0, 59.0,
    )  # fmt: skip
    assert s.active("clocks_event_reasons.hw_thermal_slowdown") is False
    assert s.text("clocks_event_reasons.active") == "0x0000000000000000"
    assert s.number("ecc.errors.uncorrected.volatile.total") == 0.0


def test_absent_cells_are_none_and_a_short_field_list_names_what_it_lacks() -> None:
    q = parse_query_gpu_csv(corpus_text(P100))
    assert q.samples[0].text("fan.speed") is None
    assert q.samples[0].number("power.draw") == 28.16
    with pytest.raises(ParseError, match="header lacks timestamp, index, serial"):
        parse_query_gpu_csv(corpus_text(P100), FIELDS)


def test_the_looping_sampler_three_samples_of_eight_gpus() -> None:
    q = parse_query_gpu_csv(LOOP.read_text(encoding="utf-8"), FIELDS)
    check_expected("nvsmi_csv", LOOP.name, q)
    assert len(q.samples) == 24
    gpu3 = [s for s in q.samples if s.text("index") == "3"]
    assert [s.active("clocks_event_reasons.hw_thermal_slowdown") for s in gpu3] == [
        False, True, True,
    ]  # fmt: skip
    assert [s.number("temperature.gpu") for s in gpu3] == [34.0, 92.0, 92.0]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no header line"),
        ("\x00garbage", "binary data"),
        ("#!%@ segfault?? 0xdeadbeef\n", "not a --query-gpu CSV header"),
        ("timestamp, index\n2026/12/01 18:40:01.120\n", "line 2: 1 cells for 2 fields"),
        ("timestamp, index\nyesterday, 0\n", "timestamp 'yesterday' unreadable"),
    ],
)
def test_bad_input(text: str, why: str) -> None:
    with pytest.raises(ParseError, match=why) as exc:
        parse_query_gpu_csv(text)
    assert exc.value.tool == TOOL


def test_bad_cells_are_parse_errors_when_read() -> None:
    q = parse_query_gpu_csv(
        "index, power.draw [W], clocks_event_reasons.hw_slowdown\n0, lots, maybe\n"
    )
    with pytest.raises(ParseError, match="power.draw 'lots' is not a number"):
        q.samples[0].number("power.draw")
    with pytest.raises(ParseError, match="is not Active/Not Active"):
        q.samples[0].active("clocks_event_reasons.hw_slowdown")


def test_truncated_row() -> None:
    text = LOOP.read_text(encoding="utf-8")
    with pytest.raises(ParseError, match="cells for 15 fields"):
        parse_query_gpu_csv(text[: text.rindex(", ")])
