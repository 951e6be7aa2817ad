"""Nodes Slurm holds out of service (drained, set down): the Slurm transport runs them over SSH,
and one SSH cannot reach either is not tested (`Reach.HELD`): every check SKIP saying who
holds it and why, not qualified (neither admitted nor rejected, never `reboot`)."""

from __future__ import annotations

from pathlib import Path

from nodegate.admission.gate import admission_doc, decide
from nodegate.core.results import RunResult
from nodegate.core.values import NodeOutcome, Reach, Status, Verdict
from nodegate.reports.terminal import summary_lines
from nodegate.stages.reach import STAGE as REACH
from nodegate.transport.scontrol import SlurmNode, parse_show_node
from nodegate.transport.slurm_jobs import held, held_why

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
SHOW = FIXTURE / "scontrol-show-node-o__22.05.8-idle-drain-foreign-nodegate-unknown.txt"
WHY = "drained by root: bios update; not tested (over SSH: unreachable: connection refused)"


def test_scontrol_says_who_set_a_reason() -> None:
    nodes = parse_show_node(SHOW.read_text())
    assert [(n.name, n.by) for n in nodes.values()] == [
        ("gpu001", "root"), ("gpu002", "root"), ("gpu003", None),
    ]  # fmt: skip
    assert held_why(nodes["gpu001"]) == "drained by root: admin: bad fan Extra=x [a@b]"
    assert held_why(nodes["gpu002"]).startswith("drained by nodegate: nodegate r1: gpu.xid")


def test_held_is_drained_or_set_down_not_a_node_that_does_not_answer() -> None:
    states = {
        "IDLE+DRAIN": True, "MIXED+DRAIN": True, "DOWN+DRAIN": True, "DOWN": True,
        "IDLE+DRAIN+NOT_RESPONDING": True, "DOWN+NOT_RESPONDING": False, "DOWN*": False,
        "IDLE": False, "UNKNOWN": False, "IDLE+NOT_RESPONDING": False,
    }  # fmt: skip
    assert {s: held(SlurmNode("n", s, "r")) for s in states} == states
    assert held(None) is False
    assert held_why(SlurmNode("n", "DOWN", None, "alice")) == "set down by alice: no reason given"
    assert held_why(SlurmNode("n", "IDLE+DRAIN", "x")) == "drained by someone: x"


def held_verdicts() -> list[Verdict]:
    return REACH.unreachable(NodeOutcome(node="gpu2", reach=Reach.HELD, results={}, detail=WHY))


def test_a_held_node_s_checks_are_skipped_with_who_holds_it_and_why() -> None:
    vs = held_verdicts()
    assert len(vs) == len(REACH.checks)
    assert {(v.status, v.component, v.observed, v.message) for v in vs} == {
        (Status.SKIP, "scheduler", "held", WHY)
    }
    assert {v.remediation_class for v in vs} == {"retest"}
    assert vs[0].remediation is not None and "requalify" in vs[0].remediation


def doc(*verdicts: Verdict) -> dict:
    sel = [(c.id, n) for n in ("gpu1", "gpu2") for c in REACH.checks]
    res = RunResult()
    for v in verdicts:
        res.add(v)
    d = decide(sel, res, {"gpu1": "p", "gpu2": "p"}, {})
    meta = {"run_id": "r", "started_at": "2026-12-01T00:00:00+00:00",
            "finished_at": "2026-12-01T00:00:01+00:00", "inventory": "i.yaml",
            "transport": "slurm", "stages": ["reach"]}  # fmt: skip
    return admission_doc(d, ["gpu1", "gpu2"], meta, [c for c, _ in sel])


def test_a_held_node_is_not_qualified_and_in_no_remediation_class() -> None:
    ok = [Verdict(c.id, "gpu1", Status.PASS) for c in REACH.checks]
    out = doc(*ok, *held_verdicts())  # schema-validated
    assert out["summary"] == {"nodes": 2, "admitted": 1, "rejected": 0, "not_qualified": 1}
    assert out["complete"] is True and out["remediation"] == {}
    assert out["nodes"]["gpu2"]["state"] == "not_qualified"
    lines = summary_lines(out, "admission.json")
    assert "NOT QUALIFIED 1: gpu2: not tested, held by the scheduler" in lines
    assert f"  gpu2: {WHY}" in lines
    # a held node with a measured failure besides is rejected for it
    bad = Verdict("reach.kernel.version", "gpu2", Status.FAIL, "kernel", "x", "y", message="m")
    out = doc(*ok, *held_verdicts()[:-1], bad)
    assert out["nodes"]["gpu2"]["state"] == "rejected"


def test_only_a_fallback_session_that_never_got_in_makes_a_held_node_not_tested() -> None:
    from nodegate.transport.local import LocalTransport
    from nodegate.transport.slurm import SlurmTransport

    t = SlurmTransport([], fallback=LocalTransport)
    t.held["gpu2"] = "drained by root: bios update"
    for reach in (Reach.UNREACHABLE, Reach.AUTH_FAILED, Reach.HOSTKEY_UNKNOWN):
        got = t._held_outcome(NodeOutcome("gpu2", reach, {}, "connection refused"))
        assert (got.reach, got.detail) == (
            Reach.HELD,
            f"drained by root: bios update; not tested (over SSH: {reach.value}: connection "
            "refused)",
        )
    for reach in (Reach.HOSTKEY_CHANGED, Reach.TIMEOUT, Reach.ERROR, Reach.OK):
        same = NodeOutcome("gpu2", reach, {}, "x")
        assert t._held_outcome(same) is same
    other = NodeOutcome("gpu3", Reach.UNREACHABLE, {}, "x")  # not held: a dead node as ever
    assert t._held_outcome(other) is other


def test_the_ssh_fallback_is_built_once_and_a_bad_one_says_why() -> None:
    from nodegate.core.errors import ConfigError
    from nodegate.transport.local import LocalTransport
    from nodegate.transport.slurm import SlurmTransport

    built: list[LocalTransport] = []
    t = SlurmTransport([], fallback=lambda: built.append(LocalTransport()) or built[-1])
    assert t.fallback is None  # nothing built until a held node needs it
    assert t._over_ssh() is t._over_ssh() is built[0] and len(built) == 1

    def bad() -> LocalTransport:
        raise ConfigError("inv.yaml: nodes.gpu2.ssh.port: not a port")

    t = SlurmTransport([], fallback=bad)
    assert t._over_ssh() is None
    assert t._fallback_error == "inv.yaml: nodes.gpu2.ssh.port: not a port"
