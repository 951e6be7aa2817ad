"""Stage ib_pairs end to end: real ib_write_bw-like servers and clients between simulated
nodes over loopback, planned pairs, localization in at most three rounds."""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
from pathlib import Path

import pytest
from nodegate.transport.evidence import resolve_evidence

from tests.integration.chaos import Chaos, Pick
from tests.integration.conftest import Run, base_model

pytestmark = pytest.mark.integration

STAGES = ("-m", "reach or ib_pairs")


def localization(run) -> dict:
    return json.loads((run.run_dir / "ib_pairs" / "localization-generic-hgx-h100.json").read_text())


def bandwidth_reasons(run, node):
    return [r for r in run.rejected()[node] if r["check"] == "ib_pairs.rail.bandwidth"]


def test_one_slow_rail_is_localized_in_three_rounds(sim_fleet):
    fleet = sim_fleet(base_model(16, faults={"gpu006": [{"slow_rail": "2"}]}))
    run = fleet.run(*STAGES)
    assert run.rc == 1, run.stdout
    assert list(run.rejected()) == ["gpu006"]
    (reason,) = bandwidth_reasons(run, "gpu006")
    assert reason["component"] == "mlx5_2 port 1 (rail 2)"
    assert reason["observed"] == pytest.approx(231.6) and reason["expected"] == ">= 360"
    assert "fails with two good partners" in reason["message"]
    loc = localization(run)
    assert loc["rounds_used"] <= 3
    plan = json.loads((run.run_dir / "ib_pairs" / "plan-generic-hgx-h100.json").read_text())
    (first,) = [
        t
        for t in plan["rounds"][0]["tests"]
        if t["rail"] == 2 and "gpu006" in (t["server"], t["client"])
    ]
    partner = first["client"] if first["server"] == "gpu006" else first["server"]
    assert loc["status"][partner]["2"] == "cleared"
    assert loc["status"]["gpu006"]["2"] == "blamed"
    # every node checked for stray ib_write_bw after the stage, none found
    cleanup = [v for v in run.verdicts["verdicts"] if v["check"] == "ib_pairs.cleanup"]
    assert len(cleanup) == 16 and all(v["status"] == "pass" for v in cleanup)
    # evidence: both sides' raw output of each test the verdict rests on (the node's own side,
    # which names its peer on the partner node)
    own = resolve_evidence(run.run_dir, reason["evidence"][0])
    (peer,) = [resolve_evidence(run.run_dir, ref) for ref in own["peers"]]
    sides = {own["role"]: own, peer["role"]: peer}
    assert sorted(sides) == ["client", "server"] and own["round"]["label"] == "1"
    assert "ib_write_bw -d mlx5_2" in sides["client"]["cmd"]
    assert "BW average" in sides["client"]["stdout"] and sides["client"]["rc"] == 0


def test_hung_server_killed_client_errors_and_slow_node(sim_fleet):
    fleet = sim_fleet(
        base_model(
            16,
            faults={
                "gpu003": ["server_hang"],
                "gpu005": ["client_refused"],
                "gpu009": ["qp_error"],
                "gpu012": [{"slow_node": "0.5"}],
            },
        )
    )
    run = fleet.run(*STAGES)
    rej = run.rejected()
    assert sorted(rej) == ["gpu003", "gpu005", "gpu009", "gpu012"], run.stdout
    hang = " ".join(r["message"] for r in bandwidth_reasons(run, "gpu003"))
    assert "killed" in hang
    refused = " ".join(r["message"] for r in bandwidth_reasons(run, "gpu005"))
    assert "Couldn't connect to" in refused
    qp = " ".join(r["message"] for r in bandwidth_reasons(run, "gpu009"))
    assert "Failed to modify QP" in qp
    slow = bandwidth_reasons(run, "gpu012")
    assert len(slow) == 8 and all(r["observed"] == pytest.approx(193.0) for r in slow)
    # nothing left running anywhere, the hung servers included
    cleanup = [v for v in run.verdicts["verdicts"] if v["check"] == "ib_pairs.cleanup"]
    assert cleanup and all(v["status"] == "pass" for v in cleanup)


def test_bad_link_between_two_leaves_blames_no_node(sim_fleet):
    model = base_model(16, racks={"nodes_per_rack": 4})
    # every node of leaf01 sees its link towards leaf03 degraded
    model["faults"] = {"gpu[001-004]": [{"bad_link": "leaf03"}]}
    fleet = sim_fleet(model)
    run = fleet.run(*STAGES)
    assert run.rc == 6, run.stdout  # no node rejected; -m: not qualified (#13)
    loc = localization(run)
    assert {tuple(p["leaves"]) for p in loc["suspect_paths"]} == {("leaf01", "leaf03")}
    cleared = [v for v in run.verdicts["verdicts"] if "suspect" in v["message"]]
    assert cleared and all(v["status"] == "pass" for v in cleared)


def plan_of(run) -> dict:
    return json.loads((run.run_dir / "ib_pairs" / "plan-generic-hgx-h100.json").read_text())


def round_tests(plan: dict, label: str, node: str) -> dict[int, dict]:
    """The tests of round `label` that `node` takes part in, by rail."""
    (rnd,) = [r for r in plan["rounds"] if r["round"] == label]
    return {t["rail"]: t for t in rnd["tests"] if node in (t["server"], t["client"])}


def other(test: dict, node: str) -> str:
    return test["client"] if test["server"] == node else test["server"]


def reasons(run, node) -> list[tuple[str, str, str, str]]:
    return sorted(
        (r["check"], r["component"], r["status"], r["message"]) for r in run.rejected()[node]
    )


def kill_orphans(fleet, node: str) -> None:
    """End what a simulated node still runs (a dropped connection's orphans: a server waiting
    for its client), by PID: the processes whose NG_NODE is that node of this fleet."""
    (addr,) = [n["address"] for n in fleet.model()["nodes"] if n["name"] == node]
    mark = f"NG_NODE={fleet.fleet.root}/by-addr/{addr}".encode()
    for env in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if mark in env.read_bytes().split(b"\0"):
                os.kill(int(env.parent.name), signal.SIGKILL)


def test_a_node_whose_connection_drops_mid_round_rejects_only_itself(sim_fleet):
    # gpu005's sshd session is killed as its first ib_write_bw starts: every read of its
    # processes fails with ConnectionLost, every later spawn and its stray check too.
    fleet = sim_fleet(base_model(16, faults={"gpu005": [{"drop_after": "0"}]}))
    try:
        run = fleet.run(*STAGES)
    finally:
        kill_orphans(fleet, "gpu005")
    assert run.rc == 1, run.stdout
    assert list(run.rejected()) == ["gpu005"]
    lost = "connection to gpu005 lost (closed by the other end)"
    plan = plan_of(run)
    first = round_tests(plan, "1", "gpu005")
    assert sorted(first) == list(range(8))
    assert reasons(run, "gpu005") == sorted(
        [("ib_pairs.cleanup", "ib_write_bw", "error", f"could not check: {lost}")]
        + [
            (
                "ib_pairs.rail.bandwidth",
                f"mlx5_{r} port 1 (rail {r})",
                "error",
                f"{lost}; round 1 with {other(t, 'gpu005')}: not run",
            )
            for r, t in first.items()
        ]
    )
    # its round-1 partner is tested again on every rail, in the same role, with a good node
    (partner,) = {other(t, "gpu005") for t in first.values()}
    second = round_tests(plan, "2", partner)
    assert [len(r["tests"]) for r in plan["rounds"]] == [64, 8]
    assert sorted(second) == list(range(8))
    assert all(
        (t["server"] == partner) == (first[r]["server"] == partner) for r, t in second.items()
    )
    loc = localization(run)
    assert loc["lost"] == {"gpu005": lost} and loc["suspect_paths"] == []
    assert loc["status"] == {
        n: {str(r): "lost" if n == "gpu005" else "pass" for r in range(8)} for n in loc["status"]
    }
    mine = {
        v["component"]: v
        for v in run.verdicts["verdicts"]
        if v["node"] == partner and v["check"] == "ib_pairs.rail.bandwidth"
    }
    for r, t in second.items():
        v = mine[f"mlx5_{r} port 1 (rail {r})"]
        assert v["status"] == "pass"
        assert v["message"] == (
            f"round 1 with gpu005: not counted (gpu005 was lost); round 2 with {other(t, partner)}:"
            f" {v['observed']:g} Gb/s [{plan['method']}]"
        )
    # the evidence of gpu005's side says why it has no result
    rec = resolve_evidence(run.run_dir, run.rejected()["gpu005"][0]["evidence"][0])
    assert rec["detail"] == lost and rec["rc"] is None


def test_unreachable_nodes_in_ib_pairs_alone_are_errors_never_rail_faults(sim_fleet):
    fleet = sim_fleet(
        base_model(16, faults={"gpu003": ["unreachable"], "gpu004": ["auth_refused"]})
    )
    run = fleet.run("-m", "ib_pairs")  # no reach stage to keep them out
    assert run.rc == 1, run.stdout
    assert sorted(run.rejected()) == ["gpu003", "gpu004"]
    addr = {n["name"]: n["address"] for n in fleet.model()["nodes"]}
    where = {n: f"{getpass.getuser()}@{addr[n]}:2222" for n in ("gpu003", "gpu004")}
    why = {
        "gpu003": f"connection to {where['gpu003']} refused",
        "gpu004": f"authentication refused by {where['gpu004']}",
    }
    plan = plan_of(run)
    for node in ("gpu003", "gpu004"):
        first = round_tests(plan, "1", node)
        assert reasons(run, node) == sorted(
            [("ib_pairs.cleanup", "ib_write_bw", "error", f"could not check: {why[node]}")]
            + [
                (
                    "ib_pairs.rail.bandwidth",
                    f"mlx5_{r} port 1 (rail {r})",
                    "error",
                    f"unreachable: {why[node]}; round 1 with {other(t, node)}: not run",
                )
                for r, t in first.items()
            ]
        )
    loc = localization(run)
    assert loc["lost"] == {n: f"unreachable: {w}" for n, w in why.items()}
    assert {n for n, rails in loc["status"].items() if set(rails.values()) != {"pass"}} == {
        "gpu003",
        "gpu004",
    }
    # neither is anybody's partner after round 1
    assert all(
        not {"gpu003", "gpu004"} & {t["server"], t["client"]}
        for rnd in plan["rounds"][1:]
        for t in rnd["tests"]
    )


def test_a_server_that_cannot_start_keeps_its_rc_and_stderr(sim_fleet):
    fleet = sim_fleet(base_model(16, faults={"gpu007": [{"missing": "ib_write_bw"}]}))
    run = fleet.run("-m", "ib_pairs")
    assert run.rc == 1, run.stdout
    assert list(run.rejected()) == ["gpu007"]
    plan = plan_of(run)
    server = "server exited 127 before listening: sh: 1: ib_write_bw: not found"
    client = (
        "client: unrecognized ib_write_bw output: no '... BW Test' header; first unrecognised "
        "line: 'sh: 1: ib_write_bw: not found'"
    )
    by_round = [round_tests(plan, label, "gpu007") for label in ("1", "2", "3")]
    expected = []
    for r in range(8):
        serves = by_round[0][r]["server"] == "gpu007"
        history = "; ".join(
            f"round {n} with {other(ts[r], 'gpu007')}: no result ({server if serves else client})"
            for n, ts in enumerate(by_round, 1)
        )
        assert all((t[r]["server"] == "gpu007") == serves for t in by_round)
        msg = f"fails with two good partners: {history} [{plan['method']}]"
        expected.append(("ib_pairs.rail.bandwidth", f"mlx5_{r} port 1 (rail {r})", "error", msg))
    assert reasons(run, "gpu007") == sorted(expected)
    # the evidence holds the server's rc and all of its stderr
    rail = min(r for r, t in by_round[0].items() if t["server"] == "gpu007")
    (srv,) = [
        r for r in run.rejected()["gpu007"] if r["component"] == f"mlx5_{rail} port 1 (rail {rail})"
    ]
    first = resolve_evidence(run.run_dir, srv["evidence"][0])
    assert (first["role"], first["rc"], first["stderr"], first["killed"]) == (
        "server",
        127,
        "sh: 1: ib_write_bw: not found\n",
        False,
    )


def cut_partners_then_one() -> Pick:
    """Round 1: one node of every pair (rail 0's clients): no pair passes, so no node is good
    after it; round 2: the server of its first test between two nodes not cut."""
    first: list[str] = []

    def pick(rnd: dict) -> list[str]:
        if rnd["round"] == "1":
            first[:] = sorted({t["client"] for t in rnd["tests"] if t["rail"] == 0})
            return first
        if rnd["round"] == "2":
            ok = [t for t in rnd["tests"] if not {t["server"], t["client"]} & set(first)]
            return [ok[0]["server"]] if ok else []
        return []

    return pick


SYSTEMIC_WHEN_LOST = ["ib_pairs.cleanup", "ib_pairs.rail.bandwidth"]


def test_chaos_nodes_whose_partners_were_cut_meet_each_other_and_pass(sim_fleet):
    fleet = sim_fleet(base_model(16))
    p, run_dir = fleet.start(*STAGES)
    try:
        plan = run_dir / "ib_pairs" / "plan-generic-hgx-h100.json"
        with Chaos(fleet, plan, cut_partners_then_one()) as chaos:
            out, _ = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    run = Run(p.returncode, out, run_dir)
    assert run.rc == 1, run.stdout
    gone = chaos.nodes()
    assert len(chaos.cut["1"]) == 8 and len(chaos.cut["2"]) == 1, chaos.cut
    # 9 of 16 nodes lost in one stage: their ERRORs pass the profile's systemic share (0.5 of
    # the nodes that ran the check), a probable controller or network problem, so they are
    # not rejected (not drained: admission.guard); this -m run leaves every node not qualified.
    nodes = run.admission["nodes"]
    assert run.rejected() == {}, chaos.cut
    systemic = sorted(
        n for n, d in nodes.items() if any(r["status"] == "systemic" for r in d["reasons"])
    )
    assert systemic == gone, chaos.cut
    assert [(s["check"], s["nodes"]) for s in run.admission["systemic"]] == [
        (c, gone) for c in SYSTEMIC_WHEN_LOST
    ]
    loc = localization(run)
    assert set(loc["lost"]) == set(gone)
    assert {n: set(s.values()) for n, s in loc["status"].items() if n not in gone} == {
        n: {"pass"} for n in loc["status"] if n not in gone
    }
    # the survivors met each other in round 2 (no node was good after round 1)
    plan = plan_of(run)
    second = [t for r in plan["rounds"] if r["round"] == "2" for t in r["tests"]]
    assert any(t["server"] not in gone and t["client"] not in gone for t in second)
    assert rounds_used(plan) <= 3


def rounds_used(plan: dict) -> int:
    return len({r["id"]["number"] for r in plan["rounds"]})
