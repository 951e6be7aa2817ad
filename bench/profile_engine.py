"""Profile: the engine alone (no pytest) running every passive stage over a simulated fleet.

    .venv/bin/python bench/profile_engine.py --nodes 1024 [--top 40] [--out /tmp/engine.prof]

pytest runs the engine on a thread of its own (cProfile of a pytest run sees only the main
thread); here the engine's event loop runs on the main thread under cProfile with a CPU-time
clock, so the table says where the controller's CPU goes while it gathers and judges: SSH,
framing, parsing, checks, evidence. Prints CPU and wall seconds, then the profile's top
entries by own time and by cumulative time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from bench_scale import model  # noqa: E402

PASSIVE = ("reach", "pcie_gpu", "hca", "roce")


def profile_engine(root: Path, out: str) -> tuple[float, float, int]:
    from nodegate.core.settings import DEFAULT_FANOUT
    from nodegate.inventory import load_inventory
    from nodegate.profiles import ProfileLibrary
    from nodegate.session.engine import Engine
    from nodegate.stages.registry import STAGES
    from nodegate.transport.evidence import EvidenceWriter
    from nodegate.transport.ssh import SSHTransport

    inv = load_inventory(root / "inventory.yaml")
    nodes = list(inv.nodes)
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    profiles = {x.name: lib.get(x.profile or "") for x in nodes}
    run_dir = Path(tempfile.mkdtemp(prefix="ngprof-run-"))
    stages = [s for s in STAGES if s.name in PASSIVE]
    sel = [(c.id, x.name) for s in stages for c in s.checks for x in nodes]
    transport = SSHTransport(
        nodes, fanout=DEFAULT_FANOUT, evidence=EvidenceWriter(run_dir / "raw", "ssh")
    )
    engine = Engine(nodes, profiles, transport, run_dir, stages=stages)

    async def go() -> int:
        res = await engine.run(sel)
        await transport.close()
        res.write(run_dir)
        return sum(len(vs) for vs in res.verdicts.values())

    prof = cProfile.Profile(time.process_time)
    c0, t0 = time.process_time(), time.perf_counter()
    n = prof.runcall(asyncio.run, go())
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    prof.dump_stats(out)
    shutil.rmtree(run_dir, ignore_errors=True)
    return cpu, wall, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out", default="/tmp/nodegate-engine.prof")
    ap.add_argument("--subnet", default="127.92")
    a = ap.parse_args()
    from nodegate.sim.fleet import build_fleet

    tmp = Path(tempfile.mkdtemp(prefix=f"ngprof-{a.nodes}-"))
    (tmp / "model.yaml").write_text(yaml.safe_dump(model(a.nodes)))
    fleet = build_fleet(tmp / "model.yaml", tmp / "fleet", subnet=a.subnet)
    try:
        fleet.start(timeout_s=300)
        cpu, wall, n = profile_engine(fleet.root, a.out)
    finally:
        fleet.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{a.nodes} nodes, passive stages, engine only: {n} verdicts")
    print(f"cpu {cpu:.1f} s ({cpu / a.nodes * 1000:.1f} ms/node), wall {wall:.1f} s")
    st = pstats.Stats(a.out)
    st.sort_stats("tottime").print_stats(a.top)
    st.sort_stats("cumulative").print_stats(a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
