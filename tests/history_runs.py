"""Runs for the history tests, decided by the real gate from verdicts the test names."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodegate.admission.gate import admission_doc, decide, write_admission
from nodegate.core.results import RunResult
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Status, Verdict
from nodegate.history import rules
from nodegate.history.ingest import write_run
from nodegate.history.judge import judge_run
from nodegate.history.store import Store

PROFILE = "generic-hgx-h100"
BW, RAIL3 = "ib_pairs.rail.bandwidth", "mlx5_3 port 1 (rail 3)"
FLOOR = Threshold("min", 360, "Gb/s")
T0 = dt.datetime(2026, 11, 1, 8, 0, tzinfo=dt.timezone.utc)


def bw(node: str, gbps: float, component: str = RAIL3) -> Verdict:
    status = Status.PASS if FLOOR.holds(gbps) else Status.FAIL
    cls = None if status is Status.PASS else "reseat_cable"
    return Verdict(BW, node, status, component, gbps, FLOOR.expected(), "Gb/s",
                   "" if status is Status.PASS else f"{gbps} Gb/s below the floor",
                   reference=FLOOR, remediation_class=cls)  # fmt: skip


def ssh(node: str, ok: bool = True) -> Verdict:
    if ok:
        return Verdict("reach.ssh", node, Status.PASS, "ssh", "ok", "ok")
    return Verdict("reach.ssh", node, Status.FAIL, "ssh", "unreachable", "ok", None,
                   "unreachable: connection refused", remediation_class="retest")  # fmt: skip


@dataclass
class Made:
    doc: dict[str, Any]
    result: RunResult
    flags: list[rules.Flag]


def make_run(
    run_id: str,
    verdicts: Iterable[Verdict],
    nodes: Iterable[str],
    at: dt.datetime,
    *,
    interrupted: str | None = None,
    extra: Mapping[str, Any] | None = None,
    store: Store | None = None,
    by_node: Mapping[str, rules.HistoryRules] | None = None,
) -> Made:
    """The run's admission document and result, as the session makes them; with `store` and
    `by_node`, judged by the history rules first (the flags applied, as the session does)."""
    nodes = list(nodes)
    result = RunResult(stages_run=["reach", "ib_pairs"], interrupted=interrupted)
    for v in verdicts:
        result.add(v)
    selected = sorted({(c, n) for (c, n) in result.verdicts})
    profiles = {n: PROFILE for n in nodes}
    decisions = decide(selected, result, profiles, {}, None, interrupted)
    flags: list[rules.Flag] = []
    if store is not None and by_node is not None:
        flags = judge_run(store, run_id, decisions, result, by_node, at.replace(tzinfo=None))
    meta = {
        "run_id": run_id,
        "started_at": at.isoformat(timespec="seconds"),
        "finished_at": (at + dt.timedelta(minutes=20)).isoformat(timespec="seconds"),
        "inventory": "inv.yaml",
        "transport": "ssh",
        "stages": result.stages_run,
        **({"interrupted": interrupted} if interrupted else {}),
        **({"history": {"store": "x", "flags": [f.to_json() for f in flags]}} if flags else {}),
        **(extra or {}),
    }
    doc = admission_doc(decisions, nodes, meta, (c for c, _ in selected))
    return Made(doc, result, flags)


def record(store: Store, made: Made, exit_code: int = 1) -> None:
    verdicts = (v for vs in made.result.verdicts.values() for v in vs)
    write_run(store, made.doc, verdicts, flags=[f.to_json() for f in made.flags],
              exit_code=exit_code)  # fmt: skip


def run_dir(root: Path, made: Made, v1: bool = False) -> Path:
    """The run's directory as a run leaves it (admission.json, verdicts.jsonl.gz); `v1`: as a
    run before verdicts.jsonl.gz left it (verdicts.json)."""
    d = root / made.doc["run_id"]
    d.mkdir(parents=True)
    if v1:
        write_verdicts_v1(made.result, d)
    else:
        made.result.write(d)
    write_admission(d, made.doc)
    return d


def write_verdicts_v1(result: RunResult, d: Path) -> Path:
    """verdicts.json exactly as nodegate wrote it before verdicts.jsonl.gz (one document, a
    compact verdict per line; the writer of commit 6bb18ff)."""
    enc = json.JSONEncoder(separators=(",", ":")).encode
    lines = [enc(v.to_json()) for vs in result.verdicts.values() for v in vs]
    head = enc(result.to_json(verdicts=False))[:-1] + ',"verdicts":['
    path = d / "verdicts.json"
    path.write_text(head + "".join(f"\n{x}," for x in lines).rstrip(",") + "\n]}\n")
    return path
