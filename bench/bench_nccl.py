"""Benchmark: nccl localization rounds, jobs and wall time (run on demand).

    python bench/bench_nccl.py                     # N = 16, 64, 256, 1024; 1..3 bad nodes
    python bench/bench_nccl.py --fleet 16          # also a real run on a simulated fleet
    python bench/bench_nccl.py --matrix            # 1..3 bad nodes + one slow leaf pair

`--matrix`: N = 64, 256, 1,024 in 32 leaves, 1..3 bad nodes (every job holding one fails) and
one slow leaf pair (every job holding nodes of both leaves fails: a slow spine between them),
the full matrix (4 collectives x two_node_ring, leaf, leaves of 2, whole) after localization:
rounds, modelled wall, whether exactly the bad nodes were named, how many healthy nodes were
named with them, and whether a matrix finding at `leaves` holds the slow pair.

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


def matrix_table(sizes: Sequence[int], seed: int, n_leaves: int = 32) -> None:
    from nodegate.stages.nccl.matrix import GroupResult, findings
    from nodegate.stages.nccl.profile import Matrix

    floors = {s: {"min": 100, "unit": "GB/s"} for s in ("two_node_ring", "leaf", "leaves", "whole")}
    m = Matrix.of({
        "collectives": ["all_reduce", "all_gather", "reduce_scatter", "alltoall"],
        "scales": {s: {"message_bytes": 1 << 30, "iterations": 5}
                   for s in ("two_node_ring", "leaf", "leaves", "whole")},
        "line_rate": {"value": 400, "unit": "GB/s"}, "max_drop_pct": 20,
        "floors": {c: floors for c in ("all_reduce", "all_gather", "reduce_scatter", "alltoall")},
    })  # fmt: skip
    rng = random.Random(seed)
    print(f"{'N':>5} {'bad':>3} {'slow pair':>15} | {'loc rounds':>10} {'matrix rounds':>13} "
          f"{'wall s':>7} | {'named':>5} {'healthy named':>13} {'pair found':>10} "
          f"| {'halving rounds':>14} {'wall s':>7}")  # fmt: skip
    for n in sizes:
        names = [f"gpu{i:04d}" for i in range(1, n + 1)]
        leaf = {x: f"leaf{i * n_leaves // n + 1:02d}" for i, x in enumerate(names)}
        for d in (1, 2, 3):
            bad = sorted(rng.sample(names, d))
            a = rng.randrange(1, n_leaves)
            pair = (f"leaf{a:02d}", f"leaf{a + 1:02d}")  # in one `leaves` group when a is odd
            slow = set(pair)

            def judge(
                job: NcclJob,
                bad: Sequence[str] = bad,
                slow: set[str] = slow,
                leaf: dict[str, str] = leaf,
            ) -> bool:
                crosses = slow <= {leaf[x] for x in job.nodes}
                return not (set(job.nodes) & set(bad)) and not crosses

            played = play(names, judge, leaf, matrix=m)
            loc = played.localizer.loc
            sizes_by_round: dict[int, int] = {}
            for r in loc.results:
                if r.round.number > 2:
                    k = r.round.number
                    sizes_by_round[k] = max(sizes_by_round.get(k, 0), len(r.test.nodes))
            wall = sum(job_s(x) for x in sizes_by_round.values())
            mrounds = len({r.round.number for r in loc.of_phase("matrix")})
            res = [GroupResult(r.test.collective, r.test.scale, r.test.nodes, r.value)
                   for r in loc.of_phase("matrix")]  # fmt: skip
            found = any(f.group.scale == "leaves" and slow <= {leaf[x] for x in f.group.nodes}
                        for f in findings(m, res))  # fmt: skip
            named = set(played.named)
            hr, _, hw = halving(n, bad, names)
            print(f"{n:>5} {d:>3} {'+'.join(pair):>15} | {played.localization_rounds:>10} "
                  f"{mrounds:>13} {wall:>7.0f} | {'yes' if set(bad) <= named else 'NO':>5} "
                  f"{len(named - set(bad)):>13} {'yes' if found else 'NO':>10} "
                  f"| {hr:>14} {hw:>7.0f}")  # fmt: skip
    print(f"(wall: each round's longest job, {START_S:g} s + {PER_NODE_S:g} s per node; halving: "
          "bad nodes only, the slow pair not modelled)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 1024])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fleet", type=int, default=0, help="also run a real N-node fleet")
    ap.add_argument("--matrix", action="store_true", help="bad nodes + a slow leaf pair")
    args = ap.parse_args()
    if args.matrix:
        matrix_table([s for s in args.sizes if s >= 64] or [64, 256, 1024], args.seed)
        return
    table(args.sizes, args.seed)
    if args.fleet:
        fleet_run(args.fleet)


if __name__ == "__main__":
    main()
