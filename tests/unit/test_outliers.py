"""Fleet-relative outliers: median/MAD per metric and component, a second tier after floors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodegate.admission.gate import admission_doc, decide
from nodegate.compare.outliers import (
    find_outliers,
    outlier_policy,
    reject_blocking,
    summary_lines,
    validate_policies,
)
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.core.values import Status, Verdict
from nodegate.profiles import Profile, ProfileLibrary
from nodegate.stages.registry import checks_by_id

CHECK = "ib_pairs.rail.bandwidth"
RAIL3 = "mlx5_3 port 1 (rail 3)"
POLICY = {"metrics": [CHECK], "k": 4.5, "min_drop_pct": 3, "min_nodes": 5}


def profile(blocks: bool = False, **over: Any) -> Profile:
    return Profile("p", "p.yaml", {"outliers": {**POLICY, "blocks_admission": blocks, **over}})


def run(values: dict[str, float]) -> RunResult:
    r = RunResult()
    for node, bw in values.items():
        status = Status.PASS if bw >= 360 else Status.FAIL
        r.add(Verdict(CHECK, node, status, RAIL3, bw, ">= 360", "Gb/s"))
        r.add(Verdict(CHECK, node, Status.PASS, "mlx5_0 port 1 (rail 0)", 386.0, ">= 360", "Gb/s"))
    return r


def fleet(*values: float) -> dict[str, float]:
    return {f"gpu{i + 1}": v for i, v in enumerate(values)}


def flagged(values: dict[str, float], prof: Profile | None = None) -> list[tuple[str, str]]:
    found = find_outliers(run(values), dict.fromkeys(values, prof or profile()))
    assert found is not None
    return [(f.node, f.component) for f in found.flagged]


def test_a_rail_above_the_floor_but_far_below_the_fleet_is_flagged() -> None:
    values = fleet(386, 385, 387, 386, 366.7, 386)
    found = find_outliers(run(values), dict.fromkeys(values, profile()))
    assert found is not None
    assert [f.to_json() for f in found.flagged] == [
        {
            "node": "gpu5",
            "profile": "p",
            "check": CHECK,
            "component": RAIL3,
            "observed": 366.7,
            "unit": "Gb/s",
            "median": 386.0,
            "mad": 0.5,
            "limit": 374.42,
            "nodes": 6,
            "blocks_admission": False,
            "message": "366.7 Gb/s, below 374.42 Gb/s: fleet median 386 Gb/s, MAD 0.5 Gb/s "
            "over 6 nodes",
        }
    ]
    assert found.notes == []


def test_identical_numbers_and_small_differences_flag_nobody() -> None:
    assert flagged(fleet(386, 386, 386, 386, 386)) == []
    # MAD 0: 380 is below median - k x 0, but not min_drop_pct below the median.
    assert flagged(fleet(386, 386, 386, 386, 380)) == []
    assert flagged(fleet(386, 386, 386, 386, 374)) == [("gpu5", RAIL3)]


def test_wide_spread_raises_the_limit_by_k_mad() -> None:
    # Median 375, MAD 15: limit 375 - 4.5 x 15 = 307.5; 350 is 6.7 % below, within the spread.
    assert flagged(fleet(370, 380, 390, 400, 360, 350)) == []


def test_a_node_below_its_floor_is_first_tier_only_and_tiny_fleets_are_noted() -> None:
    assert flagged(fleet(386, 386, 386, 386, 231.6)) == []  # FAIL already: not a second flag
    values = fleet(386, 386, 366.7)
    found = find_outliers(run(values), dict.fromkeys(values, profile()))
    assert found is not None and found.flagged == []
    assert found.notes == [
        f"{CHECK} (p): 2 components measured on 3 nodes or fewer, below min_nodes 5: not judged"
    ]


def test_profiles_are_separate_fleets_and_no_section_means_no_tier() -> None:
    values = fleet(386, 386, 386, 386, 366.7, 300, 300, 300, 300, 300)
    other = Profile("q", "q.yaml", {"outliers": {**POLICY, "blocks_admission": False}})
    profiles = {n: profile() if i < 5 else other for i, n in enumerate(values)}
    found = find_outliers(run(values), profiles)
    assert found is not None and [(f.node, f.profile) for f in found.flagged] == [("gpu5", "p")]
    assert find_outliers(run(values), dict.fromkeys(values, Profile("b", "b.yaml", {}))) is None


def test_blocking_outliers_reject_with_their_own_reason() -> None:
    values = fleet(386, 386, 386, 386, 366.7)
    result = run(values)
    selected = [(CHECK, n) for n in values]
    decisions = decide(selected, result, dict.fromkeys(values, "p"), {})
    found = find_outliers(result, dict.fromkeys(values, profile(blocks=True)))
    assert found is not None
    reject_blocking(decisions, found)
    meta = {
        "run_id": "r",
        "started_at": "2026-11-29T00:00:00+00:00",
        "finished_at": "2026-11-29T00:00:01+00:00",
        "inventory": "i.yaml",
        "transport": "ssh",
        "stages": ["ib_pairs"],
        "outliers": found.to_json(),
    }
    doc = admission_doc(decisions, list(values), meta, [CHECK])  # validates the schema
    assert [n for n, d in doc["nodes"].items() if not d["admitted"]] == ["gpu5"]
    assert doc["nodes"]["gpu5"]["reasons"] == [
        {
            "check": "outlier.ib_pairs.rail.bandwidth",
            "status": "fail",
            "component": RAIL3,
            "observed": 366.7,
            "expected": ">= 374.42",
            "unit": "Gb/s",
            "message": "fleet outlier: 366.7 Gb/s, below 374.42 Gb/s: fleet median 386 Gb/s, "
            "MAD 0 Gb/s over 5 nodes",
            "remediation": "retest",
            "remediation_class": "retest",
            "evidence": [],
        }
    ]
    assert summary_lines(doc["outliers"]) == [
        "fleet-relative outliers (second tier, median - k x MAD): 1 flagged",
        f"  gpu5: REJECTED {CHECK} [{RAIL3}]: 366.7 Gb/s, below 374.42 Gb/s: fleet median "
        "386 Gb/s, MAD 0 Gb/s over 5 nodes",
    ]


def test_an_unknown_metric_is_a_usage_error() -> None:
    with pytest.raises(ConfigError, match=r"^profile p \(p.yaml\): outliers.metrics: ib.bw: no "):
        validate_policies([profile(metrics=["ib.bw"])], checks_by_id())
    validate_policies([profile(), Profile("b", "b.yaml", {})], checks_by_id())


WHOLE = "nccl.whole.busbw"


def jobs_run(jobs: dict[tuple[str, ...], float]) -> RunResult:
    """The whole-set check's number on each member, naming its job."""
    r = RunResult()
    for members, bw in jobs.items():
        job = ",".join(members)
        for node in members:
            r.add(Verdict(WHOLE, node, Status.PASS, "whole set", bw, ">= 300", "GB/s", job=job))
    return r


def test_a_jobs_number_is_judged_once_per_job_never_as_each_members_own() -> None:
    prof = profile(blocks=True, metrics=[WHOLE])
    whole = tuple(f"gpu{i}" for i in range(1, 7))
    # One whole-set job: six members, one number: one job, too few to compare.
    found = find_outliers(jobs_run({whole: 351.2}), dict.fromkeys(whole, prof))
    assert found is not None and found.flagged == []
    assert found.notes == [
        f"{WHOLE} (p): 1 components measured on 1 jobs or fewer, below min_nodes 5: not judged"
    ]
    # Five two-node jobs, one slow: the job is flagged, once, by its nodes; no member rejected.
    pairs = {(f"gpu{2 * i + 1}", f"gpu{2 * i + 2}"): 386.0 for i in range(5)}
    pairs[("gpu9", "gpu10")] = 350.0
    nodes = [n for p in pairs for n in p]
    found = find_outliers(jobs_run(pairs), dict.fromkeys(nodes, prof))
    assert found is not None
    assert [(f.node, f.job, f.nodes, f.blocks_admission) for f in found.flagged] == [
        ("gpu9,gpu10", True, 5, False)
    ]
    assert found.flagged[0].to_json()["message"].endswith("over 5 jobs")
    decisions = decide([(WHOLE, n) for n in nodes], jobs_run(pairs), dict.fromkeys(nodes, "p"), {})
    reject_blocking(decisions, found)
    assert all(not d.reasons for d in decisions.values())


def test_gpu_load_numbers_are_judged_per_gpu_across_nodes_by_the_shipped_rule() -> None:
    # generic-hgx-h100's rule (_fleet-compare.yaml): nvbandwidth per testcase and GPU, and
    # targeted_power's watts; each GPU's serial differs per node, the GPU's slot is the group.
    shipped = Path(__file__).resolve().parents[2] / "inventories" / "profiles"
    prof = ProfileLibrary([shipped]).get("generic-hgx-h100")
    policy = outlier_policy(prof)
    assert policy is not None
    gpu_load = [c for c in policy.metrics if c.startswith("gpu_load.")]
    assert gpu_load == [
        "gpu_load.h2d.bandwidth", "gpu_load.d2h.bandwidth", "gpu_load.d2d.bandwidth",
        "gpu_load.hbm.bandwidth", "gpu_load.dcgm.targeted_power",
    ]  # fmt: skip
    healthy = {"gpu_load.h2d.bandwidth": (55.2, "GB/s", 45), "gpu_load.d2h.bandwidth":
               (55.9, "GB/s", 45), "gpu_load.d2d.bandwidth": (370.9, "GB/s", 330),
               "gpu_load.hbm.bandwidth": (1480.0, "GB/s", 1200),
               "gpu_load.dcgm.targeted_power": (699.1, "W", 560)}  # fmt: skip
    low = {  # above every floor, below the fleet
        ("gpu4", "gpu_load.h2d.bandwidth"): 49.0,  # 11 % below: a slot trained slow-ish
        ("gpu5", "gpu_load.d2d.bandwidth"): 352.0,  # 5 % below
        ("gpu6", "gpu_load.dcgm.targeted_power"): 660.0,  # 5.6 % below
        ("gpu2", "gpu_load.hbm.bandwidth"): 1450.0,  # 2 % below: within min_drop_pct
    }
    r = RunResult()
    for i in range(1, 7):
        node = f"gpu{i}"
        for check, (value, unit, floor) in healthy.items():
            got = low.get((node, check), value)
            comp = f"GPU3 0000:5d:00.0 serial 16501{i:08d}"
            r.add(Verdict(check, node, Status.PASS, comp, got, f">= {floor}", unit))
    found = find_outliers(r, {f"gpu{i}": prof for i in range(1, 7)})
    assert found is not None and found.notes == []
    assert [(f.node, f.check, f.component, f.observed, f.limit) for f in found.flagged] == [
        ("gpu4", "gpu_load.h2d.bandwidth", "GPU3 0000:5d:00.0", 49.0, 53.544),
        ("gpu5", "gpu_load.d2d.bandwidth", "GPU3 0000:5d:00.0", 352.0, 359.773),
        ("gpu6", "gpu_load.dcgm.targeted_power", "GPU3 0000:5d:00.0", 660.0, 678.127),
    ]
