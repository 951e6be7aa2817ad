"""--act slurm (#13 item 4), the parts without a cluster: reading `scontrol show node -o`
(a real capture), the reason text, and the plan per node (NHC's rule). The real Slurm runs
in tests/integration/test_admission_slurm.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodegate.actions.base import reason_text
from nodegate.actions.slurm import (
    REASON_MAX,
    Scontrol,
    SlurmError,
    SlurmNode,
    parse_show_node,
    plan_node,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
SHOW = FIXTURE / "scontrol-show-node-o__22.05.8-idle-drain-foreign-nodegate-unknown.txt"
XID = {
    "check": "gpu.xid", "status": "fail", "component": "GPU2 0000:4c:00.0 serial 1650",
    "message": "Xid 79 x1 (GPU has fallen off the bus: drain_rma)", "remediation_class": "rma",
}  # fmt: skip
REASON = "nodegate r1: gpu.xid GPU2 Xid 79 x1 (GPU has fallen off the bus: drain_rma) (rma)"


def test_parse_real_show_node() -> None:
    assert parse_show_node(SHOW.read_text()) == {
        "gpu001": SlurmNode("gpu001", "IDLE+DRAIN", "admin: bad fan Extra=x [a@b]"),
        "gpu002": SlurmNode("gpu002", "IDLE+DRAIN", REASON),
        "gpu003": SlurmNode("gpu003", "UNKNOWN", None),
    }


@pytest.mark.parametrize("text", ["garbage\n", "NodeName=gpu001 Arch=x86_64\n"])
def test_show_node_not_understood_is_an_error(text: str) -> None:
    with pytest.raises(SlurmError, match="scontrol show node: line not understood"):
        parse_show_node(text)


def test_reason_text_names_the_worst_cause_and_fits_slurms_limit() -> None:
    kernel = {"check": "reach.kernel.version", "status": "fail", "component": "kernel",
              "message": "kernel 5.4", "remediation_class": "fix_config"}  # fmt: skip
    assert reason_text("r1", [kernel, XID], REASON_MAX) == REASON[:-5] + "(rma) +1 more"
    long = {**XID, "message": "\x1b[2J" + "é" * 600}
    text = reason_text("r1", [long], REASON_MAX)
    assert len(text) == REASON_MAX and text.isascii() and text.isprintable()
    assert text.startswith("nodegate r1: gpu.xid GPU2 \\x1b[2J??") and text.endswith("... (rma)")


def test_a_new_reason_never_nests_nodegates_old_one() -> None:
    # #21: a transport reported the drained node with Slurm's reason in its message, and the
    # next drain's reason quoted nodegate's earlier one inside itself.
    ssh = {"check": "reach.ssh", "status": "fail", "component": "ssh",
           "message": "unreachable: Slurm reports gpu014 IDLE+DRAIN (nodegate act-apply: "
           "gpu.xid GPU2 Xid 79 x1 (GPU has fallen off the bus: drain_rma) (rma)) for 3 h",
           "remediation_class": "reboot"}  # fmt: skip
    assert reason_text("slurm-full", [ssh], REASON_MAX) == (
        "nodegate slurm-full: reach.ssh ssh unreachable: Slurm reports gpu014 IDLE+DRAIN for 3 h "
        "(reboot)"
    )
    unclosed = {**ssh, "message": "Slurm reports IDLE+DRAIN nodegate r0: gpu.xid GPU2 (rma"}
    assert reason_text("r2", [unclosed], REASON_MAX) == (
        "nodegate r2: reach.ssh ssh Slurm reports IDLE+DRAIN (reboot)"
    )


def test_a_node_judged_unreachable_because_nodegate_drained_it_keeps_its_reason() -> None:
    ssh = {"check": "reach.ssh", "status": "fail", "component": "ssh",
           "message": f"unreachable: Slurm reports gpu014 IDLE+DRAIN ({REASON})",
           "remediation_class": "reboot"}  # fmt: skip
    rec = plan_node(doc("rejected", [ssh]), "gpu001", SlurmNode("n01", "IDLE+DRAIN", REASON))
    assert (rec.action, rec.result, rec.why, rec.reason) == (
        "none", "unchanged", "held by nodegate's own drain: its reason kept", None
    )  # fmt: skip
    # another's drain quoted: not ours to keep or replace
    admin = SlurmNode("n01", "IDLE+DRAIN", "admin: bios")
    assert plan_node(doc("rejected", [ssh]), "gpu001", admin).why == (
        "foreign reason kept (not set by nodegate)"
    )


def doc(state: str, reasons: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    node = {"state": state, "reasons": reasons or [], "labels": {"slurm_node": "n01"}}
    return {"run_id": "r1", "nodes": {"gpu001": node}}


@pytest.mark.parametrize(
    ("state", "current", "action", "result", "why"),
    [
        ("rejected", SlurmNode("n01", "IDLE", None), "drain", "planned", "rejected"),
        ("rejected", SlurmNode("n01", "MIXED", None), "drain", "planned", "rejected"),
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", "nodegate r0: reach.ssh (reboot)"),
         "drain", "planned", "rejected"),
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", REASON), "none", "unchanged",
         "already drained by nodegate for this cause"),
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", REASON.replace("r1", "r0", 1)), "none",
         "unchanged", "already drained by nodegate for this cause"),
        # the same cause measured again (another count, more causes): one reason per cause
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", REASON.replace("x1", "x3") + " +2 more"),
         "none", "unchanged", "already drained by nodegate for this cause"),
        # another component, another class, another check: a new cause replaces ours
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", REASON.replace("GPU2", "GPU21")), "drain",
         "planned", "rejected"),
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", REASON.replace("(rma)", "(reset_gpu)")),
         "drain", "planned", "rejected"),
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", "nodegate r0: gpu.xidx GPU2 (rma)"),
         "drain", "planned", "rejected"),
        ("rejected", SlurmNode("n01", "IDLE", REASON), "drain", "planned", "rejected"),
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", "admin: bad fan"), "none", "unchanged",
         "foreign reason kept (not set by nodegate)"),
        ("rejected", SlurmNode("n01", "IDLE+DRAIN", "admin: " + REASON), "none", "unchanged",
         "foreign reason kept (not set by nodegate)"),
        ("rejected", SlurmNode("n01", "DOWN+NOT_RESPONDING", "Not responding"), "none",
         "unchanged", "foreign reason kept (not set by nodegate)"),
        ("admitted", SlurmNode("n01", "IDLE+DRAIN", REASON), "resume", "planned",
         "admitted; drained by nodegate"),
        ("admitted", SlurmNode("n01", "DOWN+DRAIN", REASON), "resume", "planned",
         "admitted; drained by nodegate"),
        ("admitted", SlurmNode("n01", "IDLE+DRAIN", "admin: bad fan"), "none", "unchanged",
         "foreign drain/down reason kept (not nodegate's)"),
        ("admitted", SlurmNode("n01", "IDLE", None), "none", "unchanged",
         "admitted and in service"),
        ("not_qualified", SlurmNode("n01", "IDLE", None), "none", "unchanged",
         "not_qualified: no action"),
    ],
)  # fmt: skip
def test_plan_follows_nhcs_rule(
    state: str, current: SlurmNode, action: str, result: str, why: str
) -> None:
    rec = plan_node(doc(state, [XID] if state == "rejected" else []), "gpu001", current)
    assert (rec.target, rec.action, rec.result, rec.why) == ("n01", action, result, why)
    assert rec.reason == (REASON if action == "drain" else None)
    assert rec.before == current.to_json()


def test_a_node_slurm_does_not_know_is_a_failure() -> None:
    rec = plan_node(doc("rejected", [XID]), "gpu001", None)
    assert (rec.action, rec.result, rec.error) == (
        "none", "failed", "scontrol show node has no node 'n01' (inventory label slurm_node?)"
    )  # fmt: skip


def test_scontrol_missing_or_slurm_conf_wrong_is_said_at_once(tmp_path: Path) -> None:
    with pytest.raises(SlurmError, match=r"^scontrol not found on PATH \(install slurm-client\)$"):
        Scontrol({"PATH": str(tmp_path)}).nodes()
    conf = tmp_path / "nope.conf"
    with pytest.raises(SlurmError, match=f"^SLURM_CONF={conf}: no such file$"):
        Scontrol({"PATH": "/usr/bin:/bin", "SLURM_CONF": str(conf)}).nodes()


def test_an_action_time_failure_is_recorded_and_counted(tmp_path: Path) -> None:
    import json

    from nodegate.actions.slurm import SlurmAction

    failures: list[str] = []
    env = {"PATH": "/usr/bin:/bin", "SLURM_CONF": str(tmp_path / "gone.conf")}
    d = {**doc("rejected", [XID]), "actionable": True}
    SlurmAction(True, failures, Scontrol(env)).pytest_nodegate_admission(d, tmp_path)
    slurm = json.loads((tmp_path / "actions.json").read_text())["targets"]["slurm"]
    why = f"SLURM_CONF={tmp_path / 'gone.conf'}: no such file"
    assert (slurm["mode"], slurm["error"], slurm["actions"], failures) == (
        "apply", why, [], [f"slurm: {why}"]
    )  # fmt: skip
