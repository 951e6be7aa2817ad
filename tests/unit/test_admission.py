"""Admission as data (#13): the policy a run must cover, remediation classes, the gate's
third state (not_qualified) and what follows an incomplete run."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from nodegate.admission.gate import admission_doc, decide
from nodegate.admission.policy import policy_of
from nodegate.admission.remediation import CLASSES, RemediationTable, table_of
from nodegate.core import schemas
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.core.values import Status, Verdict
from nodegate.profiles import ProfileLibrary
from nodegate.reports.terminal import summary_lines
from nodegate.stages.registry import STAGES, checks_by_id, stage

REPO = Path(__file__).resolve().parents[2]
META = {
    "run_id": "r1",
    "started_at": "2026-11-29T00:00:00+00:00",
    "finished_at": "2026-11-29T00:00:01+00:00",
    "inventory": "i.yaml",
    "transport": "ssh",
    "stages": ["reach"],
}
REQUIRED = ("reach.ssh", "reach.kernel.version", "gpu.xid")


def lib(tmp_path: Path | None = None) -> ProfileLibrary:
    return ProfileLibrary([tmp_path] if tmp_path else [REPO / "inventories" / "profiles"])


# -- policy --------------------------------------------------------------------------------
def test_default_policy_is_every_check_of_every_stage_the_profile_defines() -> None:
    pol = policy_of(lib().get("generic-hgx-h100"), STAGES)
    # roce: null, not a RoCE SKU; traffic: null, no load criteria written for it
    assert pol.stages == ("reach", "pcie_gpu", "gpu_load", "hca", "fabric", "ib_pairs", "nccl")
    assert pol.required == tuple(
        i for i in checks_by_id() if not i.startswith(("roce.", "traffic."))
    )


def write_profile(d: Path, admission: str) -> None:
    (d / "p.yaml").write_text(
        f"name: p\ndescription: x\nextends: generic-hgx-h100\nadmission: {admission}\n"
    )


def test_policy_narrowed_and_widened_in_the_profile(tmp_path: Path) -> None:
    write_profile(
        tmp_path,
        "{require: {stages: [reach, hca], not_required: [hca.link.ber, reach.ofed.uniform], "
        "also_required: [gpu.xid, site.test_x.test_y]}}",
    )
    pol = policy_of(lib(tmp_path).get("p"), STAGES)
    reach = [c.id for c in STAGES[0].checks if c.id != "reach.ofed.uniform"]
    hca = [c.id for c in stage("hca").checks if c.id != "hca.link.ber"]
    assert pol.required == (*reach, *hca, "gpu.xid", "site.test_x.test_y")


@pytest.mark.parametrize(
    ("admission", "message"),
    [
        ("{require: {stages: [warp]}}", "admission.require.stages: unknown stage 'warp'"),
        ("{require: {stages: [reach], not_required: [gpu.xid]}}",
         "admission.require.not_required: 'gpu.xid' is not a check of ['reach']"),
        ("{require: {also_required: [gpu.nope]}}",
         "admission.require.also_required: 'gpu.nope' is not a registered or site check"),
        ("{require: {stages: []}}", "admission.require: requires no check"),
    ],
)  # fmt: skip
def test_bad_policies_are_config_errors(tmp_path: Path, admission: str, message: str) -> None:
    write_profile(tmp_path, admission)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        policy_of(lib(tmp_path).get("p"), STAGES)


def test_bad_remediation_class_is_refused_by_the_profile_schema(tmp_path: Path) -> None:
    write_profile(tmp_path, "{remediation: {default: retest, checks: {gpu.xid: pray}}}")
    with pytest.raises(ConfigError, match=r"admission.remediation.checks.gpu.xid: 'pray' is not"):
        lib(tmp_path).get("p")


# -- remediation classes --------------------------------------------------------------------
def test_every_shipped_check_has_a_class_from_the_vocabulary() -> None:
    table = table_of(lib().get("generic-hgx-h100").data)
    assert set(table.checks) == set(checks_by_id())
    assert set(table.checks.values()) <= set(CLASSES)


def test_throttling_and_heat_are_cooling_or_power_repairs_not_cables() -> None:
    # a GPU that slows down for heat or a power brake needs its cooling or power delivery
    # fixed on site (issue #28): neither a cable reseat nor an RMA of the GPU
    table = table_of(lib().get("generic-hgx-h100").data)
    hot = ("gpu.clocks", "gpu_load.telemetry.throttle", "gpu_load.telemetry.temperature")
    assert {c: table.checks[c] for c in hot} == dict.fromkeys(hot, "repair_cooling_power")
    assert CLASSES.index("reseat_cable") < CLASSES.index("repair_cooling_power") < CLASSES.index(
        "rma"
    )


def test_classify_fail_by_check_unjudged_retest_pass_none_and_the_checks_own_wins() -> None:
    t = RemediationTable.of({"default": "retest", "checks": {"pcie.gpu.width": "reseat_cable"}})
    fail = Verdict("pcie.gpu.width", "n1", Status.FAIL, "GPU3")
    assert t.classify(fail).remediation_class == "reseat_cable"
    assert t.classify(Verdict("gpu.count", "n1", Status.FAIL)).remediation_class == "retest"
    assert t.classify(Verdict("pcie.gpu.width", "n1", Status.ERROR)).remediation_class == "retest"
    assert t.classify(Verdict("pcie.gpu.width", "n1", Status.PASS)).remediation_class is None
    xid = Verdict("gpu.xid", "n1", Status.FAIL, remediation_class="rma")
    assert t.classify(xid).remediation_class == "rma"


# -- the gate ------------------------------------------------------------------------------
def run(*verdicts: Verdict) -> RunResult:
    r = RunResult()
    for v in verdicts:
        r.add(v)
    return r


def passes(node: str, checks: tuple[str, ...]) -> list[Verdict]:
    return [Verdict(c, node, Status.PASS) for c in checks]


def doc_of(selected, res, nodes=("n1", "n2"), allow_incomplete=False, **kw):
    profiles = {n: "p" for n in nodes}
    required = {n: REQUIRED for n in nodes}
    d = decide(selected, res, profiles, {}, required=required, **kw)
    return admission_doc(d, list(nodes), META, [c for c, _ in selected],
                         allow_incomplete=allow_incomplete)  # fmt: skip


def test_a_run_covering_the_policy_admits_and_is_complete() -> None:
    sel = [(c, n) for n in ("n1", "n2") for c in REQUIRED]
    doc = doc_of(sel, run(*passes("n1", REQUIRED), *passes("n2", REQUIRED)))
    assert doc["summary"] == {"nodes": 2, "admitted": 2, "rejected": 0, "not_qualified": 0}
    assert (doc["complete"], doc["actionable"], doc["out_of_scope"]) == (True, True, [])
    assert [doc["nodes"][n]["state"] for n in ("n1", "n2")] == ["admitted", "admitted"]


def test_a_diagnostic_run_admits_nobody_and_says_which_checks_did_not_run() -> None:
    sel = [("reach.kernel.version", "n1"), ("reach.kernel.version", "n2")]
    bad = Verdict("reach.kernel.version", "n2", Status.FAIL, "kernel", "5.4", ">= 5.15",
                  message="kernel 5.4", remediation_class="fix_config")  # fmt: skip
    doc = doc_of(sel, run(Verdict("reach.kernel.version", "n1", Status.PASS), bad))
    assert doc["summary"] == {"nodes": 2, "admitted": 0, "rejected": 1, "not_qualified": 1}
    assert (doc["complete"], doc["actionable"]) == (False, False)
    assert doc["out_of_scope"] == ["gpu.xid", "reach.ssh"]
    n1 = doc["nodes"]["n1"]
    assert (n1["state"], n1["admitted"]) == ("not_qualified", False)
    assert [(r["check"], r["status"], r["message"], r["remediation_class"])
            for r in n1["reasons"]] == [
        ("reach.ssh", "out_of_scope", "reach.ssh did not run in this run", "retest"),
        ("gpu.xid", "out_of_scope", "gpu.xid did not run in this run", "retest"),
    ]  # fmt: skip
    assert doc["nodes"]["n2"]["state"] == "rejected"  # a measured failure rejects anyway
    assert doc["remediation"] == {"fix_config": ["n2"]}
    assert doc_of(sel, run(), allow_incomplete=True)["actionable"] is True
    assert summary_lines(doc, "a.json") == [
        "nodegate run r1: 2 nodes, 0 admitted, 1 rejected, 1 not qualified (stages: reach)",
        "REJECTED 1: n2",
        "  by remediation: fix_config n2",
        "n2: reach.kernel.version FAIL [kernel]: kernel 5.4 (expected >= 5.15) (fix_config)",
        "NOT QUALIFIED 1: n1: 2 required checks did not run in this run: gpu.xid, reach.ssh",
        "INCOMPLETE run (not every required check ran): reports/latest and actions do not "
        "follow it (--allow-incomplete to let them)",
        "admission: a.json",
    ]


def test_a_node_with_no_item_at_all_is_not_qualified() -> None:
    sel = [(c, "n1") for c in REQUIRED]
    doc = doc_of(sel, run(*passes("n1", REQUIRED)))
    assert doc["nodes"]["n2"]["state"] == "not_qualified"
    assert [r["check"] for r in doc["nodes"]["n2"]["reasons"]] == list(REQUIRED)
    assert (doc["nodes"]["n1"]["state"], doc["complete"]) == ("admitted", False)


def test_an_unreported_item_makes_the_run_incomplete() -> None:
    sel = [(c, n) for n in ("n1", "n2") for c in REQUIRED]
    outcomes = {k: "passed" for k in sel if k != ("gpu.xid", "n2")}
    doc = doc_of(sel, run(*passes("n1", REQUIRED), *passes("n2", REQUIRED)),
                 item_outcomes=outcomes)  # fmt: skip
    assert doc["nodes"]["n2"]["state"] == "rejected"
    assert doc["complete"] is False


def test_the_schema_refuses_a_not_qualified_node_with_a_failure() -> None:
    sel = [("reach.ssh", "n1"), ("reach.ssh", "n2")]
    doc = doc_of(sel, run(*passes("n1", ("reach.ssh",)), *passes("n2", ("reach.ssh",))))
    forged = doc["nodes"]["n1"]["reasons"][0] | {"status": "fail"}
    doc["nodes"]["n1"]["reasons"][0] = forged
    with pytest.raises(jsonschema.ValidationError):
        schemas.validate("admission", doc)
    doc["nodes"]["n1"] |= {"reasons": [], "admitted": True}  # state still not_qualified
    with pytest.raises(jsonschema.ValidationError):  # state and admitted must agree
        schemas.validate("admission", doc)


# -- options -------------------------------------------------------------------------------
def settings(cli: dict[str, object], ini: dict[str, object] | None = None):
    from nodegate.core.settings import build_settings

    return build_settings(cli, ini or {}, known_transports={"ssh"}, rootpath=Path("."))


def test_admission_options(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("waivers: []\n")
    s = settings(
        {"nodegate_act": ["slurm", "kubernetes", "slurm"], "nodegate_apply": True,
         "nodegate_kubeconfig": str(tmp_path / "w.yaml"),
         "nodegate_waivers": str(tmp_path / "w.yaml"), "nodegate_allow_incomplete": True}
    )  # fmt: skip
    assert (s.act, s.apply, s.allow_incomplete) == (("slurm", "kubernetes"), True, True)
    assert s.waivers == s.kubeconfig == tmp_path / "w.yaml"
    assert settings({}, {"nodegate_act": "kubernetes slurm"}).act == ("kubernetes", "slurm")
    assert settings({}).act == () and settings({}).apply is False


@pytest.mark.parametrize(
    ("cli", "ini", "message"),
    [
        ({"nodegate_act": ["lsf"]}, {}, "--act: got ['lsf'], expected one of slurm, kubernetes"),
        ({}, {"nodegate_act": "slurm pbs"},
         "--act (from ini nodegate_act): got 'slurm pbs', expected one of slurm, kubernetes"),
        ({"nodegate_apply": True}, {},
         "--apply: nothing to apply (give --act slurm or --act kubernetes)"),
        ({"nodegate_act": ["kubernetes"], "nodegate_apply": True}, {},
         "--act kubernetes --apply needs --kubeconfig FILE"),
        ({"nodegate_waivers": "/no/such.yaml"}, {},
         "--waivers: got '/no/such.yaml', expected an existing file"),
    ],
)  # fmt: skip
def test_bad_admission_options_are_config_errors(cli, ini, message) -> None:
    with pytest.raises(ConfigError) as exc:
        settings(cli, ini)
    assert str(exc.value) == message
