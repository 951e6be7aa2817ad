"""Benchmark: what one open remote process (an SSH channel) costs the controller (on demand).

    python bench/bench_channels.py                    # 32 nodes x 16 channels each
    python bench/bench_channels.py --nodes 32 --per-node 32

Opens one connection per simulated node, then `--per-node` channels on each, every one running
`sleep` (what an ib_write_bw side looks like to the controller while it measures: a channel
open, little output), all at once. Prints the controller's RSS before and with the channels
open, the RSS and CPU per channel, and the time to open them: the numbers behind
--max-active's default (DEFAULT_MAX_ACTIVE). The sshd sessions share this machine; the
controller's side is what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def rss_kb() -> int:
    """Resident set size now (not the peak): VmRSS of /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def run(n: int, per_node: int) -> dict[str, object]:
    from nodegate.core.values import CommandSpec
    from nodegate.inventory import load_inventory
    from nodegate.sim.fleet import build_fleet
    from nodegate.transport.ssh import SSHTransport

    tmp = Path(tempfile.mkdtemp(prefix=f"ngbench-ch-{n}-"))
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    for key in ("overrides", "faults"):
        doc.pop(key, None)
    doc.update(name=f"ch{n}", nodes=f"node[{1:04d}-{n:04d}]")
    (tmp / "model.yaml").write_text(yaml.safe_dump(doc))
    fleet = build_fleet(tmp / "model.yaml", tmp / "fleet", subnet="127.94")
    fleet.start(timeout_s=120)
    try:
        nodes = list(load_inventory(fleet.root / "inventory.yaml").nodes)
        transport = SSHTransport(nodes, fanout=n)

        async def go() -> dict[str, object]:
            # Connections first (what the passive stages leave open), so only channels count.
            await transport.run_stage(
                "warm", {x.name: [CommandSpec("t", ("true",), 10)] for x in nodes}
            )
            before, c0, t0 = rss_kb(), time.process_time(), time.perf_counter()
            spawns = [
                transport.spawn(x.name, ("sleep", "15"), 60) for x in nodes for _ in range(per_node)
            ]
            procs = await asyncio.gather(*spawns)
            opened_s, cpu = time.perf_counter() - t0, time.process_time() - c0
            during = rss_kb()
            results = await asyncio.gather(*(p.wait() for p in procs))
            ok = sum(1 for r in results if r.rc == 0)
            await transport.close()
            channels = len(procs)
            return {
                "nodes": n,
                "channels": channels,
                "ended_rc0": ok,
                "open_s": round(opened_s, 2),
                "rss_before_mb": round(before / 1024, 1),
                "rss_open_mb": round(during / 1024, 1),
                "kb_per_channel": round((during - before) / channels, 1),
                "cpu_ms_per_channel": round(cpu * 1000 / channels, 2),
            }

        return asyncio.run(go())
    finally:
        fleet.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--per-node", type=int, default=16)  # the sim's sshd allows 64 sessions
    a = ap.parse_args()
    row = run(a.nodes, a.per_node)
    print(" | ".join(f"{c:>18}" for c in row))
    print(" | ".join(f"{row[c]!s:>18}" for c in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
