"""Stage traffic end to end on a simulated RoCE fleet: real ib_write_bw -D servers and clients
over SSH, their numbers from the flow model over the time they overlapped, the NIC counters
read through ethtool -S and rdma statistic. Each fault is on its own rail (rails are separate
planes), so one fleet run blames two faults exactly; the nodes a fault does not name pass."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.chaos import kill_orphans
from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration

PROFILE = "traffic-roce-test"
STAGES = ("-m", "reach or traffic")
NODES = [f"gpu{i:03d}" for i in range(1, 13)]  # 3 racks of 4: leaf01-leaf03


def model(
    faults: dict[str, Any] | None = None,
    traffic: dict[str, Any] | None = None,
    fabric: dict[str, Any] | None = None,
) -> dict:
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "roce-demo.yaml").read_text())
    doc.pop("faults", None)
    doc.update(name="traffic", profile=PROFILE, nodes="gpu[001-012]")
    doc["racks"] = {"nodes_per_rack": 4}
    doc["settings"] = {"max_active": 400}  # 2 rails x 2 incasts x ~20 processes at once
    if faults:
        doc["faults"] = faults
    if traffic:
        doc["traffic"] = traffic
    if fabric:  # the switches' own faults (sim/fabric.py), the flow model's too
        doc["fabric"] = fabric
    return doc


def profile_dir(tmp: Path, rails: list[int]) -> Path:
    d = tmp / "profiles"
    d.mkdir(exist_ok=True)
    (d / f"{PROFILE}.yaml").write_text(yaml.safe_dump({
        "name": PROFILE, "description": "short load patterns for the fleet tests",
        "extends": "hgx-h100-roce",
        "sources": {"traffic.test": "the fleet tests' own: -D 2, 3 senders, two rails; half the "
                    "window together (clients start up to a second apart on a loaded CI box)"},
        "traffic": {"senders": 3, "duration_s": 2, "rails": rails, "timeout_s": 30,
                    "overlap": {"min": 0.5, "unit": "share"}},
    }))  # fmt: skip
    return d


def run_traffic(sim_fleet: Any, tmp_path: Path, rails: list[int], **kw: Any) -> Any:
    fleet = sim_fleet(model(**kw))
    return fleet.run(*STAGES, f"--profiles-dir={profile_dir(tmp_path, rails)}", timeout=400)


def traffic(run: Any) -> list[dict[str, Any]]:
    return [v for v in run.verdicts["verdicts"] if v["check"].startswith("traffic.")]


def bad(run: Any) -> dict[str, set[tuple[str, str]]]:
    """node -> (check, component) of every traffic verdict that is not a pass."""
    out: dict[str, set[tuple[str, str]]] = {}
    for v in traffic(run):
        if v["status"] != "pass":
            out.setdefault(v["node"], set()).add((v["check"], v["component"]))
    return out


def repairs(run: Any, others: tuple[str, ...] = ()) -> dict[str, tuple[str, list[str]]]:
    """component -> (observed, nodes marked) of admission.json's repair list (`infrastructure`),
    every item traffic's (but the `others` checks' items) and each node it lists a
    traffic.fabric mark of that fault."""
    infra = [i for i in run.admission.get("infrastructure", []) if i["check"] not in others]
    marks = {(v["component"], v["node"]) for v in traffic(run)
             if v["check"] == "traffic.fabric" and v.get("remediation")}  # fmt: skip
    assert {(i["component"], n) for i in infra for n in i["nodes"]} == marks
    assert all(i["check"] == "traffic.fabric" and i["remediation"] for i in infra)
    return {i["component"]: (i["observed"], i["nodes"]) for i in infra}


def test_np_off_and_rp_off_blame_exactly_their_rails(sim_fleet: Any, tmp_path: Path) -> None:
    faults = {"gpu002": [{"np_off": "0"}], "gpu007": [{"rp_off": "1"}]}
    fleet = sim_fleet(model(faults=faults))
    profiles = f"--profiles-dir={profile_dir(tmp_path, [0, 1])}"
    run = fleet.run(*STAGES, profiles, timeout=400)
    assert bad(run) == {
        "gpu002": {
            ("traffic.incast", "mlx5_0 (rail 0)"),
            ("traffic.victim", "mlx5_0 (rail 0)"),
            ("traffic.counters", "mlx5_0 (rail 0)"),
        },
        "gpu007": {("traffic.incast", "mlx5_1 (rail 1)")},
    }, run.stdout[-3000:]
    assert repairs(run) == {}
    vs = {(v["node"], v["check"], v["component"]): v for v in traffic(run)}
    np = vs[("gpu002", "traffic.incast", "mlx5_0 (rail 0)")]
    assert np["observed"] == 0 and np["expected"] == ">= 1"
    assert "(its NP is off)" in np["message"]
    rp = vs[("gpu007", "traffic.incast", "mlx5_1 (rail 1)")]
    assert rp["observed"] == 0 and "(its RP is off)" in rp["message"]
    # the evidence of a blamed rail: the raw output of the tests it rests on
    assert rp["evidence"] and all(e.startswith("raw/") for e in rp["evidence"])
    assert set(run.rejected()) == {"gpu002", "gpu007"}
    cleanup = [v for v in traffic(run) if v["check"] == "traffic.cleanup"]
    assert len(cleanup) == 12 and {v["status"] for v in cleanup} == {"pass"}
    # Replay (the fleet stopped): the recorded processes re-judged give the same verdicts.
    fleet.fleet.stop()
    replay = fleet.run(*STAGES, profiles, "--transport=replay", f"--replay={run.run_dir / 'raw'}")
    fields = ("check", "node", "component", "status", "observed", "expected", "message")
    keys = [
        sorted(tuple(json.dumps(v[f]) for f in fields) for v in traffic(r)) for r in (run, replay)
    ]
    assert keys[0] == keys[1]


def test_switch_faults_mark_the_switch_not_the_nodes(sim_fleet: Any, tmp_path: Path) -> None:
    switch = {"faults": [{"ecn_not_marked": "leaf02:0"}, {"static_route_collision": "leaf03:1"}]}
    run = run_traffic(sim_fleet, tmp_path, [0, 1], traffic=switch)
    assert bad(run) == {}, run.stdout[-3000:]
    assert run.rejected() == {}
    got = repairs(run)
    assert list(got) == ["leaf02 rail 0", "leaf03 rail 1 uplinks"]
    obs, nodes = got["leaf02 rail 0"]
    assert nodes == NODES[4:8]
    assert obs.startswith("no ECN-marked packet at ") and obs.count("gpu") == 4
    obs, nodes = got["leaf03 rail 1 uplinks"]
    assert nodes == NODES[8:12]
    assert "REPAIR 2 infrastructure faults" in run.stdout
    # the bisection's slow flows could be leaf01's or leaf03's: both re-tested, leaf03 named
    loc = json.loads((run.run_dir / "traffic" / f"localization-{PROFILE}.json").read_text())[
        "tests"
    ]
    assert {k for k in loc if "retest" in k} == {
        "rail1-bisection-retest-leaf01", "rail1-bisection-retest-leaf03",
    }  # fmt: skip


def test_pfc_off_and_uplink_down_and_a_healthy_rail(sim_fleet: Any, tmp_path: Path) -> None:
    switch = {"faults": [{"pfc_off": "leaf01:0"}]}
    down = {"faults": [{"uplink_down": "leaf-r02-rail1"}]}  # the fabric's: its first uplink
    run = run_traffic(sim_fleet, tmp_path, [0, 1, 2], traffic=switch, fabric=down)
    assert bad(run) == {}, run.stdout[-3000:]
    got = repairs(run)
    assert list(got) == ["leaf01 rail 0", "leaf02 rail 1 uplinks"]
    assert got["leaf01 rail 0"][1] == NODES[:4]
    assert "no sender paused" in got["leaf01 rail 0"][0]
    assert got["leaf02 rail 1 uplinks"][1] == NODES[4:8]
    assert run.rejected() == {}
    # rail 2, healthy: every node passes every pattern with a measured number
    rail2 = [v for v in traffic(run) if v["component"] == "mlx5_2 (rail 2)"]
    assert len(rail2) == 12 * 5 and {v["status"] for v in rail2} == {"pass"}
    assert all(v["observed"] is not None for v in rail2 if v["check"] != "traffic.counters")


def test_a_node_lost_mid_stage_rejects_only_itself(sim_fleet: Any, tmp_path: Path) -> None:
    """gpu006's SSH connection drops as its first process starts: it is every traffic
    check's ERROR; the later rounds are planned without it, the receiver whose incast it
    broke receives again from other senders, and every other node passes."""
    fleet = sim_fleet(model(faults={"gpu006": [{"drop_after": "0"}]}))
    try:
        run = fleet.run(*STAGES, f"--profiles-dir={profile_dir(tmp_path, [0])}", timeout=400)
    finally:
        kill_orphans(fleet, "gpu006")
    assert list(run.rejected()) == ["gpu006"], run.stdout[-3000:]
    mine = {(v["check"], v["status"]) for v in traffic(run) if v["node"] == "gpu006"}
    assert mine == {
        (c, "error") for c in ("traffic.incast", "traffic.fairness", "traffic.victim",
                               "traffic.bisection", "traffic.counters", "traffic.cleanup")
    } | {("traffic.fabric", "pass")}  # fmt: skip
    assert list(bad(run)) == ["gpu006"]  # nobody else has a traffic verdict short of a pass
    plan = json.loads((run.run_dir / "traffic" / f"plan-{PROFILE}.json").read_text())
    later = [t for r in plan["rounds"][1:] for t in r["tests"]]
    assert later and all("gpu006" not in json.dumps(t) for t in later)
    assert [t["retest"] for t in later if "retest" in t]  # the broken incast's receiver


def test_infiniband_uplink_faults_mark_the_discovered_leaf_and_rp_off_its_rail(
    sim_fleet: Any, tmp_path: Path
) -> None:
    """An InfiniBand fleet (profile generic-hgx-h100 with a traffic section, no host
    counters), the fabric stage run first: the bisection names the leaf whose uplinks are at
    fault by the switch the fabric stage discovered on that rail (not the `leaf` label); no
    node rejected for them; gpu010's rail 1 ignoring congestion notification takes more than
    its share: that rail alone fails. The uplink down is the fabric's own fault: the fabric
    stage finds the same uplink dark that the flows avoid. Every incast's receiver port (the
    LID and port the fabric stage discovered) shows the XmitWait its oversubscription
    implies. (The RoCE fleets above have no fabric stage: labels there.)"""
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    for k in ("overrides", "faults"):
        doc.pop(k, None)
    doc.update(name="traffic-ib", profile="traffic-ib-test", nodes="gpu[001-012]")
    doc["racks"] = {"nodes_per_rack": 4}
    doc["settings"] = {"max_active": 400}
    # one uplink per host (non-blocking, as the flow model's default); leaf-r01-rail0's first
    # uplink (port 5) dark
    doc["fabric"] = {"uplinks_per_leaf": 4, "faults": ["uplink_down:leaf-r01-rail0"]}
    doc["traffic"] = {"faults": [{"static_route_collision": "leaf02:1"}]}
    # and a sender that ignores congestion notification (rail 1): it takes more than its
    # share, the one fault of a node's rail an InfiniBand fleet can show without host counters
    doc["faults"] = {"gpu010": [{"rp_off": "1"}]}
    d = tmp_path / "profiles"
    d.mkdir()
    roce = yaml.safe_load((REPO / "inventories" / "profiles" / "hgx-h100-roce.yaml").read_text())
    section = {**roce["traffic"], "counters": None, "senders": 3, "duration_s": 2,
               "rails": [0, 1], "timeout_s": 30}  # fmt: skip
    section["overlap"] = {"min": 0.5, "unit": "share"}
    section["xmit_wait"] = {"min": 1, "unit": "ticks"}
    (d / "traffic-ib-test.yaml").write_text(yaml.safe_dump({
        "name": "traffic-ib-test", "description": "InfiniBand, short load patterns",
        "extends": "generic-hgx-h100",
        "sources": {
            "traffic.test": "the fleet tests' own: the RoCE criteria but counters",
            "traffic.xmit_wait": "PortXmitWait counts the ticks a port had data to transmit "
            "but sent none (IBA Vol. 1, PortCounters PortXmitWait): a port k senders "
            "oversubscribe must count some; none is a counter that does not count",
        },
        "traffic": section,
    }))  # fmt: skip
    run = sim_fleet(doc).run("-m", "reach or fabric or traffic", f"--profiles-dir={d}",
                             timeout=400)  # fmt: skip
    assert bad(run) == {"gpu010": {("traffic.incast", "mlx5_1 (rail 1)")}}, run.stdout[-3000:]
    (rp,) = [v for v in traffic(run) if v["check"] == "traffic.incast" and v["status"] == "fail"]
    assert re.fullmatch(
        r"incast 3->1 to gpu\d+ \(rail 1\): gpu010 took \d\.\d+ fair shares( \(\+\d+ more\))?",
        rp["message"],
    ), rp["message"]
    assert rp["observed"] > 1.5 and rp["expected"] == "<= 1.5"
    assert not [v for v in run.verdicts["verdicts"]
                if v["check"].startswith("fabric.") and v["status"] != "pass"]  # fmt: skip
    got = repairs(run, others=("fabric.uplinks",))
    # the one cable the slow flows share, by both ends (the XmitWait of its two ports): on
    # leaf-r01-rail0 the uplink next to the dark one (its flows moved there), on
    # leaf-r02-rail1 the one its static routes put two flows on
    down, collided = "leaf-r01-rail0 P6 -> spine02 P1", "leaf-r02-rail1 P5 -> spine01 P10"
    assert list(got) == [down, collided], got
    assert got[down][1] == NODES[:4]
    assert got[collided][1] == NODES[4:8]
    said = {i["component"]: i["message"] for i in run.admission["infrastructure"]}
    ticks = r"PortXmitWait \+\d+ ticks at its ends, the leaf's uplinks \d+(\.\d+)? at the median"
    assert re.fullmatch(
        f"the slow flows of the bisection all cross leaf-r01-rail0's uplinks "
        f"and share {down}: {ticks}; leaf-r01-rail0 has 3 uplinks linked where most leaves "
        "have 4: the flows of the one down moved onto this one",
        said[down],
    ), said[down]
    assert re.fullmatch(
        f"the slow flows of the bisection all cross leaf-r02-rail1's uplinks "
        f"and share {collided}: {ticks}: static routes putting several flows on it",
        said[collided]), said[collided]  # fmt: skip
    # the fabric stage sees the same uplink dark that the flows avoided
    dark = [(i["component"], i["nodes"], i["message"]) for i in run.admission["infrastructure"]
            if i["check"] == "fabric.uplinks"]  # fmt: skip
    assert dark == [
        (
            "leaf-r01-rail0 P5 (uplink)",
            NODES[:4],
            "leaf-r01-rail0 has 3 uplinks "
            "to the spines, expected 4 (as most leaves): P5 has no link partner",
        )
    ]
    plan = json.loads((run.run_dir / "traffic" / "plan-traffic-ib-test.json").read_text())
    assert plan["discovered"] is True, plan.keys()
    assert list(run.rejected()) == ["gpu010"]
    counters = {v["message"] for v in traffic(run) if v["check"] == "traffic.counters"}
    assert counters == {"InfiniBand rail: no RoCE counters (traffic.counters: null)"}
    # XmitWait: every incast's receiver port counted what 3 senders (one of them also driving
    # the victim flow: 1000 Gb/s offered to a 400 Gb/s port, 0.6 of the time waiting) imply
    # over the -D 2 window they overlapped (at least half of it), 50M ticks/s of waiting
    loc = json.loads((run.run_dir / "traffic" / "localization-traffic-ib-test.json").read_text())
    waits = {k: t["xmit_wait"] for k, t in loc["tests"].items() if "incast" in k}
    assert len(waits) == 2 * 12, sorted(waits)  # each node receives once per rail
    # (at most: 2/3 waiting, 3 senders without the victim, over the window and up to a second
    # more: a flow's span stretches by the flow registry's lock waits on a loaded box)
    low, high = 0.6 * 50e6 * 2 * 0.5, (1 - 400 / 1200) * 50e6 * (2 + 1)
    assert all(low <= w <= high for w in waits.values()), waits
    incast = {(v["node"], v["component"]): v["message"] for v in traffic(run)
              if v["check"] == "traffic.incast"}  # fmt: skip
    for key, w in waits.items():
        rail, rx = int(key[4]), key.split("-to-")[1]
        if (rx, rail) == ("gpu010", 1):  # its verdict is the failure it sent (pinned above)
            continue
        assert f"to {rx} (rail {rail}): aggregate " in incast[(rx, f"mlx5_{rail} (rail {rail})")]
        assert f"PortXmitWait +{w} ticks at {rx}'s switch port" in incast[
            (rx, f"mlx5_{rail} (rail {rail})")]  # fmt: skip
    fairness = [v for v in traffic(run) if v["check"] == "traffic.fairness"]
    assert len(fairness) == 12 * 2 and {v["status"] for v in fairness} == {"pass"}
    # unfair only where gpu010 sent, and said so; fair everywhere else
    unfair = [v for v in fairness if v["observed"] < 0.9]
    assert {v["component"] for v in unfair} == {"mlx5_1 (rail 1)"}, unfair
    assert all(
        re.fullmatch(r"incast 3->1 to gpu\d+ \(rail 1\): Jain 0\.\d+ over 3 senders: "
                     r"explained \(gpu010 took \d\.\d+ fair shares\)", v["message"])
        for v in unfair
    ), unfair  # fmt: skip
    assert all(isinstance(v["observed"], float) for v in fairness)
