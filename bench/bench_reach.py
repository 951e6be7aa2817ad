"""Benchmark: the reach stage over simulated fleets of real sshd nodes (run on demand).

    python bench/bench_reach.py                 # 64, 256, 1024 nodes
    python bench/bench_reach.py --sizes 1024 --fanout 128 --clush

Prints the reach stage's wall time (stage_s: connect + one session per node + judging +
evidence), a second round over the open connections (what each later stage pays), the total
wall and client CPU time, peak RSS of the client, SSH connections opened per node,
and (with --clush) ClusterShell's clush running the same stage script on the same fleet
(killed past --clush-limit seconds, default 900: the table then says `> 900`). Each size's
nodegate row is printed as soon as it is measured; the fleets are removed after the table.
Each size runs in its own child process so RSS is per size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def model(n: int) -> dict[str, object]:
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    doc.pop("overrides", None)
    doc.pop("faults", None)
    doc["name"] = f"bench{n}"
    doc["nodes"] = f"node[{1:04d}-{n:04d}]"
    return doc


def child(n: int, fanout: int, root: Path) -> dict[str, float]:
    """Runs in a fresh process: the engine's reach stage over an already started fleet."""
    from nodegate.inventory import load_inventory
    from nodegate.profiles import ProfileLibrary
    from nodegate.session.engine import Engine
    from nodegate.stages.reach import STAGE
    from nodegate.transport.evidence import EvidenceWriter
    from nodegate.transport.ssh import SSHTransport

    inv = load_inventory(root / "inventory.yaml")
    nodes = list(inv.nodes)
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    profiles = {x.name: lib.get(x.profile or "") for x in nodes}
    run_dir = Path(tempfile.mkdtemp(prefix="ngbench-run-"))
    c0 = time.process_time()
    t0 = time.perf_counter()
    transport = SSHTransport(nodes, fanout=fanout, evidence=EvidenceWriter(run_dir / "raw", "ssh"))
    engine = Engine(nodes, profiles, transport, run_dir)
    sel = [(c.id, x.name) for c in STAGE.checks for x in nodes]

    stage_s = 0.0

    async def go() -> tuple[int, int]:
        nonlocal stage_s
        res = await engine.run(sel)
        stage_s = time.perf_counter() - t0
        bad = sum(1 for vs in res.verdicts.values() for v in vs if v.status.value != "pass")
        # A second round over the open connections: what later stages pay.
        t1 = time.perf_counter()
        await transport.run_stage(
            "reach", {x.name: STAGE.commands(x, profiles[x.name]) for x in nodes}
        )
        second = time.perf_counter() - t1
        await transport.close()
        return bad, int(second * 1000)

    bad, second_ms = asyncio.run(go())
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    shutil.rmtree(run_dir, ignore_errors=True)  # after the clock: not part of the stage
    return {
        "nodes": n,
        "stage_s": round(stage_s, 2),
        "wall_s": round(wall, 2),
        "second_round_s": second_ms / 1000,
        "cpu_s": round(cpu, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "conns_per_node": transport.connections_opened / n,
        "non_pass_verdicts": bad,
    }


def find_clush() -> str | None:
    """clush from this interpreter's virtualenv (ClusterShell is a dependency), else PATH."""
    here = Path(sys.executable).parent / "clush"
    return str(here) if here.is_file() and os.access(here, os.X_OK) else shutil.which("clush")


def clush_time(root: Path, n: int, fanout: int, limit_s: float) -> float | str | None:
    """clush's wall seconds; `> limit` when it did not finish in `limit_s` (it is then
    killed: what it took is at least that); None when it cannot run or failed."""
    clush = find_clush()
    if clush is None:
        print("clush not found (next to this python or on PATH)", file=sys.stderr)
        return None
    from nodegate.stages.reach import STAGE
    from nodegate.transport.script import LAUNCHER, build_script

    script = build_script(STAGE.commands(None, None))  # type: ignore[arg-type]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [
                clush,
                "-f",
                str(fanout),
                "-w",
                f"node[{1:04d}-{n:04d}]",
                "-o",
                f"-F {root / 'ssh_config'}",
                "-b",
                LAUNCHER,
            ],
            input=script.text,
            capture_output=True,
            text=True,
            timeout=limit_s,
        )
    except subprocess.TimeoutExpired:
        return f"> {limit_s:g}"
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        print(f"clush exited {p.returncode}: {p.stderr[-500:]}", file=sys.stderr)
        return None
    return round(dt, 2)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--fanout", type=int, default=256)
    ap.add_argument("--clush", action="store_true", help="also time clush on the same fleet")
    ap.add_argument("--clush-limit", type=float, default=900.0, help="seconds clush may take")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--subnet", default="127.90", help="the fleet's loopback /16 (127.N)")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.fanout, Path(a.root))))
        return 0
    from nodegate.sim.fleet import build_fleet

    rows: list[dict[str, object]] = []
    trash: list[Path] = []
    for n in (int(s) for s in a.sizes.split(",")):
        tmp = Path(tempfile.mkdtemp(prefix=f"ngbench-{n}-"))
        (tmp / "model.yaml").write_text(yaml.safe_dump(model(n)))
        fleet = build_fleet(tmp / "model.yaml", tmp / "fleet", subnet=a.subnet)
        fleet.start(timeout_s=120)
        try:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    str(n),
                    "--fanout",
                    str(a.fanout),
                    "--root",
                    str(fleet.root),
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"nodegate: {json.dumps(row)}", flush=True)  # kept if clush fails below
            row["clush_s"] = (
                clush_time(fleet.root, n, min(a.fanout, 1024), a.clush_limit) if a.clush else None
            )
            if a.clush:
                print(f"clush: {row['clush_s']} s", flush=True)
            rows.append(row)
        finally:
            fleet.stop()
            # A 4,096-node fleet is ~6 GB in millions of files: removed after the table.
            trash.append(tmp)
    cols = [
        "nodes",
        "stage_s",
        "wall_s",
        "second_round_s",
        "cpu_s",
        "peak_rss_mib",
        "conns_per_node",
        "non_pass_verdicts",
        "clush_s",
    ]
    print(f"reach stage, fanout {a.fanout}, {os.cpu_count()} cores")
    print(" | ".join(f"{c:>16}" for c in cols))
    for r in rows:
        print(" | ".join(f"{str(r.get(c)):>16}" for c in cols))
    sys.stdout.flush()
    for t in trash:
        shutil.rmtree(t, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
