"""The history rules on both backends, each run judged by its nodes' recorded past as the
session does (`judge_run`), then recorded: a node rejected three times trips the repeat
offender rule (its remediation escalates; it needs clean runs to come back), a metric drifting
down while above its floor is flagged on the run where it crosses the rule, and a node
admitted and rejected in turn is flapping."""

from __future__ import annotations

import datetime as dt

import pytest
from nodegate.core import schemas
from nodegate.history.rules import Drift, Flapping, HistoryRules, RepeatOffender, flag_lines
from nodegate.history.store import open_store

from tests.history_runs import BW, RAIL3, T0, bw, make_run, record, ssh

NODES = ["gpu001", "gpu002", "gpu003", "gpu004"]
REPEAT = HistoryRules(repeat_offender=RepeatOffender(
    True, rejections=3, days=7, escalate={"retest": "rma"}, clean_runs=2))  # fmt: skip


def day(i: int) -> dt.datetime:
    return T0 + dt.timedelta(days=i)


def run_with(store, run_id, at, rules, *, down=(), rail3=None):
    """One run: reach.ssh per node (`down` unreachable), rail 3's bandwidth per node."""
    rail3 = rail3 or {}
    vs = [ssh(n, n not in down) for n in NODES]
    vs += [bw(n, rail3.get(n, 392.0)) for n in NODES if n not in down]
    made = make_run(run_id, vs, NODES, at, store=store, by_node={n: rules for n in NODES})
    record(store, made)
    return made


def test_a_node_rejected_three_times_in_the_window_is_a_repeat_offender(history_url) -> None:
    store = open_store(history_url)
    r1 = run_with(store, "r1", day(0), REPEAT, down={"gpu002"})
    r2 = run_with(store, "r2", day(1), REPEAT, down={"gpu002"})
    assert r1.flags == [] and r2.flags == []
    assert r2.doc["remediation"] == {"retest": ["gpu002"]}
    r3 = run_with(store, "r3", day(2), REPEAT, down={"gpu002"})
    (flag,) = r3.flags
    assert flag.to_json() == {
        "node": "gpu002", "rule": "repeat_offender", "check": None, "component": None,
        "blocks_admission": True, "based_on": ["r1", "r2", "r3"], "escalated": {"retest": "rma"},
        "message": "rejected 3 times in 7 days (rule: 3); remediation escalated: retest -> rma",
    }  # fmt: skip
    assert r3.doc["remediation"] == {"rma": ["gpu002"]}  # escalated in admission.json
    schemas.validate("admission", r3.doc)
    assert flag_lines(r3.doc["history"]) == [
        "REPEAT OFFENDER gpu002: rejected 3 times in 7 days (rule: 3); remediation escalated: "
        "retest -> rma (runs r1, r2, r3)"
    ]
    # Repaired: it passes everything, but comes back only after two clean complete runs.
    r4 = run_with(store, "r4", day(3), REPEAT)
    assert r4.doc["nodes"]["gpu002"]["state"] == "rejected"
    (reason,) = r4.doc["nodes"]["gpu002"]["reasons"]
    assert (reason["check"], reason["message"]) == (
        "history.repeat_offender",
        "repeat offender (rejected 3 times in 7 days up to run r3): admitted only after 2 "
        "consecutive clean complete runs, this is 1 (runs r1, r2, r3, r4)",
    )
    r5 = run_with(store, "r5", day(4), REPEAT)
    assert r5.flags == [] and r5.doc["nodes"]["gpu002"]["state"] == "admitted"
    assert [r4.doc["summary"]["admitted"], r5.doc["summary"]["admitted"]] == [3, 4]
    store.close()


def test_rejections_outside_the_window_do_not_count(history_url) -> None:
    store = open_store(history_url)
    for i, d in enumerate((0, 10, 20)):  # every 10 days: never 3 within 7
        made = run_with(store, f"w{i}", day(d), REPEAT, down={"gpu003"})
        assert made.flags == []
    store.close()


DRIFT = HistoryRules(drift=Drift(True, (BW,), drop_pct=5, runs=3, min_runs=3))


@pytest.mark.parametrize("blocks", [False, True])
def test_a_drifting_metric_is_flagged_on_the_run_where_it_crosses_the_rule(
    history_url, blocks: bool
) -> None:
    store = open_store(history_url)
    rules = HistoryRules(drift=Drift(True, (BW,), drop_pct=5, runs=3, min_runs=3,
                                     blocks_admission=blocks))  # fmt: skip
    slide = [392.0, 392.0, 391.0, 390.0, 371.0]  # above the 360 floor every time
    flagged, states = {}, {}
    for i, gbps in enumerate(slide):
        made = run_with(store, f"d{i}", day(i), rules, rail3={"gpu004": gbps})
        flagged[f"d{i}"] = [f.to_json() for f in made.flags]
        states[f"d{i}"] = made.doc["nodes"]["gpu004"]["state"]
    # d3: 390 against the median of d0-d2 (392): 0.5 %; d4: 371 against 391 (d1-d3): 5.1 %.
    assert {k: v for k, v in flagged.items() if v} == {"d4": [{
        "node": "gpu004", "rule": "drift", "check": BW, "component": RAIL3,
        "blocks_admission": blocks, "based_on": ["d1", "d2", "d3", "d4"], "escalated": {},
        "message": "371 Gb/s is 5.1 % below its own median 391 Gb/s over 3 complete runs "
                   "(rule: 5 %)",
    }]}  # fmt: skip
    assert states == {**{f"d{i}": "admitted" for i in range(4)},
                      "d4": "rejected" if blocks else "admitted"}  # fmt: skip
    store.close()


def test_a_node_admitted_and_rejected_in_turn_is_flapping(history_url) -> None:
    store = open_store(history_url)
    rules = HistoryRules(flapping=Flapping(True, runs=5, min_flips=3))
    seen = []
    for i in range(5):
        made = run_with(store, f"f{i}", day(i), rules, down={"gpu001"} if i % 2 else set())
        seen.append([(f.node, f.message, f.based_on) for f in made.flags])
    assert seen[:3] == [[], [], []]
    assert seen[3:] == [
        [("gpu001", "admitted and rejected in turn: 3 changes over its last 4 runs (rule: 3)",
          ("f0", "f1", "f2", "f3"))],
        [("gpu001", "admitted and rejected in turn: 4 changes over its last 5 runs (rule: 3)",
          ("f0", "f1", "f2", "f3", "f4"))],
    ]  # fmt: skip
    store.close()
