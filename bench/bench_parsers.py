"""Benchmark: what judging one node costs, per passive stage, from a run's raw evidence.

    .venv/bin/python bench/bench_parsers.py --run reports/latest [--nodes 8] [--profile]

For each passive stage, each of the first --nodes nodes' captured outcome is parsed into the
stage's facts (`Stage.facts`) and judged (`CheckTable.judge_node`) again and again; prints the
controller CPU per node (ms) of each, and with --profile the top entries by own time. The
numbers are the engine's judging cost without SSH, evidence or pytest.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PASSIVE = ("reach", "pcie_gpu", "hca", "roce")


def outcome_of(doc: dict[str, object]):  # type: ignore[no-untyped-def]
    from nodegate.core.values import CommandResult, NodeOutcome, Reach

    results = {
        cid: CommandResult(
            cid,
            c["cmd"],
            c["rc"],
            c["stdout"],
            c["stderr"],
            c["duration_s"],
            c["timed_out"],
            evidence=f"raw/{doc['node']}/{doc['stage']}.json#{cid}",
            truncated=c.get("truncated"),
        )
        for cid, c in doc["commands"].items()  # type: ignore[attr-defined]
    }
    return NodeOutcome(str(doc["node"]), Reach(doc["reach"]), results, str(doc["detail"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default=str(REPO / "reports" / "latest"))
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    from nodegate.inventory import load_inventory  # noqa: F401 - the package must import
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.registry import stage
    from nodegate.transport.evidence import evidence_file, open_evidence

    run = Path(a.run)
    adm = json.loads((run / "admission.json").read_text())
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    prof = cProfile.Profile(time.process_time) if a.profile else None
    print(f"{run}: ms of CPU per node (average of {a.repeat} x up to {a.nodes} nodes)")
    print(f"{'stage':>10} | {'nodes':>5} | {'facts_ms':>9} | {'judge_ms':>9}")
    for name in PASSIVE:
        st = stage(name)
        cases = []
        for node, d in adm["nodes"].items():
            if len(cases) == a.nodes:
                break
            if evidence_file(run / "raw" / node / f"{name}.json") is None or not d["profile"]:
                continue
            doc = open_evidence(run / "raw" / node / f"{name}.json")
            if doc.get("kind", "session") != "session" or doc["reach"] != "ok":
                continue
            cases.append((outcome_of(doc), st.profile_of(lib.get(d["profile"]))))
        if not cases:
            continue
        if prof is not None:
            prof.enable()
        t0 = time.process_time()
        facts = []
        for _ in range(a.repeat):
            facts = [(st.facts(o, p), o, p) for o, p in cases]
        t1 = time.process_time()
        for _ in range(a.repeat):
            for f, o, p in facts:
                st.checks.judge_node(o.node, f, p)
        t2 = time.process_time()
        if prof is not None:
            prof.disable()
        n = a.repeat * len(cases)
        print(f"{name:>10} | {len(cases):>5} | {(t1 - t0) / n * 1000:9.2f} | "
              f"{(t2 - t1) / n * 1000:9.2f}")  # fmt: skip
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
