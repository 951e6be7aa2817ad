"""Benchmark: stage traffic's plan at scale, the rounds it needs to name injected faults, and
the flow model's own CPU (run on demand; no fleet is started).

    python bench/bench_traffic.py                    # 64, 256 and 1,024 nodes, 8 rails
    python bench/bench_traffic.py --sizes 64 --flows 1024

Planned rounds: every incast of a round at once (one receiver per node at most, one test per
node and rail), rails at once; simulated wall time = rounds x their -D windows (victim alone,
then the load: 2 x duration_s per incast round, 1 x per bisection) plus `--overhead` seconds per
round (spawning, readiness, counter reads). Rounds to name 1-3 faulty parts: np_off receivers
and rp_off senders are named in the incast round where they receive / send first; an uplink
fault in the bisection, or in the re-test round when the bisection's slow flows leave two
candidate leaves, found here by running the stage's own judge on the flow model's rates. The
model's CPU: one max-min solve over N concurrent flows (incasts 8->1 plus a bisection), without
and with the fabric's switches (the XmitWait of every switch port the queues build on).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))

from nodegate.profiles import ProfileLibrary  # noqa: E402
from nodegate.sim.flowmodel import Fabric, Flow, solve  # noqa: E402
from nodegate.stages.traffic.blame import judge_bisection  # noqa: E402
from nodegate.stages.traffic.measure import Measured  # noqa: E402
from nodegate.stages.traffic.plan import TrafficPlan, leaf_retests  # noqa: E402
from nodegate.stages.traffic.profile import traffic_profile  # noqa: E402

PER_LEAF = 16
RAILS = 8


def fleet(n: int) -> tuple[list[str], dict[str, str]]:
    nodes = [f"node{i:04d}" for i in range(1, n + 1)]
    return nodes, {x: f"leaf{i // PER_LEAF + 1:02d}" for i, x in enumerate(nodes)}


def fabric(
    nodes: list[str], leaf: dict[str, str], faults: list[dict[str, object]], down: str = ""
) -> Fabric:
    """The flow model's fabric; `down`: that leaf's uplink 0 on rail 0 has no link (the
    fabric's `uplink_down`, as its switch table carries it)."""
    counts: dict[str, int] = {}
    for x in nodes:
        counts[leaf[x]] = counts.get(leaf[x], 0) + 1
    doc: dict[str, object] = {
        "nodes": {x: {"leaf": leaf[x], "rate_gbps": {"default": 400}} for x in nodes},
        "leaf_nodes": counts,
        "switch_faults": faults,
    }
    if down:
        ups = [[PER_LEAF + k + 1, 1, k + 1, k != 0] for k in range(counts[down])]
        doc["switches"] = {f"{down}|0": {"lid": 2, "hosts": {}, "uplinks": ups}}
    return Fabric(doc)


def bisection_rounds(plan: TrafficPlan, fab: Fabric, rail: int, prof: object) -> int:
    """Rounds after the incasts until the uplink fault is named (1: the bisection itself)."""
    rounds = plan.planned
    (bis,) = [t for t in rounds[-1].tests if t.rail == rail]
    for extra, test in enumerate([bis], start=1):
        rates, _ = solve(fab, [Flow(n, a, b, rail) for n, a, b in test.flows()])
        j = judge_bisection(test, Measured(flows=rates), prof, plan.leaf, "k")  # type: ignore[arg-type]
        if any(i.component.endswith("uplinks") for i in j.infra):
            return extra
        if j.suspects:
            for t in leaf_retests(plan.nodes, plan.leaf, rail, j.suspects, plan.seed):
                rates, _ = solve(fab, [Flow(n, a, b, rail) for n, a, b in t.flows()])
                r = judge_bisection(t, Measured(flows=rates), prof, plan.leaf, "k")  # type: ignore[arg-type]
                if r.infra:
                    return extra + 1
    return -1  # not named


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--flows", type=int, default=8192)
    ap.add_argument("--overhead", type=float, default=3.0, help="seconds per round")
    args = ap.parse_args()
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    prof = traffic_profile(lib.get("hgx-h100-roce"))
    d = prof.duration_s
    print(f"profile hgx-h100-roce: k={prof.senders}, -D {d} s, {RAILS} rails at once, "
          f"{PER_LEAF} nodes per leaf, {args.overhead:g} s overhead per round")  # fmt: skip
    head = ("nodes", "incast rounds", "tests/round", "bisection", "wall s", "np_off named",
            "+ rp_off", "+ uplink_down")  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for n in (int(s) for s in args.sizes.split(",")):
        nodes, leaf = fleet(n)
        plan = TrafficPlan(tuple(nodes), leaf, tuple(range(RAILS)), prof.senders, prof.seed)
        rounds = plan.planned
        incasts = rounds[:-1]
        wall = len(incasts) * (2 * d + args.overhead) + (d + args.overhead)
        rng = random.Random(n)
        # part 1: an np_off receiver (named in the round it receives); part 2: an rp_off
        # sender (the first round it sends); part 3: an uplink down (the bisection, or its
        # re-test round): the round by which all of the first 1, 2, 3 parts are named
        np_node, rp_node = rng.sample(nodes, 2)
        np_round = next(r.id.number for r in incasts for t in r.tests
                        if t.rail == 0 and t.receiver == np_node)  # fmt: skip
        rp_round = next(r.id.number for r in incasts for t in r.tests
                        if t.rail == 0 and rp_node in t.senders)  # fmt: skip
        lf = leaf[rng.choice(nodes)]
        fab = fabric(nodes, leaf, [], down=lf)
        extra = bisection_rounds(plan, fab, 0, prof)
        uplink = len(incasts) + extra if extra > 0 else -1
        names = [np_round, max(np_round, rp_round), max(np_round, rp_round, uplink)]
        row = (n, len(incasts), max(len(r.tests) for r in incasts), 1, f"{wall:.0f}", *names)
        print("| " + " | ".join(str(x) for x in row) + " |")
    # The flow model's own CPU: incasts 8->1 and a bisection, N flows at once.
    n = max(args.flows, 64)
    nodes, leaf = fleet(n)
    fab = fabric(nodes, leaf, [])
    flows = []
    for i in range(0, n - 9, 9):
        flows += [Flow(f"i{i}-{j}", nodes[i + j], nodes[i], 0) for j in range(1, 9)]
    half = n // 2
    flows += [Flow(f"b{i}", nodes[i], nodes[half + (i * 7) % half], 1) for i in range(half)]
    flows = flows[: args.flows]
    t0 = time.process_time()
    solve(fab, flows)
    cpu = time.process_time() - t0
    print(f"flow model: {len(flows)} concurrent flows over {n} nodes: {cpu:.2f} s CPU per solve")
    # the same on an InfiniBand fabric: every leaf's switch known, XmitWait per port computed
    leaves = sorted(set(leaf.values()))
    switches = {
        f"{lf}|{r}": {
            "lid": 100 + i, "hosts": {x: j + 1 for j, x in enumerate(
                [x for x in nodes if leaf[x] == lf])},
            "uplinks": [[PER_LEAF + k + 1, 1 + k, i + 1, True] for k in range(PER_LEAF)],
        }
        for i, lf in enumerate(leaves) for r in (0, 1)
    }  # fmt: skip
    ib = Fabric({**fab_doc(fab), "switches": switches})
    t0 = time.process_time()
    solve(ib, flows)
    cpu = time.process_time() - t0
    print(f"  with the fabric's switches (XmitWait per port): {cpu:.2f} s CPU per solve")
    return 0


def fab_doc(fab: Fabric) -> dict[str, object]:
    """The topology document a model Fabric was built from (its nodes and leaves)."""
    return {"nodes": fab.nodes, "leaf_nodes": fab.leaf_nodes, "switch_faults": []}


if __name__ == "__main__":
    sys.exit(main())
