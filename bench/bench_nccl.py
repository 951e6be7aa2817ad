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
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))  # tests.nccl_playback

from nodegate.stages.nccl.plan import Localization, NcclJob  # noqa: E402

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


def other_engine(
    leaf: dict[str, str], judge: Callable[[Sequence[str]], bool]
) -> tuple[int, float, set[str], tuple[str, ...] | None]:
    """The other engine's method, played with the same faults: rack-sized groups (one per
    leaf, at once), halving inside every failing rack (all halves at once) to name nodes, then
    mixed-group probing between racks: halves of the rack set, a failing half halved again,
    and when both halves pass, each side halved against the other whole side (one side per
    round). (rounds, wall s, nodes named, the leaf pair named)"""
    racks: dict[str, list[str]] = {}
    for x, lf in sorted(leaf.items()):
        racks.setdefault(lf, []).append(x)
    rounds, wall = 1, job_s(max(len(v) for v in racks.values()))
    failing = [v for v in racks.values() if not judge(v)]
    named: set[str] = set()
    while failing:
        nxt = []
        rounds += 1
        wall += job_s(max(len(s) // 2 + 1 for s in failing))
        for s in failing:
            for part in (s[: len(s) // 2], s[len(s) // 2 :]):
                if part and not judge(part):
                    (named.update(part) if len(part) == 1 else nxt.append(part))
        failing = nxt
    good = {lf: next(x for x in ns if x not in named) for lf, ns in racks.items()}

    def over(leaves: Sequence[str]) -> bool:
        return judge([good[lf] for lf in leaves])

    side = sorted(racks)
    if over(side):
        return rounds, wall, named, None
    left: list[str] = []
    while len(side) + len(left) > 2:
        rounds += 1
        wall += job_s(len(side))
        if not left:  # the pair in one part: halve it
            a, b = side[: len(side) // 2], side[len(side) // 2 :]
            if not over(a):
                side = a
            elif not over(b):
                side = b
            else:
                side, left = a, b
            continue
        big = side if len(side) >= len(left) else left
        other = left if big is side else side
        a = big[: len(big) // 2]
        keep = a if not over(a + other) else big[len(big) // 2 :]
        side, left = (keep, other) if big is side else (other, keep)
        if len(side) == 1 and len(left) == 1:
            break
    found = tuple(sorted(side + left))
    return rounds, wall, named, found if len(found) == 2 else None


def pair_named(loc: Localization, pair: tuple[str, str]) -> str:
    """`yes`, or `NO (4 left)`: the pair among the candidates left (marked, not named)."""
    if loc.slow_pair() == pair:
        return "yes"
    left = loc.pair_candidates() or set()
    return f"NO ({len(left)} left)" if pair in left else "NO"


def matrix_table(sizes: Sequence[int], seed: int, n_leaves: int = 32) -> None:
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
    print(f"{'N':>5} {'bad':>3} {'slow pair':>13} | {'node':>4} {'probe':>5} {'loc':>3} "
          f"{'matrix':>6} {'wall s':>6} | {'bad named':>9} {'healthy':>7} {'pair named':>10} "
          f"| {'halving':>7} {'wall s':>6} | {'other':>5} {'wall s':>6} {'named':>5}")  # fmt: skip
    for n in sizes:
        names = [f"gpu{i:04d}" for i in range(1, n + 1)]
        leaf = {x: f"leaf{i * n_leaves // n + 1:02d}" for i, x in enumerate(names)}
        for d in (1, 2, 3):
            bad = sorted(rng.sample(names, d))
            a, b = sorted(rng.sample(range(1, n_leaves + 1), 2))
            pair = (f"leaf{a:02d}", f"leaf{b:02d}")

            def fails(
                nodes: Sequence[str],
                bad: Sequence[str] = bad,
                pair: Sequence[str] = pair,
                leaf: dict[str, str] = leaf,
            ) -> bool:
                return bool(set(nodes) & set(bad)) or set(pair) <= {leaf[x] for x in nodes}

            def judge(job: NcclJob, fails: Callable[[Sequence[str]], bool] = fails) -> bool:
                return job.phase == "single" or not fails(job.nodes)  # bad in jobs of several

            played = play(names, judge, leaf, matrix=m)
            loc = played.localizer.loc
            longest: dict[int, int] = {}
            for r in loc.results:
                if r.round.number > 2:
                    k = r.round.number
                    longest[k] = max(longest.get(k, 0), len(r.test.nodes))
            wall = sum(job_s(x) for x in longest.values())
            rounds_of = {ph: len({r.round.number for r in loc.of_phase(ph)})
                         for ph in ("matrix", "probe")}  # fmt: skip
            node_rounds = len({r.round.number for r in loc.of_phase("group", "pair")})
            named = set(played.named)
            ok = named == set(bad)
            hr, _, hw = halving(n, bad, names)

            def passes(
                nodes: Sequence[str], fails: Callable[[Sequence[str]], bool] = fails
            ) -> bool:
                return not fails(nodes)

            orr, ow, onamed, opair = other_engine(leaf, passes)
            oo = onamed == set(bad) and opair == pair
            print(f"{n:>5} {d:>3} {'+'.join(pair):>13} | {node_rounds:>4} {rounds_of['probe']:>5} "
                  f"{played.localization_rounds:>3} {rounds_of['matrix']:>6} {wall:>6.0f} | "
                  f"{'yes' if ok else 'NO':>9} {len(named - set(bad)):>7} "
                  f"{pair_named(loc, pair):>10} | {hr:>7} {hw:>6.0f} | "
                  f"{orr:>5} {ow:>6.0f} {'yes' if oo else 'NO':>5}")  # fmt: skip
    print(
        f"(node/probe: rounds holding group or pair jobs / probes; loc: localization rounds "
        f"after the whole set, both together; wall: each round's longest job, {START_S:g} s + "
        f"{PER_NODE_S:g} s per node, localization and matrix; halving: bad nodes only; other: "
        "rack groups, halving, mixed-group probing between racks)"
    )


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
