"""DCGM stress plugins' stated numbers: targeted_power's max/average power, from the corpus
table's Info rows (wrapped, `GPU n ` prefixed) and from a -j document's entity info."""

from __future__ import annotations

from pathlib import Path

from nodegate.parsers.dcgm import parse_dcgmi_diag
from nodegate.parsers.dcgm_json import parse_dcgmi_diag_json
from nodegate.parsers.dcgm_stress import PowerReading, targeted_power_reading

from conftest import corpus_text

A10G = (
    "gpu/dcgmi-diag-r3__a10g-4gpu-dcgm3.3.9-driver570.195.03-targeted-power-fail-gpu1-"
    "warning-info-rows.txt"
)
R3J = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "formats"
    / (
        "dcgmi-diag-r3-j__h100-8gpu-dcgm4-stress-plugins-targeted-power-fail-gpu3-"
        "written-from-dcgm-source.json"
    )
)


def test_table_info_rows_wrapped_mid_word() -> None:
    diag = parse_dcgmi_diag(corpus_text(A10G))
    tp = next(t for t in diag.tests if t.name.lower() == "targeted power")
    got = [targeted_power_reading(m.text) for m in tp.info]
    assert got == [
        PowerReading(0, 299.5, 299.0),
        PowerReading(2, 227.0, 224.0),
        PowerReading(3, 225.6, 223.9),
    ]


def test_json_entity_info_and_the_failing_gpu() -> None:
    diag = parse_dcgmi_diag_json(R3J.read_text(encoding="utf-8"))
    tp = next(t for t in diag.tests if t.name == "targeted_power")
    readings = {m.entity_id: targeted_power_reading(m.text) for m in tp.info}
    assert readings[3] == PowerReading(3, 498.2, 494.0)
    assert readings[0] == PowerReading(0, 699.1, 694.9)
    assert [e.entity_id for e in tp.entities if e.result.value == "Fail"] == [3]
    assert {t.name for t in diag.tests} >= {"targeted_stress", "targeted_power", "memory_bandwidth"}


def test_messages_without_a_power_reading() -> None:
    assert targeted_power_reading("GPU 0 relative stress level 5212") is None
    assert targeted_power_reading("") is None
    assert targeted_power_reading("GPU 1 max power: lots W average power usage: 2 W") is None
