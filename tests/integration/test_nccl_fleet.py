"""Stage nccl end to end: real mpirun over the simulated fleet's sshd, one simulated
all_reduce_perf rank per GPU meeting its job's other ranks over loopback TCP; single-node jobs,
the whole set, localization of bad nodes in at most four rounds after it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ClusterShell.NodeSet import NodeSet

from tests.integration.chaos import Chaos, Pick
from tests.integration.conftest import Run, SimFleet, base_model

pytestmark = pytest.mark.integration

PROFILE = "sim-nccl"


def nccl_model(n: int, faults: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    doc = base_model(n, **extra)
    doc["profile"] = PROFILE
    doc["hardware"]["nccl"] = {"gpus": 2}
    if faults:
        doc["faults"] = faults
    return doc


def write_profile(
    fleet: SimFleet,
    job_timeout_s: float = 40,
    launcher: str = "mpirun",
    ranks: int = 2,
    matrix: dict[str, Any] | None = None,
    transport: dict[str, Any] | None = None,
) -> Path:
    """A test profile over generic-hgx-h100: 2 ranks per node, a short sweep, the fleet's
    ssh_config for mpirun's remote starts, Open MPI's traffic on loopback; no collective
    matrix unless `matrix` is given, no transport asserted unless `transport` is."""
    d = fleet.tmp / "profiles"
    d.mkdir(exist_ok=True)
    agent = f"ssh -F {fleet.fleet.root / 'ssh_config'} -p 2222"
    doc = {
        "name": PROFILE,
        "description": "generic-hgx-h100 with 2 GPUs per node for the simulated fleet",
        "extends": "generic-hgx-h100",
        # `-m nccl` runs only this stage: the policy is the stage, so admitted means admitted
        "admission": {"require": {"stages": ["nccl"]}},
        "nccl": {
            "launcher": launcher,
            "ranks_per_node": ranks,
            "sweep": {"min_bytes": 1048576, "max_bytes": 268435456, "step_factor": 4},
            "message_bytes": 268435456,
            "iterations": 5,
            "warmup_iterations": 1,
            "single_node_timeout_s": job_timeout_s,
            "job_timeout_s": job_timeout_s,
            "mpirun": {
                "args": ["--allow-run-as-root"],
                "mca": {
                    "plm_rsh_agent": agent,
                    "oob_tcp_if_include": "lo",
                    "btl_tcp_if_include": "lo",
                },
            },
            "srun": {"mpi": "none"},
            "matrix": matrix,
            "transport": transport,
        },
    }
    if transport is not None:
        doc["sources"] = {"nccl.transport": "IB with GPU Direct RDMA on every rail: the test"}
    (d / f"{PROFILE}.yaml").write_text(yaml.safe_dump(doc))
    return d


def run_nccl(fleet: SimFleet, **kw: Any):
    return fleet.run("-m", "nccl", f"--profiles-dir={write_profile(fleet, **kw)}", timeout=400)


def doc(run, name: str) -> dict[str, Any]:
    return json.loads((run.run_dir / "nccl" / f"{name}-{PROFILE}.json").read_text())


def verdicts(run, check: str) -> dict[str, dict[str, Any]]:
    return {v["node"]: v for v in run.verdicts["verdicts"] if v["check"] == check}


def statuses(run, check: str) -> dict[str, str]:
    return {n: v["status"] for n, v in verdicts(run, check).items()}


def nodes(n: int, *but: str) -> list[str]:
    return [x for x in (f"gpu{i:03d}" for i in range(1, n + 1)) if x not in but]


def only(n: int, bad: dict[str, str], rest: str = "pass") -> dict[str, str]:
    """Every node of gpu[001-n] `rest`, the `bad` ones as given."""
    return {x: bad.get(x, rest) for x in nodes(n)}


def assert_clean(run, n: int) -> None:
    cleanup = verdicts(run, "nccl.cleanup")
    assert len(cleanup) == n and {v["status"] for v in cleanup.values()} == {"pass"}


CHECKS = ("nccl.single_node.busbw", "nccl.whole.busbw", "nccl.localized")


def assert_only(run, n: int, bad: dict[str, dict[str, str]]) -> None:
    """Exact per-node statuses of every nccl check: `bad` {check: {node: status}}, the rest
    pass; admitted: exactly the nodes every check passed."""
    for check in CHECKS:
        assert statuses(run, check) == only(n, bad.get(check, {})), check
    rejected = {x for b in bad.values() for x, st in b.items() if st != "pass"}
    assert sorted(run.admitted()) == nodes(n, *rejected)


def test_healthy_fleet_passes(sim_fleet):
    fleet = sim_fleet(nccl_model(16))
    run = run_nccl(fleet)
    assert run.rc == 0, run.stdout
    assert_only(run, 16, {})
    whole = verdicts(run, "nccl.whole.busbw")
    assert whole["gpu001"]["observed"] == pytest.approx(359.76, abs=0.05)
    assert whole["gpu001"]["expected"] == ">= 340"
    plan = doc(run, "plan")
    assert [r["round"] for r in plan["rounds"]] == ["1", "2"]
    assert plan["rounds"][1]["tests"][0]["nodes"] == "gpu[001-016]"
    assert doc(run, "localization")["rounds_used"] == 0
    assert_clean(run, 16)


def test_one_slow_node_of_16_is_named(sim_fleet):
    fleet = sim_fleet(nccl_model(16, {"gpu007": [{"nccl_slow": "all"}]}))
    run = run_nccl(fleet)
    assert run.rc == 1, run.stdout
    loc = doc(run, "localization")
    assert loc["named"] == ["gpu007"] and loc["rounds_used"] == 3
    assert loc["not_confirmed"] == [] and loc["fault_needs_group"] is None
    # the culprit fails the whole set and localization; every node it cleared passes
    fail = {"gpu007": "fail"}
    assert_only(run, 16, {"nccl.whole.busbw": fail, "nccl.localized": fail})
    bad = verdicts(run, "nccl.localized")["gpu007"]
    assert "fails with two good partners" in bad["message"]
    whole = verdicts(run, "nccl.whole.busbw")
    assert whole["gpu007"]["observed"] == pytest.approx(218.27, abs=0.05)
    method = (
        " [all_reduce_perf 1048576-268435456 B x4, 2 ranks/node via mpirun, judged at "
        "268435456 B; floor busbw >= 340 GB/s, avg >= 190]"
    )
    assert whole["gpu007"]["message"] == (
        "whole-16 (round 2): 218.27 GB/s, avg 149.573; localized: gpu007; this node fails "
        "with good partners: pair-gpu007-gpu002 (round 4): 217.21 GB/s, avg 142.155; "
        "pair-gpu007-gpu001 (round 5): 217.21 GB/s, avg 142.155" + method
    )
    assert whole["gpu007"]["evidence"] == [
        "raw/gpu001/nccl.json#r2-whole-16",
        "raw/gpu007/nccl.json#r4-pair-gpu007-gpu002",
        "raw/gpu007/nccl.json#r5-pair-gpu007-gpu001",
    ]
    good = whole["gpu001"]
    assert good["observed"] == pytest.approx(356.88, abs=0.05) and good["expected"] == ">= 340"
    assert good["message"] == (
        "whole-set job failed (whole-16 (round 2): 218.27 GB/s, avg 149.573); localized: "
        "gpu007; this node cleared by group-gpu001-2 (round 3): 356.88 GB/s, avg 211.67" + method
    )
    assert good["evidence"] == [
        "raw/gpu001/nccl.json#r2-whole-16",
        "raw/gpu001/nccl.json#r3-group-gpu001-2",
    ]
    # the plan of every round is written, round 3 on: disjoint jobs
    plan = doc(run, "plan")
    for rnd in plan["rounds"][2:]:
        seen: list[str] = []
        for t in rnd["tests"]:
            seen += t["nodes"].split(",") if "[" not in t["nodes"] else [t["nodes"]]
        assert len(seen) == len(set(seen))
    assert_clean(run, 16)


def test_two_slow_nodes_of_64_are_named(sim_fleet):
    fleet = sim_fleet(
        nccl_model(64, {"gpu013": [{"nccl_slow": "3:0.5"}], "gpu050": [{"nccl_slow": "all"}]})
    )
    run = run_nccl(fleet, job_timeout_s=120)  # 128 ranks a round on 2 cores
    assert run.rc == 1, run.stdout
    loc = doc(run, "localization")
    why = {
        n: v["message"] for n, v in verdicts(run, "nccl.localized").items() if v["status"] != "pass"
    }
    assert loc["named"] == ["gpu013", "gpu050"] and loc["rounds_used"] == 3, why
    assert loc["not_confirmed"] == [] and loc["fault_needs_group"] is None
    fail = {"gpu013": "fail", "gpu050": "fail"}
    assert_only(run, 64, {"nccl.whole.busbw": fail, "nccl.localized": fail})
    assert_clean(run, 64)


def test_hung_rank_ends_at_the_deadline_every_rank_killed(sim_fleet):
    # gpu003's rank hangs in jobs over several nodes (in NCCL's network proxy)
    fleet = sim_fleet(nccl_model(8, {"gpu003": [{"nccl_hang": "multi"}]}))
    run = run_nccl(fleet, job_timeout_s=10)
    assert run.rc == 1, run.stdout
    assert doc(run, "localization")["named"] == ["gpu003"]
    # the hung whole-set job is an ERROR for gpu003; the nodes localization cleared pass
    err = {"gpu003": "error"}
    assert_only(run, 8, {"nccl.whole.busbw": err, "nccl.localized": err})
    whole = verdicts(run, "nccl.whole.busbw")
    msg = "whole-8 (round 2): job did not finish within 10 s: every rank killed"
    assert whole["gpu003"]["message"].startswith(msg + "; localized: gpu003")
    assert whole["gpu001"]["message"].startswith(f"whole-set job failed ({msg}); localized")
    assert_clean(run, 8)  # nothing left on any node: the hung ranks were killed


def test_ib_error_in_the_whole_set_is_an_error_and_names_the_node(sim_fleet):
    # IB carries traffic between nodes only: gpu005's single-node job passes
    fleet = sim_fleet(nccl_model(8, {"gpu005": ["nccl_ib_error"]}))
    run = run_nccl(fleet, job_timeout_s=20)
    assert run.rc == 1, run.stdout
    loc = doc(run, "localization")
    assert loc["named"] == ["gpu005"]
    err = {"gpu005": "error"}
    assert_only(run, 8, {"nccl.whole.busbw": err, "nccl.localized": err})
    v = verdicts(run, "nccl.localized")["gpu005"]
    assert "IB completion error status 12" in v["message"] and v["observed"] is None
    assert "IB completion error status 12" in verdicts(run, "nccl.whole.busbw")["gpu005"]["message"]
    assert_clean(run, 8)


def test_nccl_errors_are_errors_and_wrong_data_fails(sim_fleet):
    faults = {
        "gpu002": ["nccl_internal_error"],
        "gpu004": ["nccl_dies"],
        "gpu006": ["nccl_wrong"],
        "gpu009": ["nccl_nvlink"],
    }
    fleet = sim_fleet(nccl_model(12, faults))
    run = run_nccl(fleet)
    assert run.rc == 1, run.stdout
    # the other eight form the whole set and pass it; the four stay out of it
    out = dict.fromkeys(faults, "skip")
    single = {"gpu002": "error", "gpu004": "error", "gpu006": "fail", "gpu009": "fail"}
    assert_only(
        run, 12, {"nccl.single_node.busbw": single, "nccl.whole.busbw": out, "nccl.localized": out}
    )
    single_v = verdicts(run, "nccl.single_node.busbw")
    assert "NCCL WARN Cuda failure 'an illegal memory access" in single_v["gpu002"]["message"]
    assert "wrong data" in single_v["gpu006"]["message"]
    assert single_v["gpu009"]["observed"] == pytest.approx(375.93, abs=0.05)
    assert sorted(run.rejected()) == sorted(faults)
    assert_clean(run, 12)


@pytest.mark.parametrize("launcher", ["mpirun", "srun"])
def test_a_dying_rank_is_named_with_its_exit_not_a_timeout(sim_fleet, launcher: str):
    faults = {"gpu002": ["nccl_rank_dies"], "gpu004": [{"nccl_rank_dies": "KILL"}]}
    fleet = sim_fleet(nccl_model(4, faults), slurm=launcher == "srun")
    run = run_nccl(fleet, job_timeout_s=45, launcher=launcher)
    assert run.rc == 1, run.stdout
    single = verdicts(run, "nccl.single_node.busbw")
    assert statuses(run, "nccl.single_node.busbw") == only(
        4, {"gpu002": "error", "gpu004": "error"}
    )
    said = "rank 0: fatal: cuMemAlloc failed: out of memory (simulated)"
    how = {"gpu002": "exited 3", "gpu004": "killed by signal 9 (Killed)"}
    if launcher == "srun":
        how["gpu004"] = "killed (Killed)"
    for node in ("gpu002", "gpu004"):
        msg = single[node]["message"]
        assert msg.startswith(f"single-{node} (round 1): rank 0 on {node} {how[node]}"), msg
        assert said in msg and "did not finish" not in msg, msg
    for c in doc_commands(run, "gpu002").values():
        assert c["duration_s"] < 20 and not c["timed_out"], c
    assert_clean(run, 4)


def doc_commands(run, node: str) -> dict[str, Any]:
    commands: dict[str, Any] = json.loads((run.run_dir / "raw" / node / "nccl.json").read_text())[
        "commands"
    ]
    return commands


def test_srun_in_the_slurm_transport_s_allocation_slow_node_is_named(sim_fleet):
    # --transport slurm: every job a step of the run's allocation (taken on first use)
    fleet = sim_fleet(nccl_model(8, {"gpu006": [{"nccl_slow": "all"}]}), transport="slurm")
    run = run_nccl(fleet, launcher="srun")
    assert run.rc == 1, run.stdout
    loc = doc(run, "localization")
    assert loc["named"] == ["gpu006"] and loc["rounds_used"] == 3, loc
    fail = {"gpu006": "fail"}
    assert_only(run, 8, {"nccl.whole.busbw": fail, "nccl.localized": fail})
    launcher = doc(run, "plan")["launcher"]
    assert launcher == "srun"
    cmd = doc_commands(run, "gpu006")["r1-single-gpu006"]["cmd"]
    assert cmd.startswith("srun --jobid=") and " --overlap --overcommit -N 1 " in cmd, cmd
    assert_clean(run, 8)


def run_with_chaos(fleet: SimFleet, pick: Pick, **kw: Any) -> tuple[Run, dict[str, list[str]]]:
    """The nccl stage with `Chaos`: as each round begins, the node `pick` names is cut."""
    p, run_dir = fleet.start("-m", "nccl", f"--profiles-dir={write_profile(fleet, **kw)}")
    try:
        with Chaos(fleet, run_dir / "nccl" / f"plan-{PROFILE}.json", pick) as chaos:
            out, _ = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return Run(p.returncode, out, run_dir), chaos.cut


def test_a_node_cut_during_the_whole_set_job_is_its_error_every_other_node_passes(sim_fleet):
    fleet = sim_fleet(nccl_model(16))
    run, cut = run_with_chaos(fleet, lambda rnd: ["gpu005"] if rnd["round"] == "2" else [])
    assert run.rc == 1, run.stdout
    assert cut == {"2": ["gpu005"]} and list(run.rejected()) == ["gpu005"]
    lost = "connection to gpu005 lost (closed by the other end)"
    loc = doc(run, "localization")
    assert loc["lost"] == {"gpu005": lost} and loc["fault_needs_group"] is None
    assert loc["status"] == only(16, {"gpu005": "lost"}) and loc["rounds_used"] == 0
    # the whole set again without it, in a sub-round
    plan = doc(run, "plan")
    assert [r["round"] for r in plan["rounds"]] == ["1", "2", "2b"]
    assert plan["rounds"][2]["tests"][0]["nodes"] == "gpu[001-004,006-016]"
    err = {"gpu005": "error"}
    assert_only(run, 16, {"nccl.whole.busbw": err, "nccl.localized": err})
    whole = verdicts(run, "nccl.whole.busbw")
    assert whole["gpu005"]["message"].startswith(f"whole-16 (round 2): not run ({lost})")
    assert whole["gpu001"]["message"].startswith("whole-15 (round 2b): ")
    assert verdicts(run, "nccl.localized")["gpu005"]["message"] == lost
    cleanup = statuses(run, "nccl.cleanup")
    assert cleanup == only(16, {"gpu005": "error"})


def cut_one_per_round(rnd: dict[str, Any]) -> list[str]:
    """A node of each round's first job past the single-node jobs: a rank node of a group
    (its last), the suspect of a pair (its launcher)."""
    if rnd["round"] == "1":
        return []
    first = rnd["tests"][0]
    if first["phase"] == "pair":
        return [str(first["subject"])]
    return [list(NodeSet(first["nodes"]))[-1]]


def test_chaos_one_node_cut_in_each_round_rejects_only_the_cut_nodes(sim_fleet):
    fleet = sim_fleet(nccl_model(16))
    run, cut = run_with_chaos(fleet, cut_one_per_round)
    assert run.rc == 1, run.stdout
    plan = doc(run, "plan")
    rounds = [r["round"] for r in plan["rounds"]]
    assert sorted(cut) == sorted(rounds[1:]), (cut, rounds)  # one node cut in every round
    gone = [n for nodes in cut.values() for n in nodes]
    assert sorted(run.rejected()) == sorted(gone), cut
    loc = doc(run, "localization")
    assert set(loc["lost"]) <= set(gone) and loc["fault_needs_group"] is None
    assert loc["named"] == [] and loc["not_confirmed"] == []
    assert {s for n, s in loc["status"].items() if n not in gone} == {"cleared"}


def test_a_launcher_that_cannot_start_is_an_error_in_its_own_words(sim_fleet):
    fleet = sim_fleet(nccl_model(3, {"gpu002": [{"missing": "mpirun"}]}))
    run = run_nccl(fleet)
    assert run.rc == 1, run.stdout
    assert statuses(run, "nccl.single_node.busbw") == only(3, {"gpu002": "error"})
    msg = verdicts(run, "nccl.single_node.busbw")["gpu002"]["message"]
    # the launcher's own words, not "no '# nThread ... nGpus' header" of an output it never had
    assert msg == (
        "single-gpu002 (round 1): mpirun exited 127: sh: 1: mpirun: not found [all_reduce_perf "
        "1048576-268435456 B x4, 2 ranks/node via mpirun, judged at 268435456 B; floor busbw "
        ">= 430 GB/s, avg >= 280]"
    )
    assert sorted(run.admitted()) == ["gpu001", "gpu003"]


MATRIX = {
    "collectives": ["all_reduce", "alltoall"],
    "scales": {
        "leaf": {"message_bytes": 268435456, "iterations": 2},
        "leaves": {"message_bytes": 268435456, "iterations": 2, "leaves": 2},
        "whole": {"message_bytes": 268435456, "iterations": 2},
    },
    "line_rate": {"value": 400, "unit": "GB/s"},
    "max_drop_pct": 20,
    "floors": {
        c: {s: {"min": m, "unit": "GB/s"} for s in ("leaf", "leaves", "whole")}
        for c, m in (("all_reduce", 340), ("alltoall", 240))
    },
}


def test_matrix_names_a_slow_node_and_a_leaf_s_uplinks_rejecting_only_the_node(sim_fleet):
    """16 nodes in 4 leaves: gpu002 slow on its rails (node localization names it), leaf02
    short of half its uplinks (alltoall over leaf01+leaf02 and the whole set halve; all_reduce
    keeps its rate), the spine between leaf03 and leaf04 slow (every collective over both
    halves; localization's probes name the pair in the rounds that name gpu002): the
    uplinks and the pair are repair-list items over the nodes behind them; gpu011 falls back
    to sockets and gpu015 runs without GPU Direct RDMA, both at full bandwidth (only their
    NCCL_DEBUG lines tell): each fails nccl.transport alone; no node but these three rejected."""
    faults: dict[str, Any] = {
        "gpu002": [{"nccl_slow": "all"}],
        "gpu006": ["leaf_uplink_down"],
        "gpu011": ["nccl_socket_fallback"],
        "gpu015": ["gdr_off"],
    }
    for n in nodes(12)[8:]:  # leaf03's nodes
        faults.setdefault(n, []).append({"spine_slow": "leaf04"})
    model = nccl_model(16, faults, racks={"nodes_per_rack": 4})
    fleet = sim_fleet(model)
    run = run_nccl(fleet, matrix=MATRIX, transport={"net": ["IB"], "gdr": "required"})
    assert run.rc == 1, run.stdout
    fail = {"gpu002": "fail"}
    transport = {"gpu011": "fail", "gpu015": "fail"}
    assert_only(
        run, 16, {"nccl.whole.busbw": fail, "nccl.localized": fail, "nccl.transport": transport}
    )
    # per host, not per job: the two nodes fail nccl.transport alone, with their parts
    tv = verdicts(run, "nccl.transport")
    assert statuses(run, "nccl.transport") == only(16, transport)
    assert {n: tv[n]["component"] for n in transport} == {"gpu011": "nccl/net", "gpu015": "mlx5_0"}
    assert tv["gpu011"]["message"].startswith(
        "whole-16 (round 2) on host gpu011: nccl/net: NCCL used NET/Socket over eth0 after "
        "NET/IB found no device (the profile allows IB) [gpu011:"
    ), tv["gpu011"]["message"]
    assert "NCCL INFO Using network Socket" in tv["gpu011"]["message"]
    assert tv["gpu015"]["message"].startswith(
        "whole-16 (round 2) on host gpu015: mlx5_0: GPU Direct RDMA Disabled for HCA mlx5_0, "
        "mlx5_1; 2 NET channel line(s) without GDRDMA; rings connected with GDR 0 (the "
        "profile requires GPU Direct RDMA) [gpu015:"
    ), tv["gpu015"]["message"]
    assert tv["gpu001"]["message"].startswith(
        "NET/IB over mlx5_0, mlx5_1, GPU Direct RDMA on, NVLS available (whole-16, round 2; "
    ), tv["gpu001"]["message"]
    failing = {(v["node"], v["check"]) for v in run.verdicts["verdicts"] if v["status"] == "fail"}
    assert failing == {("gpu002", "nccl.whole.busbw"), ("gpu002", "nccl.localized"),
                       ("gpu011", "nccl.transport"), ("gpu015", "nccl.transport")}  # fmt: skip
    plan = doc(run, "plan")
    assert plan["matrix"] == {
        "collectives": ["all_reduce", "alltoall"], "scales": ["leaf", "leaves", "whole"],
        "rounds": 6, "jobs": 14, "estimated_s": 60.0,
    }  # fmt: skip
    # the estimate is on the terminal before the first round runs
    note = "nodegate: nccl sim-nccl: collective matrix: 6 rounds, 14 jobs, estimated 60 s"
    assert run.stdout.index(note) < run.stdout.index("nccl sim-nccl: round 1: 16 tests")
    got: dict[str, dict[str, str]] = {}
    for v in run.verdicts["verdicts"]:
        if v["check"] == "nccl.matrix":
            mark = "marked" if v.get("remediation") else v["status"]
            got.setdefault(v["node"], {})[v["component"]] = mark
    near = set(nodes(8, "gpu002"))  # leaf01 and leaf02, behind leaf02's uplinks
    far = set(nodes(16)[8:])  # leaf03 and leaf04, the slow spine between them
    want = {
        n: {
            "all_reduce@leaf": "pass", "all_reduce@leaves": "marked" if n in far else "pass",
            "all_reduce@whole": "marked", "alltoall@leaf": "pass", "alltoall@leaves": "marked",
            "alltoall@whole": "marked", **({"leaves leaf03+leaf04": "marked"} if n in far else {}),
        }
        for n in nodes(16, "gpu002")
    }  # fmt: skip
    assert got == {**want, "gpu002": {"collective": "skip"}}
    # node localization's three rounds name gpu002; the probes of its round 4 the pair
    loc = doc(run, "localization")
    assert loc["named"] == ["gpu002"] and loc["rounds_used"] == 3, loc
    assert loc["leaf_pair"] == ["leaf03", "leaf04"] and loc["leaf_pairs_left"] is None
    assert set(loc["status"].values()) == {"cleared", "blamed"}
    r4 = [(t["phase"], t["nodes"]) for t in plan["rounds"][3]["tests"]]
    assert r4 == [("pair", "gpu[001-002]"), ("pair", "gpu[003-004]"), ("probe", "gpu[005,009]"),
                  ("probe", "gpu[006,013]"), ("probe", "gpu[010,014]")]  # fmt: skip
    infra = {(i["component"], i["message"]): i["nodes"] for i in run.admission["infrastructure"]}
    assert infra == {
        ("all_reduce@leaves", "all_reduce at leaves (8 nodes over leaf03, leaf04): 182.32 GB/s "
         "(46 % of line rate): 182.32 GB/s below the floor 340; 49 % below leaf (358.7 GB/s; at "
         "most 20 % allowed); the break is at the leaf uplinks and spines between these "
         "leaves"): sorted(far),
        ("all_reduce@whole", "all_reduce at whole (15 nodes over leaf01, leaf02, leaf03, "
         "leaf04): 182.4 GB/s (46 % of line rate): 182.4 GB/s below the floor 340; 49 % below "
         "leaves (359.33 GB/s; at most 20 % allowed); the break is at the spine tier under the "
         "whole set"): nodes(16, "gpu002"),
        ("alltoall@leaves", "alltoall at leaves (7 nodes over leaf01, leaf02): 135.73 GB/s (34 % "
         "of line rate): 135.73 GB/s below the floor 240; 49 % below leaf (264.98 GB/s; at most "
         "20 % allowed); the break is at the leaf uplinks and spines between these leaves"):
        sorted(near),
        ("alltoall@leaves", "alltoall at leaves (8 nodes over leaf03, leaf04): 135.76 GB/s (34 % "
         "of line rate): 135.76 GB/s below the floor 240; 49 % below leaf (264.98 GB/s; at most "
         "20 % allowed); the break is at the leaf uplinks and spines between these leaves"):
        sorted(far),
        ("alltoall@whole", "alltoall at whole (15 nodes over leaf01, leaf02, leaf03, leaf04): "
         "135.84 GB/s (34 % of line rate): 135.84 GB/s below the floor 240; the break is at the "
         "spine tier under the whole set"): nodes(16, "gpu002"),
        ("leaves leaf03+leaf04", "flows between leaf03 and leaf04 are slow: every failed job "
         "over nodes of both leaves (1: probe-gpu010-2 (round 4): 181.66 GB/s, avg 122.879), "
         "every job inside one leaf and over other leaves passed; between them: the uplinks of "
         "leaf03 and leaf04 and the spines between them"): sorted(far),
    }  # fmt: skip
    whole = verdicts(run, "nccl.whole.busbw")["gpu009"]["message"]
    assert "localized: gpu002; between leaves: leaf03 and leaf04 (their flows slow)" in whole
    assert_clean(run, 16)
