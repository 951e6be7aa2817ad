"""Benchmark: nccl localization rounds, jobs and wall time (run on demand).

    python bench/bench_nccl.py                     # N = 16, 64, 256, 1024; 1..3 bad nodes
    python bench/bench_nccl.py --fleet 16          # also a real run on a simulated fleet

The planner is played with simulated outcomes (a job fails when it holds a bad node), so any
N runs in a second; wall time is modelled per round as its longest job: launcher start-up
plus the sweep, `START_S + PER_NODE_S * nodes` seconds (mpirun over SSH starts one orted per
node). Baselines, for the same bad nodes: naive pairwise (each node against one reference
node, one job at a time: N - 1 rounds) and halving (split failing sets in two, all failing
halves at once: about log2 N rounds). `--fleet N` runs the stage for real (mpirun, simulated
ranks over loopback) on an N-node simulated fleet with one slow node and prints its wall time.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))  # tests.nccl_playback

from nodegate.stages.nccl.plan import NcclJob  # noqa: E402

from tests.nccl_playback import bad_nodes, play  # noqa: E402

START_S = 10.0  # mpirun + orted start, NCCL init
PER_NODE_S = 0.05  # bootstrap and ring set-up per node


def job_s(nodes: int) -> float:
    return START_S + PER_NODE_S * nodes


def planner(n: int, bad: Sequence[str]) -> tuple[int, int, float, bool]:
    """(localization rounds, jobs, modelled wall s, named exactly the bad nodes)."""
    sizes: dict[str, int] = {}
    judge = bad_nodes(bad)

    def record(job: NcclJob) -> bool:
        return judge(job)

    names = [f"gpu{i:04d}" for i in range(1, n + 1)]
    played = play(names, record)
    loc = played.localizer.loc
    for r in loc.results:
        if r.round.number > 2:
            label = r.round.label
            sizes[label] = max(sizes.get(label, 0), len(r.test.nodes))
    jobs = sum(1 for r in loc.results if r.round.number > 2)
    wall = sum(job_s(s) for s in sizes.values())
    return played.localization_rounds, jobs, wall, played.named == tuple(sorted(bad))


def naive(n: int) -> tuple[int, int, float]:
    return n - 1, n - 1, (n - 1) * job_s(2)


def halving(n: int, bad: Sequence[str], names: Sequence[str]) -> tuple[int, int, float]:
    """Split every failing set in two, all halves at once, until single nodes."""
    rounds = jobs = 0
    wall = 0.0
    failing = [list(names)]
    while any(len(s) > 1 for s in failing):
        nxt = []
        biggest = 0
        for s in failing:
            if len(s) == 1:
                continue
            half = len(s) // 2
            for part in (s[:half], s[half:]):
                jobs += 1
                biggest = max(biggest, len(part))
                if set(part) & set(bad):
                    nxt.append(part)
        rounds += 1
        wall += job_s(biggest)
        failing = nxt
    return rounds, jobs, wall


def table(sizes: Sequence[int], seed: int) -> None:
    rng = random.Random(seed)
    print(f"{'N':>5} {'bad':>3} | {'planner rounds':>14} {'jobs':>5} {'wall s':>7} {'named':>5} "
          f"| {'naive rounds':>12} {'wall s':>7} | {'halving rounds':>14} {'jobs':>5} "
          f"{'wall s':>7}")  # fmt: skip
    for n in sizes:
        names = [f"gpu{i:04d}" for i in range(1, n + 1)]
        for d in (1, 2, 3):
            bad = sorted(rng.sample(names, d))
            r, j, w, ok = planner(n, bad)
            nr, _, nw = naive(n)
            hr, hj, hw = halving(n, bad, names)
            print(f"{n:>5} {d:>3} | {r:>14} {j:>5} {w:>7.0f} {'yes' if ok else 'NO':>5} "
                  f"| {nr:>12} {nw:>7.0f} | {hr:>14} {hj:>5} {hw:>7.0f}")  # fmt: skip
    print(
        f"(log2 1024 = {math.log2(1024):g}; wall: each round's longest job, "
        f"{START_S:g} s + {PER_NODE_S:g} s per node)"
    )


def fleet_run(n: int) -> None:
    import subprocess
    import tempfile
    import time

    import yaml

    tmp = Path(tempfile.mkdtemp(prefix="bench-nccl-"))
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    doc.pop("overrides", None)
    doc.update(name="bench", nodes=f"gpu[001-{n:03d}]", profile="bench-nccl",
               faults={"gpu005": [{"nccl_slow": "all"}]})  # fmt: skip
    doc["hardware"]["nccl"] = {"gpus": 1}
    (tmp / "model.yaml").write_text(yaml.safe_dump(doc))
    fleet = tmp / "fleet"
    nodegate = [sys.executable, "-m", "nodegate.cli"]
    subprocess.run([*nodegate, "sim", "up", "--model", str(tmp / "model.yaml"), "--dir",
                    str(fleet), "--subnet", "127.95"], check=True)  # fmt: skip
    prof = {"name": "bench-nccl", "description": "bench", "extends": "generic-hgx-h100",
            "nccl": {"ranks_per_node": 1, "message_bytes": 268435456, "job_timeout_s": 300,
                     "sweep": {"min_bytes": 1048576, "max_bytes": 268435456, "step_factor": 4},
                     "mpirun": {"args": ["--allow-run-as-root"], "mca": {
                         "plm_rsh_agent": f"ssh -F {fleet / 'ssh_config'} -p 2222",
                         "oob_tcp_if_include": "lo", "btl_tcp_if_include": "lo"}}}}  # fmt: skip
    (tmp / "profiles").mkdir()
    (tmp / "profiles" / "bench-nccl.yaml").write_text(yaml.safe_dump(prof))
    t0 = time.monotonic()
    try:
        cmd = [sys.executable, "-m", "pytest", str(REPO / "suites"), "-q", "-m", "nccl",
               f"--inventory={fleet / 'inventory.yaml'}", f"--profiles-dir={tmp / 'profiles'}",
               f"--reports-dir={tmp / 'reports'}", "-p", "no:cacheprovider"]  # fmt: skip
        subprocess.run(cmd, cwd=tmp, check=False, capture_output=True)
    finally:
        subprocess.run([*nodegate, "sim", "stop", "--dir", str(fleet)], check=False)
    print(f"real run, {n} nodes, one slow: {time.monotonic() - t0:.1f} s (reports in {tmp})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 1024])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fleet", type=int, default=0, help="also run a real N-node fleet")
    args = ap.parse_args()
    table(args.sizes, args.seed)
    if args.fleet:
        fleet_run(args.fleet)


if __name__ == "__main__":
    main()
