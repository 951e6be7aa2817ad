"""The gate fails closed: only checks that ran and passed admit a node."""

from __future__ import annotations

import jsonschema
import pytest
from nodegate.admission.gate import admission_doc, decide
from nodegate.core import schemas
from nodegate.core.results import RunResult
from nodegate.core.values import Status, Verdict
from nodegate.reports.folding import folds, reason_line

SEL = [
    ("reach.ssh", "gpu1"),
    ("reach.kernel.version", "gpu1"),
    ("reach.ssh", "gpu2"),
    ("reach.kernel.version", "gpu2"),
]


def result(*verdicts: Verdict) -> RunResult:
    r = RunResult()
    for v in verdicts:
        r.add(v)
    return r


def doc_for(res: RunResult, outcomes=None):
    d = decide(SEL, res, {"gpu1": "p", "gpu2": "p"}, {}, outcomes)
    return admission_doc(
        d,
        ["gpu1", "gpu2"],
        {
            "run_id": "r",
            "started_at": "2026-11-29T00:00:00+00:00",
            "finished_at": "2026-11-29T00:00:01+00:00",
            "inventory": "i.yaml",
            "transport": "ssh",
            "stages": ["reach"],
        },
        [c for c, _ in SEL],
    )


def all_pass() -> list[Verdict]:
    return [Verdict(c, n, Status.PASS) for c, n in SEL]


def test_all_pass_admits():
    doc = doc_for(result(*all_pass()))
    assert doc["summary"] == {"nodes": 2, "admitted": 2, "rejected": 0, "not_qualified": 0}


@pytest.mark.parametrize("status", [Status.FAIL, Status.ERROR, Status.SKIP])
def test_any_non_pass_rejects(status):
    vs = all_pass()
    vs[1] = Verdict("reach.kernel.version", "gpu1", status, "kernel", "x", "y", message="m")
    doc = doc_for(result(*vs))
    assert not doc["nodes"]["gpu1"]["admitted"] and doc["nodes"]["gpu2"]["admitted"]
    assert doc["nodes"]["gpu1"]["reasons"][0]["status"] == status.value


def test_missing_verdict_is_not_run():
    doc = doc_for(result(*all_pass()[:-1]))
    r = doc["nodes"]["gpu2"]["reasons"]
    assert [x["status"] for x in r] == ["not_run"] and not doc["nodes"]["gpu2"]["admitted"]


def test_one_failing_component_among_passing_ones_rejects():
    vs = all_pass() + [Verdict("reach.kernel.version", "gpu2", Status.FAIL, "GPU3")]
    doc = doc_for(result(*vs))
    assert not doc["nodes"]["gpu2"]["admitted"]


def test_item_not_reported_is_not_run():
    outcomes = {k: "passed" for k in SEL}
    del outcomes[("reach.ssh", "gpu2")]  # e.g. the session was interrupted (-x, crash)
    doc = doc_for(result(*all_pass()), outcomes)
    assert doc["nodes"]["gpu2"]["reasons"][0]["status"] == "not_run"
    assert doc["nodes"]["gpu1"]["admitted"]


def test_schema_rejects_admitted_node_with_reasons():
    doc = doc_for(result(*all_pass()))
    doc["nodes"]["gpu1"]["reasons"] = [
        {
            "check": "a.b",
            "status": "fail",
            "component": "",
            "observed": 1,
            "expected": 2,
            "message": "m",
        }
    ]
    with pytest.raises(jsonschema.ValidationError):
        schemas.validate("admission", doc)


def test_folds_group_nodes():
    vs = all_pass()
    fail = ("reach.kernel.version", Status.FAIL, "kernel", "5.15.0-91", ">= 5.15.0-100")
    message = "kernel 5.15.0-91, expected >= 5.15.0-100"
    vs[1] = Verdict(fail[0], "gpu1", *fail[1:], message=message)
    vs[3] = Verdict(fail[0], "gpu2", *fail[1:], message=message)
    lines = [
        reason_line(ns, r) for f in folds(doc_for(result(*vs))) for r, ns in f.reasons.values()
    ]
    assert lines == [f"gpu[1-2]: reach.kernel.version FAIL [kernel]: {message}"]


def test_a_reason_is_its_verdict_less_the_node() -> None:
    from nodegate.admission.gate import Reason

    v = Verdict(
        "hca.fw", "n1", Status.FAIL, component="mlx5_0", observed="28.37.1014",
        expected=">= 28.39", unit="version", message="old firmware",
        remediation="update the firmware", evidence=("raw/n1/hca/fw.txt",),
        remediation_class="reflash",
    )  # fmt: skip
    got = Reason.of(v).to_json()
    assert list(got) == [
        "check", "status", "component", "observed", "expected", "unit", "message",
        "remediation", "remediation_class", "evidence",
    ]  # fmt: skip
    assert got == {k: v.to_json()[k] for k in got}
