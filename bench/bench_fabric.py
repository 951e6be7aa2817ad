"""Benchmark: the fabric stage's controller side at 4,096 nodes x 8 rails, and its wall time on
a simulated fleet (run on demand).

    python bench/bench_fabric.py                          # 4,096 nodes in memory, 32 on a fleet
    python bench/bench_fabric.py --nodes 1024 --fleet 64

Part 1, in memory: the simulated fabric of `--nodes` nodes (sim/fabric.py: a leaf per 160
nodes and rail, one uplink to each of `--spines` spines; 255-port switches) printed by the
simulator's `ibnetdiscover -p` and its `perfquery -x -l` per switch; then, timed with the
process's CPU clock, what the controller does with the observer's outputs: parse the ports
report, build the topology, tie every node's 8 rails to it by GUID and judge the node checks
against the expected cabling (the inventory's), the uplinks and the switch counters. The
counter reads are one command per subnet and read (a loop of one `perfquery -x -l` per
switch): their count is printed next to the node ports it covers.

Part 2, on a fleet: `--fleet` simulated nodes over real SSH, the reach and fabric stages run
by the engine; the fabric stage's wall time (its window of 1 s included).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def model_doc(n: int, spines: int) -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    for k in ("overrides", "faults"):
        doc.pop(k, None)
    doc.update(name=f"fab{n}", nodes=f"gpu[0001-{n:04d}]", racks={"nodes_per_rack": 32})
    # Two levels with 8-bit port numbers (at most 255 ports a switch): 160 nodes per leaf and
    # rail (26 groups x 8 rails = 208 leaves), one uplink per spine, 16 spines.
    doc["fabric"] = {
        "nodes_per_leaf": 160,
        "spines": spines,
        "uplinks_per_leaf": spines,
        "switch_ports": 255,
        "spine_ports": 255,
    }
    return doc


def in_memory(n: int, spines: int) -> dict[str, object]:
    from nodegate.core.checks import CheckTable
    from nodegate.core.values import CommandResult, NodeOutcome, Reach
    from nodegate.inventory.nodes import DataPlane, FrozenMap, Node, RailCable, SSHSettings
    from nodegate.profiles import ProfileLibrary
    from nodegate.sim.fabric import build_fabric
    from nodegate.sim.fleet_model import load_model
    from nodegate.sim.tools import known_faults
    from nodegate.sim.tools.fabric import ibnetdiscover_ports, perfquery_text
    from nodegate.sim.tools.hca import node_hcas
    from nodegate.stages.fabric import STAGE
    from nodegate.stages.fabric.checks import CHECKS
    from nodegate.stages.fabric.facts import FabricFacts, FabricPlan, build_facts
    from nodegate.stages.fabric.profile import fabric_profile
    from nodegate.stages.fabric.stage import expected_cabling

    tmp = Path(tempfile.mkdtemp(prefix="ngbench-fabric-"))
    try:
        (tmp / "model.yaml").write_text(yaml.safe_dump(model_doc(n, spines)))
        model = load_model(tmp / "model.yaml", known_faults())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    fab = build_fabric(model)
    discover = ibnetdiscover_ports(fab)
    switches = [s for s in fab.switches]
    counters = [perfquery_text(fab, s, 100) for s in switches]
    again = [perfquery_text(fab, s, 101) for s in switches]
    listings = {}
    for node in model.nodes:
        devs = node_hcas(node)
        lines = [f"/sys/class/infiniband/{d.name}/node_guid:{d.guid}" for d in devs]
        for f, v in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp")):
            lines += [f"/sys/class/infiniband/{d.name}/ports/1/{f}:{v}" for d in devs]
        lines += [f"/sys/class/infiniband/{d.name}/ports/1/rate:400 Gb/sec (4X NDR)" for d in devs]
        listings[node.name] = "\n".join(lines) + "\n"
    pkeys = "".join(f"/sys/class/infiniband/mlx5_{i}/ports/1/pkeys/0:0xffff\n" for i in range(8))
    gen_s = time.perf_counter() - t0

    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    prof = fabric_profile(lib.get("generic-hgx-h100"))
    nodes = [
        Node(x.name, ("all",), FrozenMap(dict(x.labels)), "generic-hgx-h100", SSHSettings(),
             DataPlane(cables=FrozenMap({r: RailCable(sw, p)
                                         for r, (sw, p) in fab.expected[x.name].items()})))
        for x in model.nodes
    ]  # fmt: skip
    observer = nodes[0].name
    plan = FabricPlan({"compute": (observer,)},
                      {x.name: expected_cabling(x, prof) for x in nodes})  # fmt: skip

    def result(cid: str, text: str, dur: float = 0.0) -> CommandResult:
        return CommandResult(cid, cid, 0, text, "", dur, evidence=f"raw/x/fabric.json#{cid}")

    obs_results = {
        "ibnetdiscover_compute": result("ibnetdiscover_compute", discover),
        "sminfo_compute": result("sminfo_compute", "sminfo: sm lid 1 sm guid 0x0002c90300000001, "
                                 "activity count 1 priority 14 state 3 SMINFO_MASTER\n"),
        "perfquery_compute": result("perfquery_compute", "".join(counters)),
        "perfquery_again_compute": result("perfquery_again_compute", "".join(again)),
        "counter_window": result("counter_window", "", 1.0),
    }  # fmt: skip
    sizes = {k: len(r.stdout) for k, r in obs_results.items()}
    discovery = ("ibnetdiscover_compute", "sminfo_compute")
    topo_only = {k: v for k, v in obs_results.items() if k in discovery}

    def facts_of(observed: dict[str, CommandResult]) -> tuple[dict[str, FabricFacts], float]:
        t = time.process_time()
        out: dict[str, FabricFacts] = {}
        for x in nodes:
            res = {"node_guids": result("node_guids", listings[x.name]),
                   "pkeys": result("pkeys", pkeys)}  # fmt: skip
            if x.name == observer:
                res.update(observed)
            out[x.name] = build_facts(NodeOutcome(x.name, Reach.OK, res), prof, plan)
        return out, time.process_time() - t

    def judge(facts: dict[str, FabricFacts], ids: set[str]) -> tuple[list[Any], float]:
        t = time.process_time()
        table: CheckTable[Any, Any] = CHECKS
        got: list[Any] = []
        for c in table:
            if c.id in ids and c.fn is not None:
                got += c.fn(c, facts, {x: prof for x in facts})
        return got, time.process_time() - t

    # Discovery: the ports report parsed and the topology built (the observer's facts), every
    # node's GUID listing parsed (each as its node answers), every rail tied to the topology by
    # GUID and diffed against the expected cabling.
    t = time.process_time()
    obs = build_facts(NodeOutcome(observer, Reach.OK, {**topo_only}), prof, plan)
    observer_s = time.process_time() - t
    assert obs.observations["compute"].topology is not None
    facts, parse_s = facts_of(topo_only)
    nodes_s = parse_s - observer_s
    verdicts, diff_s = judge(facts, {"fabric.cable.expected", "fabric.link", "fabric.uplinks"})
    # The counters: both reads parsed, every switch port facing a node and every uplink judged.
    facts, all_s = facts_of(obs_results)
    more, count_s = judge(facts, {"fabric.switch_port.errors", "fabric.xmit_wait"})
    verdicts += more
    bad = [v for v in verdicts if v.status.value != "pass" or v.remediation]
    topo = facts[observer].observations["compute"].topology
    assert topo is not None
    del STAGE
    return {
        "nodes": n,
        "node ports": sum(1 for _ in topo.ca_ports),
        "switches": len(topo.switches),
        "ibnetdiscover lines": discover.count("\n"),
        "ibnetdiscover MB": round(sizes["ibnetdiscover_compute"] / 1e6, 1),
        "perfquery MB/read": round(sizes["perfquery_compute"] / 1e6, 1),
        "counter commands/read": 1,
        "perfquery per read": len(switches),
        "discovery parse+topology CPU s": round(observer_s, 2),
        "discovery diff+judge CPU s": round(diff_s, 2),
        "discovery total CPU s": round(observer_s + diff_s, 2),
        "node GUID listings CPU s": round(nodes_s, 2),
        "counters parse CPU s": round(all_s - parse_s, 2),
        "counters judge CPU s": round(count_s, 2),
        "verdicts": len(verdicts),
        "not clean": len(bad),
        "generate s": round(gen_s, 1),
    }


def on_fleet(n: int, subnet: str) -> dict[str, object]:
    from nodegate.framework.stage import StageOptions
    from nodegate.inventory import load_inventory
    from nodegate.profiles import ProfileLibrary
    from nodegate.session.engine import Engine
    from nodegate.sim.fleet import build_fleet
    from nodegate.stages.fabric import STAGE
    from nodegate.stages.reach import STAGE as REACH
    from nodegate.transport.evidence import EvidenceWriter
    from nodegate.transport.ssh import SSHTransport

    tmp = Path(tempfile.mkdtemp(prefix=f"ngbench-fabric-{n}-"))
    doc = model_doc(n, 2)
    doc["fabric"] = {}
    doc["racks"] = {"nodes_per_rack": 8}
    (tmp / "model.yaml").write_text(yaml.safe_dump(doc))
    fleet = build_fleet(tmp / "model.yaml", tmp / "fleet", subnet=subnet)
    fleet.start(timeout_s=120)
    try:
        inv = load_inventory(fleet.root / "inventory.yaml")
        nodes = list(inv.nodes)
        lib = ProfileLibrary([REPO / "inventories" / "profiles"])
        profiles = {x.name: lib.get(x.profile or "") for x in nodes}
        run_dir = tmp / "run"
        transport = SSHTransport(nodes, evidence=EvidenceWriter(run_dir / "raw", "ssh"))
        engine = Engine(nodes, profiles, transport, run_dir, [REACH, STAGE], StageOptions())
        sel = [(c.id, x.name) for st in (REACH, STAGE) for c in st.checks for x in nodes]

        async def go() -> Any:
            try:
                return await engine.run(sel)
            finally:
                await transport.close()

        res = asyncio.run(go())
        bad = [v for vs in res.verdicts.values() for v in vs if v.status.value != "pass"]
        return {"fleet nodes": n, "fabric wall s": res.timings["fabric"],
                "reach wall s": res.timings["reach"], "not passed": len(bad)}  # fmt: skip
    finally:
        fleet.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def table(rows: list[dict[str, object]]) -> str:
    keys = list(rows[0])
    width = max(len(k) for k in keys)
    return "\n".join(f"{k:<{width}}  " + "  ".join(str(r.get(k, "")) for r in rows) for k in keys)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[4096])
    ap.add_argument("--spines", type=int, default=16)
    ap.add_argument("--fleet", type=int, default=32, help="simulated nodes over SSH (0: skip)")
    ap.add_argument("--subnet", default="127.94")
    args = ap.parse_args()
    print(table([in_memory(n, args.spines) for n in args.nodes]))
    if args.fleet:
        print()
        print(table([on_fleet(args.fleet, args.subnet)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
