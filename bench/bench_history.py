"""Benchmark: the run history on SQLite and PostgreSQL (run on demand, not a test).

    .venv/bin/python bench/bench_history.py                       # both backends, the issue's sizes
    .venv/bin/python bench/bench_history.py --ingest-nodes 500 --runs 10 --nodes 128 \
        --backends sqlite

Per backend: the ingest of one run of --ingest-nodes nodes (every verdict and number, through
the same `write_run` a run uses; a fresh database each), then a database of --runs runs of
--nodes nodes (the first run written by `write_run`, the others copied from it in SQL with
every number moved a little, so that filling it takes seconds, not an hour), and the median
time of a node's timeline and of one metric's series for a node and component over those runs;
the database's size per run per node. Targets (the issue): ingest <= 10 s, each query
<= 100 ms. PostgreSQL: a server of its own in a temporary directory (tests/pgserver.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "plugins"), str(REPO)]

import sqlalchemy as sa  # noqa: E402
from nodegate.admission.gate import admission_doc, decide  # noqa: E402
from nodegate.core.results import RunResult  # noqa: E402
from nodegate.core.thresholds import Threshold  # noqa: E402
from nodegate.core.values import Status, Verdict  # noqa: E402
from nodegate.history import queries  # noqa: E402
from nodegate.history import schema as t  # noqa: E402
from nodegate.history.ingest import write_run  # noqa: E402
from nodegate.history.store import Store, open_store  # noqa: E402
from nodegate.stages.registry import STAGES  # noqa: E402

BW = "ib_pairs.rail.bandwidth"
FLOOR = Threshold("min", 360, "Gb/s")
# Components per stage, shaped as the stages name them (8 GPUs, 8 rails).
PARTS = {
    "reach": ["node"],
    "pcie_gpu": [f"GPU{i} 0000:{0x18 + 16 * i:02x}:00.0 serial 16501240{i:05d}" for i in range(8)],
    "hca": [f"mlx5_{i} port 1 (rail {i})" for i in range(8)],
    "ib_pairs": [f"mlx5_{i} port 1 (rail {i})" for i in range(8)],
    "nccl": ["node"],
}


def checks() -> list[tuple[str, list[str]]]:
    """(check id, components) of the stages a generic 8 x H100 + 8 x NDR node runs."""
    out = []
    for stage in STAGES:
        parts = PARTS.get(stage.name)
        if parts is None:
            continue  # roce: not on an InfiniBand node
        for c in stage.checks:
            out.append((c.id, parts))
    return out


def node_verdicts(node: str, table: list[tuple[str, list[str]]], k: int) -> Iterator[Verdict]:
    """Every verdict of one node: bandwidths and counts as numbers, versions as text; one in
    97 nodes has a slow rail 3 below the floor."""
    for check, parts in table:
        for j, comp in enumerate(parts):
            if check == BW:
                gbps = 392.0 - (j + k) % 5 * 0.5
                if k % 97 == 0 and j == 3:
                    gbps = 331.0
                ok = FLOOR.holds(gbps)
                yield Verdict(check, node, Status.PASS if ok else Status.FAIL, comp, gbps,
                              ">= 360", "Gb/s", "" if ok else "below the floor",
                              remediation_class=None if ok else "reseat_cable",
                              reference=FLOOR)  # fmt: skip
            elif j % 2:
                yield Verdict(check, node, Status.PASS, comp, 16, "16", "lanes")
            else:
                yield Verdict(check, node, Status.PASS, comp, "28.41.1000", "28.41.1000")


def make_run(run_id: str, n: int, at: dt.datetime) -> tuple[dict[str, Any], RunResult]:
    nodes = [f"gpu{i:05d}" for i in range(1, n + 1)]
    table = checks()
    result = RunResult(stages_run=[s.name for s in STAGES if s.name in PARTS])
    for k, node in enumerate(nodes):
        for v in node_verdicts(node, table, k):
            result.add(v)
    selected = list(result.verdicts)
    decisions = decide(selected, result, dict.fromkeys(nodes, "generic-hgx-h100"), {})
    meta = {"run_id": run_id, "started_at": at.isoformat(), "finished_at": at.isoformat(),
            "inventory": "bench.yaml", "transport": "ssh", "stages": result.stages_run}  # fmt: skip
    return admission_doc(decisions, nodes, meta, (c for c, _ in selected)), result


def verdicts_of(result: RunResult) -> Iterator[Verdict]:
    return (v for vs in result.verdicts.values() for v in vs)


def ingest(store: Store, n: int) -> tuple[float, int]:
    doc, result = make_run("ingest", n, dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc))
    t0 = time.perf_counter()
    w = write_run(store, doc, verdicts_of(result))
    return time.perf_counter() - t0, w.verdicts


def fill(store: Store, runs: int, n: int) -> float:
    """`runs` runs of `n` nodes: the first written, the others copied from it in SQL."""
    t0 = time.perf_counter()
    start = dt.datetime(2026, 9, 1, tzinfo=dt.timezone.utc)
    doc, result = make_run("h000", n, start)
    write_run(store, doc, verdicts_of(result))
    with store.writing() as conn:
        first = conn.execute(sa.select(t.runs).where(t.runs.c.run_id == "h000")).one()._mapping
        for i in range(1, runs):
            when = (start + dt.timedelta(days=i)).replace(tzinfo=None)
            row = {**first, "run_id": f"h{i:03d}", "started_at": when, "finished_at": when}
            row.pop("id")
            new = conn.execute(sa.insert(t.runs).returning(t.runs.c.id), row).scalar_one()
            for table in (t.decisions, t.verdicts, t.measurements):
                cols = [c.name for c in table.columns]
                picked = [sa.literal(new) if c == "run" else
                          (table.c.value - (i % 7) * 0.25 if c == "value" else table.c[c])
                          for c in cols]  # fmt: skip
                conn.execute(sa.insert(table).from_select(
                    cols, sa.select(*picked).where(table.c.run == first["id"])))  # fmt: skip
    with store.writing() as conn:
        conn.exec_driver_sql("ANALYZE")  # statistics for the planner, as a long-lived one has
    return time.perf_counter() - t0


def timed(fn: Any, repeat: int = 20) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = len(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rows


def size_bytes(store: Store, path: Path | None) -> int:
    if path is not None:  # the file, its write-ahead log folded in (as a quiet database's is)
        store.close()
        import sqlite3

        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        return path.stat().st_size
    with store.reading() as conn:
        return int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ingest-nodes", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--backends", default="sqlite,postgresql")
    args = ap.parse_args()
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="nodegate-bench-history-"))
    pg = None
    try:
        for backend in args.backends.split(","):
            urls: list[tuple[str, Path | None]] = []
            if backend == "sqlite":
                urls = [(f"sqlite:///{tmp / f'{name}.sqlite'}", tmp / f"{name}.sqlite")
                        for name in ("ingest", "fill")]  # fmt: skip
            else:
                from tests.pgserver import start_pg

                pg = pg or start_pg()
                for name in ("ingest", "fill"):
                    pg.createdb(name)
                urls = [(pg.url(name), None) for name in ("ingest", "fill")]
            store = open_store(urls[0][0])
            took, nverdicts = ingest(store, args.ingest_nodes)
            store.close()
            store = open_store(urls[1][0])
            filled = fill(store, args.runs, args.nodes)
            node = f"gpu{args.nodes // 2:05d}"
            with store.reading() as conn:
                tl, tl_rows = timed(lambda c=conn, n=node: queries.timeline(c, n))
                se, se_rows = timed(lambda c=conn, n=node: queries.series(c, n, BW, "mlx5_3"))
            with store.reading() as conn:
                nruns = conn.execute(sa.select(sa.func.count()).select_from(t.runs)).scalar()
                nv = conn.execute(sa.select(sa.func.count()).select_from(t.verdicts)).scalar()
            size = size_bytes(store, urls[1][1])
            store.close()
            rows.append((backend, args.ingest_nodes, nverdicts, took, nruns, nv, filled,
                         tl, tl_rows, se, se_rows, size / (nruns * args.nodes)))  # fmt: skip
    finally:
        if pg is not None:
            pg.stop()
        for p in sorted(tmp.glob("*"), reverse=True):
            p.unlink()
        os.rmdir(tmp)
    head = ("backend", "ingest run", "verdicts", "ingest s", "stored runs", "verdict rows",
            "fill s", "timeline ms (rows)", "series ms (rows)", "bytes / run / node")  # fmt: skip
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for b, n, nv, took, nruns, nvr, filled, tl, tlr, se, ser, per in rows:
        print(
            f"{b} | {n} nodes | {nv:,} | {took:.1f} | {nruns} x {args.nodes} nodes | {nvr:,} | "
            f"{filled:.0f} | {tl * 1000:.1f} ({tlr}) | {se * 1000:.1f} ({ser}) | {per:,.0f}"
        )
    print(
        "targets: ingest <= 10 s, each query <= 100 ms; load average while it ran: "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
