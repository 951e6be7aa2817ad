"""Waivers (#13): a waived failure admits its node until the waiver expires."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from nodegate.admission.gate import admission_doc, decide
from nodegate.admission.waivers import WaiverSet, load_waivers
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.core.values import Status, Verdict
from nodegate.reports.terminal import summary_lines
from nodegate.session.collection import CheckView
from nodegate.stages.registry import checks_by_id

TODAY = dt.date(2026, 6, 1)
NAMES = ("gpu001", "gpu002", "gpu003")
GROUPS = {"rack1": ("gpu001", "gpu002")}
WAIVERS = """\
waivers:
  - check: gpu.xid
    nodes: gpu[001-002]
    component: GPU2
    reason: Xid 79 on GPU2, RMA ticket OPS-1
    owner: ops@example.com
    expires: 2026-06-01
  - check: hca.firmware.version
    nodes: "@rack1"
    reason: firmware rollout in progress
    owner: net@example.com
    expires: 2026-05-31
"""


W = "waivers:\n  - {check: gpu.xid, nodes: gpu001, reason: r, owner: o, "


def load(tmp_path: Path, text: str, today: dt.date = TODAY) -> WaiverSet:
    p = tmp_path / "waivers.yaml"
    p.write_text(text)
    return load_waivers(p, checks_by_id(), GROUPS, NAMES, today)


def test_active_through_the_expiry_day_and_expired_after(tmp_path: Path) -> None:
    ws = load(tmp_path, WAIVERS)
    assert [(w.index, w.check, sorted(w.node_names)) for w in ws.active] == [
        (1, "gpu.xid", ["gpu001", "gpu002"])
    ]
    assert [(w.index, sorted(w.node_names)) for w in ws.expired] == [(2, ["gpu001", "gpu002"])]
    assert ws.warnings() == [
        "waiver 2 (hca.firmware.version on @rack1, owner net@example.com) expired on "
        "2026-05-31: ignored"
    ]
    assert load(tmp_path, WAIVERS, dt.date(2026, 6, 2)).active == ()


def test_match_by_check_node_component_and_status(tmp_path: Path) -> None:
    ws = load(tmp_path, WAIVERS)
    gpu2 = "GPU2 0000:4c:00.0 serial 1650"
    assert ws.match("gpu.xid", "gpu001", gpu2, "fail") is ws.active[0]
    assert ws.match("gpu.xid", "gpu001", gpu2, "error") is ws.active[0]
    assert ws.match("gpu.xid", "gpu001", "GPU3 0000:5d:00.0", "fail") is None
    assert ws.match("gpu.xid", "gpu001", "GPU21", "fail") is None
    assert ws.match("gpu.xid", "gpu003", gpu2, "fail") is None
    assert ws.match("gpu.xid", "gpu001", gpu2, "skip") is None  # did not run: never waived
    assert ws.match("hca.firmware.version", "gpu001", "mlx5_0", "fail") is None  # expired


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("waivers:\n  - {check: gpu.xid, nodes: gpu001}\n",
         "waivers.0: 'reason' is a required property"),
        (W + "expires: soon}\n",
         "waivers.0.expires: 'soon' does not match"),
        (W + "expires: 2026-02-30}\n",
         "waivers.0.expires: '2026-02-30': day is out of range for month"),
        (W + "expires: 2026-13-01}\n",
         "waivers.0.expires: '2026-13-01': month must be in 1..12"),
        (W + "expires: '2026-02-30'}\n",
         "waivers.0.expires: '2026-02-30': day is out of range for month"),
        (W.replace("gpu.xid", "gpu.xd") + "expires: 2026-01-01}\n",
         "waivers.0.check: 'gpu.xd' is not a registered check id"),
        (W.replace("gpu001", "'@nope'") + "expires: 2026-01-01}\n",
         "waivers.0.nodes: unknown group '@nope'"),
        (W.replace("gpu001", "gpu999") + "expires: 2026-01-01}\n",
         "waivers.0.nodes: 'gpu999': gpu999 not in the inventory"),
        (W.replace("gpu001", "'gpu[002-005]'") + "expires: 2026-01-01}\n",
         r"waivers.0.nodes: 'gpu\[002-005\]': gpu\[004-005\] not in the inventory"),
        ("waivers:\n  - check: gpu.xid\n    nodes: @rack1\n",
         "line 3, column 12: YAML syntax error: found character '@' that cannot start any "
         'token \\(quote a value that starts with @: nodes: "@rack01"\\)'),
        (W + "expires: 2026-01-01,"
         " until: x}\n", "waivers.0: Additional properties are not allowed"),
        ("- just a list\n", r"\(top level\): \['just a list'\] is not of type 'object'"),
    ],
)  # fmt: skip
def test_bad_waivers_are_config_errors_naming_file_and_entry(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=f"waivers.yaml: {message}"):
        load(tmp_path, text)


def decide_with(ws: WaiverSet, *verdicts: Verdict, outcome: str | None = "skipped"):
    res = RunResult()
    for v in verdicts:
        res.add(v)
    sel = [("gpu.xid", "gpu001")]
    outcomes = None if outcome is None else {("gpu.xid", "gpu001"): outcome}
    d = decide(sel, res, {"gpu001": "p"}, {}, outcomes,
               required={"gpu001": ("gpu.xid",)}, waivers=ws)  # fmt: skip
    meta = {"run_id": "r", "started_at": "2026-06-01T00:00:00+00:00", "inventory": "i",
            "finished_at": "2026-06-01T00:00:01+00:00", "transport": "ssh",
            "stages": []}  # fmt: skip
    return admission_doc(d, ["gpu001"], meta, ["gpu.xid"], waivers=ws)


XID = Verdict("gpu.xid", "gpu001", Status.FAIL, "GPU2 0000:4c:00.0", "79", "no Xid",
              message="Xid 79 x1", remediation_class="rma")  # fmt: skip


def test_a_waived_failure_admits_and_is_reported_as_waived(tmp_path: Path) -> None:
    ws = load(tmp_path, WAIVERS)
    doc = decide_with(ws, XID)
    node = doc["nodes"]["gpu001"]
    assert (node["state"], node["reasons"]) == ("admitted", [])
    assert [(w["check"], w["status"], w["waiver"]["index"], w["waiver"]["reason"])
            for w in node["waived"]] == [
        ("gpu.xid", "fail", 1, "Xid 79 on GPU2, RMA ticket OPS-1")
    ]  # fmt: skip
    assert (doc["waivers"]["applied"], len(doc["waivers"]["expired"])) == (1, 1)
    assert summary_lines(doc, "a.json")[2:4] == [
        "WAIVED gpu001: gpu.xid FAIL [GPU2 0000:4c:00.0]: Xid 79 x1 - waiver 1: Xid 79 on GPU2, "
        "RMA ticket OPS-1 (owner ops@example.com, until 2026-06-01)",
        "WARNING waiver 2 (hca.firmware.version on @rack1, owner net@example.com) expired on "
        "2026-05-31: ignored",
    ]


def test_the_same_failure_rejects_once_the_waiver_expired(tmp_path: Path) -> None:
    ws = load(tmp_path, WAIVERS, dt.date(2026, 6, 2))
    doc = decide_with(ws, XID, outcome="failed")
    node = doc["nodes"]["gpu001"]
    assert (node["state"], node["waived"]) == ("rejected", [])
    assert [(r["check"], r["remediation_class"]) for r in node["reasons"]] == [("gpu.xid", "rma")]
    assert doc["remediation"] == {"rma": ["gpu001"]}


def test_a_waived_item_that_never_reported_still_rejects(tmp_path: Path) -> None:
    doc = decide_with(load(tmp_path, WAIVERS), XID, outcome="not run")
    assert doc["nodes"]["gpu001"]["state"] == "rejected"


def test_the_item_of_a_waived_failure_is_an_expected_failure(tmp_path: Path) -> None:
    ws = load(tmp_path, WAIVERS)
    with pytest.raises(pytest.xfail.Exception) as info:
        CheckView("gpu.xid", "gpu001", [XID], ws).assert_pass()
    assert str(info.value) == (
        "waived gpu.xid [GPU2 0000:4c:00.0]: waiver 1 (gpu.xid [GPU2] on gpu[001-002], "
        "owner ops@example.com): Xid 79 on GPU2, RMA ticket OPS-1"
    )
    other = Verdict("gpu.xid", "gpu001", Status.FAIL, "GPU5 0000:9b:00.0", message="Xid 48")
    with pytest.raises(pytest.fail.Exception):
        CheckView("gpu.xid", "gpu001", [XID, other], ws).assert_pass()
