"""Active rounds on a simulated fleet run under the fleet's own channel limit (its inventory's
`settings.max_active`), which --max-active overrides; the plan says what each round used."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

STAGES = ("-m", "reach or ib_pairs")


def concurrency(run) -> list[dict]:
    plan = json.loads((run.run_dir / "ib_pairs" / "plan-generic-hgx-h100.json").read_text())
    return [r["concurrency"] for r in plan["rounds"]]


def without_wall(c: dict) -> dict:
    return {**c, "used": {k: v for k, v in c["used"].items() if k != "wall_s"}}


def test_the_fleets_limit_is_honoured_and_the_command_line_overrides_it(sim_fleet):
    # 4 healthy nodes, 8 rails: round 1 is 16 tests on disjoint (node, rail)s, 2 channels each.
    fleet = sim_fleet(base_model(4, settings={"max_active": 6}))
    run = fleet.run(*STAGES)
    assert run.rc == 6, run.stdout  # nobody rejected; -m: not qualified
    (first,) = concurrency(run)
    assert first["used"]["wall_s"] > 0
    assert without_wall(first) == {
        "max_active": 6,
        "channels": 32,
        "at_start": {"tests": 3, "channels": 6},
        "used": {"tests": 3, "channels": 6},
    }

    run = fleet.run(*STAGES, "--max-active", "64")
    assert run.rc == 6, run.stdout  # nobody rejected; -m: not qualified
    (first,) = concurrency(run)
    assert without_wall(first) == {
        "max_active": 64,
        "channels": 32,
        "at_start": {"tests": 16, "channels": 32},
        "used": {"tests": 16, "channels": 32},
    }
