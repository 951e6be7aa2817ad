"""A verdict carries the threshold it was judged against as data (`reference`): set by
`against`, written to JSON only when set (a verdict without one reads as before), read back."""

from __future__ import annotations

from nodegate.core.checks import Check
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Status, Verdict
from nodegate.core.verdicts import against, error, judged

TOY: Check[None, None] = Check("toy.bw", "bandwidth", lambda *_: [], "port", "test_bw")
FLOOR = Threshold("min", 360, "Gb/s")
BEFORE = [  # the keys of a verdict's JSON before references, in their order
    *("check", "node", "status", "component", "observed", "expected", "unit", "message"),
    *("remediation", "remediation_class", "evidence"),
]


def test_against_carries_its_threshold_and_json_reads_it_back() -> None:
    v = against(TOY, "n1", "mlx5_0", 231.6, FLOOR, "slow", remediation="reseat")
    assert (v.check, v.status, v.observed, v.expected, v.unit) == (
        "toy.bw", Status.FAIL, 231.6, ">= 360", "Gb/s",
    )  # fmt: skip
    assert v.reference == FLOOR
    doc = v.to_json()
    assert list(doc) == [*BEFORE, "reference"]
    assert doc["reference"] == {"direction": "min", "value": 360, "unit": "Gb/s"}
    assert Verdict.from_json(doc) == v


def test_a_verdict_without_reference_serializes_as_before() -> None:
    for v in (
        judged(TOY, "n1", True, "mlx5_0", "ok", "ok", "fine"),
        error(TOY, "n1", "mlx5_0", "tool failed", expected=">= 360"),
    ):
        assert v.reference is None
        assert list(v.to_json()) == BEFORE
        assert Verdict.from_json(v.to_json()) == v


def test_threshold_json_round_trip_keeps_one_of_a_tuple() -> None:
    t = Threshold("one_of", ("PIX", "PXB"))
    assert t.to_json() == {"direction": "one_of", "value": ["PIX", "PXB"], "unit": None}
    assert Threshold.from_json(t.to_json()) == t
    ref = judged(TOY, "n1", False, "GPU0", "SYS", t.expected(), reference=t).to_json()
    assert Verdict.from_json(ref).reference == t
