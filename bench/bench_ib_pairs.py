"""Benchmark: stage ib_pairs (pairing + localization) on simulated fleets (run on demand).

    python bench/bench_ib_pairs.py                       # 16 and 128 nodes, 1 and 5 faulty rails
    python bench/bench_ib_pairs.py --sizes 1024
    python bench/bench_ib_pairs.py --sizes 256 --faults 1 --max-active 4096   # limit raised

Each simulated ib_write_bw side is a real process (a Python server or client over loopback),
so at 1,024 nodes x 8 rails a round starts ~8,000 processes on this machine: the wall time
measures the simulated fleet as much as nodegate. Prints rounds used, tests run, the channel
limit (the fleet's own, `settings.max_active` of its inventory, unless --max-active), the most
tests and channels held at once and the wall time of each round (from the plan file), the
stage's wall time, and whether exactly the faulty (node, rail) pairs were blamed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def model(n: int, faults: int) -> tuple[dict[str, object], set[tuple[str, int]]]:
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    doc.pop("overrides", None)
    doc["name"] = f"ibp{n}"
    doc["nodes"] = f"node[{1:04d}-{n:04d}]"
    doc["racks"] = {"nodes_per_rack": 16}
    bad = {(f"node{(i * 37 + 5) % n + 1:04d}", i % 8) for i in range(faults)}
    doc["faults"] = {node: [{"slow_rail": str(rail)}] for node, rail in sorted(bad)}
    return doc, bad


def run(
    n: int, faults: int, fanout: int, max_active: int | None, subnet: str = "127.93"
) -> dict[str, object]:
    from nodegate.core.settings import DEFAULT_MAX_ACTIVE
    from nodegate.framework.stage import StageOptions
    from nodegate.inventory import load_inventory
    from nodegate.profiles import ProfileLibrary
    from nodegate.session.engine import Engine
    from nodegate.sim.fleet import build_fleet
    from nodegate.stages.ib_pairs import STAGE
    from nodegate.transport.evidence import EvidenceWriter
    from nodegate.transport.ssh import SSHTransport

    tmp = Path(tempfile.mkdtemp(prefix=f"ngbench-ibp-{n}-"))
    doc, bad = model(n, faults)
    (tmp / "model.yaml").write_text(yaml.safe_dump(doc))
    fleet = build_fleet(tmp / "model.yaml", tmp / "fleet", subnet=subnet)
    fleet.start(timeout_s=120)
    try:
        inv = load_inventory(fleet.root / "inventory.yaml")
        nodes = list(inv.nodes)
        limit = max_active or inv.settings.max_active or DEFAULT_MAX_ACTIVE
        lib = ProfileLibrary([REPO / "inventories" / "profiles"])
        profiles = {x.name: lib.get(x.profile or "") for x in nodes}
        run_dir = tmp / "run"
        transport = SSHTransport(
            nodes, fanout=fanout, evidence=EvidenceWriter(run_dir / "raw", "ssh")
        )
        opts = StageOptions(max_active=limit)
        engine = Engine(nodes, profiles, transport, run_dir, [STAGE], opts)
        sel = [(c.id, x.name) for c in STAGE.checks for x in nodes]

        async def go() -> object:
            try:
                return await engine.run(sel)
            finally:
                await transport.close()

        t0 = time.perf_counter()
        res = asyncio.run(go())
        wall = time.perf_counter() - t0
        loc = json.loads((run_dir / "ib_pairs" / "localization-generic-hgx-h100.json").read_text())
        plan = json.loads((run_dir / "ib_pairs" / "plan-generic-hgx-h100.json").read_text())
        blamed = {
            (nd, int(r)) for nd, rs in loc["status"].items() for r, s in rs.items() if s == "blamed"
        }
        bad_verdicts = [v for vs in res.verdicts.values() for v in vs if v.status.value != "pass"]  # type: ignore[attr-defined]
        failing = {v.node for v in bad_verdicts}
        if blamed != bad:
            from collections import Counter

            errs = Counter(v.message.split(": ", 1)[-1][:90] for v in bad_verdicts)
            print(
                f"{n} nodes, {faults} faults: unexpected verdicts, most common:",
                errs.most_common(3),
                file=sys.stderr,
            )
        return {
            "nodes": n,
            "faulty_rails": faults,
            "rounds": loc["rounds_used"],
            "tests": sum(len(r["tests"]) for r in plan["rounds"]),
            "max_active": limit,
            "at_once tests/ch": " ".join(
                f"{r['concurrency']['used']['tests']}/{r['concurrency']['used']['channels']}"
                for r in plan["rounds"]
            ),
            "round_wall_s": " ".join(
                f"{r['concurrency']['used']['wall_s']:.1f}" for r in plan["rounds"]
            ),
            "wall_s": round(wall, 1),
            "blamed_exactly_faults": blamed == bad,
            "rejected_nodes": len(failing),
        }
    finally:
        fleet.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,128")
    ap.add_argument("--faults", default="1,5")
    # Passive node sessions (the stray check after the stage).
    ap.add_argument("--fanout", type=int, default=64)
    # Channels of the active rounds: default the fleet's own limit (its inventory's). Every
    # simulated side is a real process on these cores: too many at once and servers miss
    # their readiness deadline, so healthy rails fail (closed).
    ap.add_argument("--max-active", type=int, default=None)
    ap.add_argument("--subnet", default="127.93", help="the fleet's loopback /16 (127.N)")
    a = ap.parse_args()
    rows = [
        run(n, f, a.fanout, a.max_active, a.subnet)
        for n in map(int, a.sizes.split(","))
        for f in map(int, a.faults.split(","))
    ]
    cols = list(rows[0])
    print(" | ".join(f"{c:>21}" for c in cols))
    for r in rows:
        print(" | ".join(f"{str(r[c]):>21}" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
