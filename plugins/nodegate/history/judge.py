"""The rules applied to one run from its nodes' past in the store (what the session calls
before admission.json is written)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from nodegate.admission.gate import NodeDecision
from nodegate.core.results import RunResult
from nodegate.history import queries, rules
from nodegate.history.store import Store


def judge_run(
    store: Store,
    run_id: str,
    decisions: Mapping[str, NodeDecision],
    result: RunResult,
    by_node: Mapping[str, rules.HistoryRules],
    now: dt.datetime | None = None,
) -> list[rules.Flag]:
    """This run's flags from each node's recorded past, applied to `decisions`."""
    on = {n: r for n, r in by_node.items() if r.enabled and n in decisions}
    if not on:
        return []
    metrics = {m for r in on.values() if r.drift.enabled for m in r.drift.metrics}
    with store.reading() as conn:
        past = queries.node_history(conn, on, 0)
        series = queries.metric_history(conn, on, metrics, complete_only=True)
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    flags = rules.judge(run_id, decisions, result, on, past, series, now)
    rules.apply(decisions, flags)
    return flags
