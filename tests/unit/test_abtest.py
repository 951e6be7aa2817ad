"""CI A/B mode: baselines from verdicts, the comparison and its profile rules, compare.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ClusterShell.NodeSet import NodeSet
from nodegate.compare.abmode import (
    ABMode,
    check_same_fleet,
    comparison_doc,
    summary_lines,
)
from nodegate.compare.abtest import FLEET, compare
from nodegate.compare.baseline import (
    baseline_doc,
    component_key,
    load_baseline,
    save_baseline,
)
from nodegate.compare.regression import RegressionRules, regression_rules
from nodegate.core import schemas
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult
from nodegate.core.settings import build_settings
from nodegate.core.values import Status, Verdict
from nodegate.profiles import Profile, ProfileLibrary, validate_profile
from nodegate.stages.registry import checks_by_id

REPO = Path(__file__).resolve().parents[2]
NODES = ["gpu1", "gpu2", "gpu3"]
FW, OLD_FW = "28.41.1000", "28.37.1014"
CHECKS = ["hca.firmware.version", "ib_pairs.rail.bandwidth", "reach.kernel.version"]
RAIL3 = "mlx5_3 port 1 (rail 3)"


def rules() -> dict[str, RegressionRules]:
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    return {"p": regression_rules(lib.get("generic-hgx-h100"), checks_by_id())}


def verdicts(
    node: str,
    fw: str = FW,
    bw: dict[int, float | None] | None = None,
    kernel: str = "5.15.0-105-generic",
) -> list[Verdict]:
    fw_ok = fw >= "28.39.1002"
    out = [
        Verdict("reach.kernel.version", node, Status.PASS, "kernel", kernel),
        Verdict(
            "hca.firmware.version", node, Status.PASS if fw_ok else Status.FAIL,
            "mlx5_2 (rail 2)", fw, ">= 28.39.1002", message="" if fw_ok else f"firmware {fw}",
        ),
    ]  # fmt: skip
    for rail, value in (bw or {0: 386.0, 3: 386.0}).items():
        comp = f"mlx5_{rail} port 1 (rail {rail})"
        if value is None:
            out.append(Verdict("ib_pairs.rail.bandwidth", node, Status.SKIP, "", message="not run"))
        else:
            status = Status.PASS if value >= 360 else Status.FAIL
            out.append(
                Verdict("ib_pairs.rail.bandwidth", node, status, comp, value, ">= 360", "Gb/s")
            )
    return out


def doc(
    per_node: dict[str, list[Verdict]], run_id: str = "r", checks: list[str] = CHECKS
) -> dict[str, Any]:
    result = RunResult()
    for vs in per_node.values():
        for v in vs:
            result.add(v)
    admission = {
        "run_id": run_id,
        "finished_at": "2026-11-29T00:00:01+00:00",
        "inventory": "inv.yaml",
        "transport": "ssh",
        "stages": ["reach", "hca", "ib_pairs"],
        "checks": checks,
        "nodes": {
            n: {"profile": "p", "admitted": all(v.status is Status.PASS for v in vs)}
            for n, vs in per_node.items()
        },
    }
    return baseline_doc(admission, result)


def healthy() -> dict[str, Any]:
    return doc({n: verdicts(n) for n in NODES}, "base")


def regs(cmp: Any) -> set[tuple[str, str, str, str]]:
    return {(c.scope, c.kind, c.check, c.component) for c in cmp.regressions}


def test_baseline_is_valid_and_keys_components_without_serials() -> None:
    base = healthy()
    schemas.validate("baseline", base)
    assert base["nodes"]["gpu1"]["checks"]["ib_pairs.rail.bandwidth"][RAIL3] == {
        "status": "pass",
        "observed": 386.0,
        "unit": "Gb/s",
    }
    assert component_key("GPU3 0000:5d:00.0 serial 1650124032506") == "GPU3 0000:5d:00.0"


def test_firmware_down_and_a_slower_rail_are_the_regressions() -> None:
    run = doc(
        {"gpu1": verdicts("gpu1", bw={0: 386.0, 3: 366.7}),
         "gpu2": verdicts("gpu2", fw=OLD_FW), "gpu3": verdicts("gpu3")}
    )  # fmt: skip
    cmp = compare(healthy(), run, rules())
    assert regs(cmp) == {
        ("gpu1", "metric", "ib_pairs.rail.bandwidth", RAIL3),
        ("gpu2", "admission", "admission", ""),
        ("gpu2", "status", "hca.firmware.version", ""),
        ("gpu2", "fact", "hca.firmware.version", "mlx5_2 (rail 2)"),
    }
    bw = next(c for c in cmp.regressions if c.scope == "gpu1")
    assert (bw.before, bw.after, bw.rule) == (386.0, 366.7, "may drop at most 3 %")
    assert bw.message == "386 Gb/s -> 366.7 Gb/s (-5.0 %)"
    fw = next(c for c in cmp.regressions if c.kind == "fact")
    assert (fw.before, fw.after, fw.rule) == (FW, OLD_FW, "may not go down")
    # Fleet median of rail 3 is still 386 (two of three nodes): no fleet-wide change.
    assert [c for c in cmp.changes if c.scope == FLEET] == []
    assert not cmp.only_in_baseline and not cmp.only_in_run


def test_changes_within_the_rules_are_reported_not_regressions() -> None:
    run = doc(
        {"gpu1": verdicts("gpu1", bw={0: 386.0, 3: 376.0}, kernel="6.8.0-40-generic"),
         "gpu2": verdicts("gpu2", fw="28.43.1014"), "gpu3": verdicts("gpu3")}
    )  # fmt: skip
    cmp = compare(healthy(), run, rules())
    assert not cmp.regressed
    assert {(c.scope, c.check, c.before, c.after) for c in cmp.changes} == {
        ("gpu1", "ib_pairs.rail.bandwidth", 386.0, 376.0),  # -2.6 %: within 3 %
        ("gpu1", "reach.kernel.version", "5.15.0-105-generic", "6.8.0-40-generic"),
        ("gpu2", "hca.firmware.version", FW, "28.43.1014"),  # upgraded
    }


def test_rules_by_direction_and_unchanged_versions() -> None:
    tight = RegressionRules(
        {"ib_pairs.cleanup": rules()["p"].metrics["ib_pairs.cleanup"]},
        {"reach.kernel.version": "unchanged"},
    )

    def node(strays: int, kernel: str) -> list[Verdict]:
        return [
            Verdict("ib_pairs.cleanup", "gpu1", Status.PASS, "ib_write_bw", strays),
            Verdict("reach.kernel.version", "gpu1", Status.PASS, "kernel", kernel),
        ]

    checks = ["ib_pairs.cleanup", "reach.kernel.version"]
    base = doc({"gpu1": node(1, "5.15.0-105-generic")}, checks=checks)
    fewer = compare(base, doc({"gpu1": node(0, "5.15.0-105-generic")}, checks=checks), {"p": tight})
    assert not fewer.regressed
    assert [(c.scope, c.before, c.after) for c in fewer.changes] == [("gpu1", 1, 0), (FLEET, 1, 0)]
    worse = compare(base, doc({"gpu1": node(2, "6.8.0-40-generic")}, checks=checks), {"p": tight})
    assert regs(worse) == {
        ("gpu1", "metric", "ib_pairs.cleanup", "ib_write_bw"),
        (FLEET, "metric", "ib_pairs.cleanup", "ib_write_bw"),
        ("gpu1", "fact", "reach.kernel.version", "kernel"),
    }


def test_missing_nodes_checks_and_numbers_are_reported() -> None:
    run = doc(
        {"gpu1": verdicts("gpu1", bw={0: 386.0}), "gpu4": verdicts("gpu4")},
        checks=["hca.firmware.version", "ib_pairs.rail.bandwidth", "gpu.count"],
    )
    cmp = compare(healthy(), run, rules())
    assert (cmp.only_in_baseline, cmp.only_in_run) == (["gpu2", "gpu3"], ["gpu4"])
    assert (cmp.checks_only_in_baseline, cmp.checks_only_in_run) == (
        ["reach.kernel.version"],
        ["gpu.count"],
    )
    # rail 3 vanished while the check still passes: a number under a rule is not measured.
    assert regs(cmp) == {("gpu1", "metric", "ib_pairs.rail.bandwidth", RAIL3)}
    assert cmp.regressions[0].message == "386 Gb/s -> not measured"


def test_a_skipped_check_is_one_status_regression_not_one_per_number() -> None:
    run = doc({"gpu1": verdicts("gpu1", bw={0: None}), "gpu2": verdicts("gpu2"),
               "gpu3": verdicts("gpu3")})  # fmt: skip
    cmp = compare(healthy(), run, rules())
    assert regs(cmp) == {
        ("gpu1", "admission", "admission", ""),
        ("gpu1", "status", "ib_pairs.rail.bandwidth", ""),
    }
    status = next(c for c in cmp.regressions if c.kind == "status")
    assert status.message == "ib_pairs.rail.bandwidth: pass -> skip: not run"


def test_fleet_median_regression() -> None:
    slow = {0: 370.0, 3: 386.0}
    run = doc({n: verdicts(n, bw=slow) for n in NODES})
    cmp = compare(healthy(), run, rules())
    fleet = [c for c in cmp.regressions if c.scope == FLEET]
    assert [(c.component, c.before, c.after) for c in fleet] == [
        ("mlx5_0 port 1 (rail 0)", 386.0, 370.0)
    ]
    assert fleet[0].message == "p median 386 Gb/s -> 370 Gb/s (-4.1 %) (3 -> 3 nodes)"


def test_compare_doc_validates_and_summary_folds_nodes(tmp_path: Path) -> None:
    run = doc({n: verdicts(n, bw={0: 386.0, 3: 366.7}) for n in NODES}, "new")
    cmp = compare(healthy(), run, rules())
    d = comparison_doc(cmp, "new", tmp_path)
    schemas.validate("compare", d)
    assert d["summary"] == {
        "nodes_compared": 3,
        "changes": 4,
        "regressions": 4,
        "regressed_nodes": ["gpu1", "gpu2", "gpu3"],
        "regressed_jobs": [],
    }
    assert summary_lines(cmp, tmp_path, "compare.json") == [
        f"compared with baseline base ({tmp_path}): 3 nodes, 4 changes, "
        "REGRESSED: 4 regressions on gpu[1-3]",
        f"  REGRESSION gpu[1-3]: ib_pairs.rail.bandwidth [{RAIL3}]: 386 Gb/s -> 366.7 Gb/s "
        "(-5.0 %) (may drop at most 3 %)",
        f"  REGRESSION fleet: ib_pairs.rail.bandwidth [{RAIL3}]: p median 386 Gb/s -> "
        "366.7 Gb/s (-5.0 %) (3 -> 3 nodes) (may drop at most 3 %)",
        "compare: compare.json",
    ]


def test_save_and_load_round_trip_and_bad_baselines(tmp_path: Path) -> None:
    base = healthy()
    assert save_baseline(base, tmp_path / "b") == tmp_path / "b" / "baseline.json"
    assert load_baseline(tmp_path / "b") == json.loads(json.dumps(base))
    with pytest.raises(ConfigError, match=r"--compare-to: cannot read .*/none/baseline.json"):
        load_baseline(tmp_path / "none")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "baseline.json").write_text("{")
    with pytest.raises(ConfigError, match=r"baseline.json is not JSON"):
        load_baseline(tmp_path / "x")
    (tmp_path / "x" / "baseline.json").write_text(json.dumps({**base, "schema_version": 9}))
    with pytest.raises(
        ConfigError, match=r"is not a nodegate baseline \(schema_version 1\): schema_version: 1 "
    ):
        load_baseline(tmp_path / "x")


def test_another_fleet_or_profile_is_a_usage_error(tmp_path: Path) -> None:
    base = healthy()
    check_same_fleet(base, {"gpu1": "p", "gpu9": "p"}, tmp_path)  # a subset: fine
    with pytest.raises(
        ConfigError,
        match=r"the baseline's nodes gpu\[1-3\] share none with this run's node\[1-2\] "
        r"\(another fleet\)$",
    ):
        check_same_fleet(base, {"node1": "p", "node2": "p"}, tmp_path)
    with pytest.raises(
        ConfigError,
        match=r"another profile: gpu1 is p in the baseline, q in this run \(and 1 more nodes\)$",
    ):
        check_same_fleet(base, {"gpu1": "q", "gpu2": "q", "gpu3": "p"}, tmp_path)


def test_regression_rules_come_from_the_profile() -> None:
    bare = Profile("bare", "bare.yaml", {"name": "bare"})
    with pytest.raises(ConfigError, match=r"profile bare \(bare.yaml\) has no regression: section"):
        regression_rules(bare, checks_by_id())
    typo = Profile(
        "t",
        "t.yaml",
        {"regression": {"metrics": {}, "versions": {"hca.firmware.versoin": "unchanged"}}},
    )
    with pytest.raises(ConfigError, match=r"versions.hca.firmware.versoin: no such check"):
        regression_rules(typo, checks_by_id())
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    data = dict(lib.get("generic-hgx-h100").data)
    both = {"better": "higher", "max_change": 0, "max_change_pct": 1}
    data["regression"] = {"metrics": {"gpu.count": both}, "versions": {}}
    with pytest.raises(ConfigError, match=r"metrics.gpu.count: .* is not valid under any"):
        validate_profile(data, "x.yaml")


def test_baseline_options_are_checked_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")

    def settings(**cli: str) -> Any:
        return build_settings(cli, {}, known_transports={"ssh"}, rootpath=tmp_path)

    with pytest.raises(ConfigError, match=r"^--compare-to: got '.*/nope', expected an existing"):
        settings(nodegate_compare_to=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"^--save-baseline: got '.*/file', expected a directory"):
        settings(nodegate_save_baseline=str(tmp_path / "file"))
    s = settings(nodegate_save_baseline=str(tmp_path / "new"), nodegate_compare_to=str(tmp_path))
    assert (s.save_baseline, s.compare_to) == (tmp_path / "new", tmp_path)


class _Session:
    def __init__(self, exitstatus: int) -> None:
        self.exitstatus = exitstatus


def _finished_run(tmp_path: Path, per_node: dict[str, list[Verdict]], **extra: Any) -> Path:
    """A run directory as the gate leaves it: admission.json and verdicts.json."""
    base = doc(per_node, "new")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    result = RunResult()
    for vs in per_node.values():
        for v in vs:
            result.add(v)
    result.write(run_dir)
    admission = {k: base[k] for k in ("run_id", "finished_at", "inventory", "transport")}
    admission |= {"stages": base["stages"], "checks": base["checks"], **extra}
    admission["nodes"] = {n: {"profile": "p", "admitted": d["admitted"]}
                          for n, d in base["nodes"].items()}  # fmt: skip
    (run_dir / "admission.json").write_text(json.dumps(admission))
    return run_dir


@pytest.mark.parametrize(
    ("before", "after"), [(0, 7), (1, 7), (6, 7), (2, 2), (3, 3), (4, 4), (5, 5), (8, 8)]
)
def test_regressed_exit_code_wins_over_admitted_rejected_and_not_qualified(
    tmp_path: Path, before: int, after: int
) -> None:
    slow = {n: verdicts(n, bw={0: 386.0, 3: 300.0}) for n in NODES}
    run_dir = _finished_run(tmp_path, slow)
    ab = ABMode(None, tmp_path / "b", healthy(), rules())
    ab.session = _Session(before)  # type: ignore[assignment]
    ab.pytest_nodegate_admission(json.loads((run_dir / "admission.json").read_text()), run_dir)
    assert ab.session.exitstatus == after and ab.regressed
    assert json.loads((run_dir / "compare.json").read_text())["regressed"] is True


def test_interrupted_or_incomplete_runs_save_no_baseline(tmp_path: Path) -> None:
    run_dir = _finished_run(tmp_path, {n: verdicts(n) for n in NODES}, complete=False)
    admission = json.loads((run_dir / "admission.json").read_text())
    ab = ABMode(tmp_path / "b", None, None, {})
    ab.pytest_nodegate_admission({**admission, "interrupted": "hca"}, run_dir)
    assert ab.lines == ["interrupted run: no comparison made, no baseline saved"]
    ab.lines = []
    ab.pytest_nodegate_admission(admission, run_dir)
    assert ab.lines == [
        f"baseline NOT saved to {tmp_path / 'b'}: the run did not cover every check its "
        "profiles need (a diagnostic run)"
    ]
    assert not (tmp_path / "b").exists()
    (run_dir / "admission.json").write_text(json.dumps({**admission, "complete": True}))
    ab.lines = []
    ab.pytest_nodegate_admission(admission, run_dir)
    assert ab.lines == [f"baseline saved: {tmp_path / 'b' / 'baseline.json'}"]
    assert load_baseline(tmp_path / "b")["run_id"] == "new"


WHOLE, LOCALIZED, SET = "nccl.whole.busbw", "nccl.localized", "whole set"
NCCL = [*CHECKS, WHOLE, LOCALIZED]
FOUR = ["gpu1", "gpu2", "gpu3", "gpu4"]


def nccl(
    node: str, busbw: float, job: str = "gpu[1-4]", ok: bool = True, blamed: bool = False
) -> list[Verdict]:
    """The whole-set job's number on a member (`job`: the job it is of) and localization."""
    st = Status.PASS if ok else Status.FAIL
    loc = Status.FAIL if blamed else Status.PASS
    return [
        Verdict(WHOLE, node, st, SET, busbw, ">= 300", "GB/s", job=job),
        Verdict(LOCALIZED, node, loc, "node", message="fails with two good partners" * blamed),
    ]


def whole_set(busbw: dict[str, float], slow_rail: str | None = None, **kw: Any) -> dict[str, Any]:
    per_node = {
        n: verdicts(n, bw={0: 386.0, 3: 366.7 if n == slow_rail else 386.0}) + nccl(n, busbw[n])
        for n in FOUR
    }
    return doc(per_node, checks=NCCL, **kw)


def test_a_slow_rail_lowering_the_whole_set_busbw_blames_the_job_not_every_member() -> None:
    base = whole_set(dict.fromkeys(FOUR, 369.68), run_id="base")
    assert base["nodes"]["gpu2"]["checks"][WHOLE][SET]["job"] == "gpu[1-4]"
    schemas.validate("baseline", base)
    # gpu3's rail 3 is 5 % slower (above its floor): the whole-set job, every member's number,
    # is 5 % slower too.
    cmp = compare(base, whole_set(dict.fromkeys(FOUR, 351.21), slow_rail="gpu3"), rules())
    assert regs(cmp) == {("gpu3", "metric", "ib_pairs.rail.bandwidth", RAIL3)}
    assert [c for c in cmp.changes if c.check == WHOLE] == []  # not per node, nor a median
    (job,) = cmp.jobs
    assert (job.name, job.check, job.component, job.before, job.after, job.regression) == (
        "gpu[1-4]", WHOLE, SET, 369.68, 351.21, True,
    )  # fmt: skip
    assert (job.message, job.rule) == (
        "369.68 GB/s -> 351.21 GB/s (-5.0 %)",
        "may drop at most 3 %",
    )
    d = comparison_doc(cmp, "new", Path("b"))
    assert d["regressed"] is True
    assert (d["summary"]["regressed_nodes"], d["summary"]["regressed_jobs"]) == (
        ["gpu3"],
        ["gpu[1-4]"],
    )
    assert d["jobs"] == [job.to_json()]
    lines = summary_lines(cmp, Path("b"), "compare.json")
    assert lines[0].endswith("2 changes, REGRESSED: 2 regressions on gpu3 (1 of jobs)")
    assert lines[1] == (
        f"  REGRESSION job gpu[1-4]: {WHOLE} [{SET}]: 369.68 GB/s -> 351.21 GB/s (-5.0 %) "
        "(may drop at most 3 %)"
    )


def test_a_failed_whole_set_job_blames_the_job_and_the_node_localization_named() -> None:
    base = whole_set(dict.fromkeys(FOUR, 369.68), run_id="base")
    per_node = {n: verdicts(n) for n in FOUR}
    # gpu3 named by localization; the others cleared by pairs, their numbers the pairs' own.
    per_node["gpu3"] += nccl("gpu3", 200.0, ok=False, blamed=True)
    per_node["gpu1"] += nccl("gpu1", 380.0, job="gpu[1-2]")
    per_node["gpu2"] += nccl("gpu2", 380.0, job="gpu[1-2]")
    per_node["gpu4"] += nccl("gpu4", 381.0, job="gpu[3-4]")
    cmp = compare(base, doc(per_node, checks=NCCL), rules())
    assert regs(cmp) == {
        ("gpu3", "admission", "admission", ""),
        ("gpu3", "status", WHOLE, ""),
        ("gpu3", "status", LOCALIZED, ""),
    }
    assert {(j.nodes_before, j.nodes_after, j.before, j.after, j.regression) for j in cmp.jobs} == {
        ("gpu[1-4]", "gpu[1-4]", 369.68, 200.0, True),  # the whole-set job, compared once
        (None, "gpu[1-2]", None, 380.0, False),  # localization's jobs: new, not judged
        (None, "gpu[3-4]", None, 381.0, False),
    }
    d = comparison_doc(cmp, "new", Path("b"))
    assert (d["summary"]["regressed_nodes"], d["summary"]["regressed_jobs"]) == (
        ["gpu3"],
        ["gpu[1-4]"],
    )


def test_a_job_matches_the_baseline_job_sharing_most_nodes() -> None:
    base = whole_set(dict.fromkeys(FOUR, 369.68), run_id="base")
    # gpu4 dropped out of this run's whole set (and of the run): still the whole-set job.
    per_node = {n: verdicts(n) + nccl(n, 369.68, job="gpu[1-3]") for n in FOUR[:3]}
    cmp = compare(base, doc(per_node, checks=NCCL), rules())
    assert not cmp.regressed
    (job,) = cmp.jobs
    assert (job.nodes_before, job.nodes_after, job.regression) == ("gpu[1-4]", "gpu[1-3]", False)
    assert summary_lines(cmp, Path("b"), "c.json")[1] == (
        f"  changed job gpu[1-3]: {WHOLE} [{SET}]: 369.68 GB/s, the same number "
        "(nodes gpu[1-4] -> gpu[1-3]) (may drop at most 3 %)"
    )


def test_gpu_load_numbers_regress_by_the_profiles_rules() -> None:
    gpu3 = "GPU3 0000:5d:00.0 serial 1650124032506"
    per = {"gpu_load.h2d.bandwidth": (55.1, "GB/s"), "gpu_load.telemetry.temperature": (66.0, "C")}

    def run(h2d: float, temp: float, run_id: str) -> dict[str, Any]:
        vs = [
            Verdict("gpu_load.h2d.bandwidth", "gpu1", Status.PASS, gpu3, h2d, ">= 45", "GB/s"),
            Verdict(
                "gpu_load.telemetry.temperature", "gpu1", Status.PASS, gpu3, temp, "<= 87", "C"
            ),
        ]
        return doc({"gpu1": vs}, run_id, checks=sorted(per))

    cmp = compare(run(55.1, 66.0, "base"), run(52.9, 72.0, "new"), rules())
    # one node: its numbers are the fleet's median too
    assert regs(cmp) == {
        (scope, "metric", check, "GPU3 0000:5d:00.0") for scope in ("gpu1", FLEET) for check in per
    }
    assert not regs(compare(run(55.1, 66.0, "base"), run(54.0, 70.0, "ok"), rules()))


def test_the_matrix_curve_is_compared_per_point_each_group_once() -> None:
    """nccl.matrix: each (collective, scale) point's groups against the baseline's group at
    that point sharing most nodes, under _fleet-compare's 5 %; a group's number is its
    members' alike, so it is one change, not one per node."""
    matrix = "nccl.matrix"

    def curve(points: dict[tuple[str, str], float], run_id: str = "r") -> dict[str, Any]:
        per_node: dict[str, list[Verdict]] = {n: [] for n in FOUR}
        for (comp, job), bw in points.items():
            for n in NodeSet(job):
                per_node[n].append(Verdict(matrix, n, Status.PASS, comp, bw, ">= 200", "GB/s",
                                           job=job))  # fmt: skip
        return doc(per_node, run_id, checks=[matrix])

    base = curve({("alltoall@leaf", "gpu[1-2]"): 265.0, ("alltoall@leaf", "gpu[3-4]"): 265.0,
                  ("alltoall@whole", "gpu[1-4]"): 250.0, ("all_reduce@whole", "gpu[1-4]"): 360.0},
                 "base")  # fmt: skip
    # alltoall over the whole set 10 % down (the spine tier), all_reduce 2 % (within the rule)
    run = curve({("alltoall@leaf", "gpu[1-2]"): 265.0, ("alltoall@leaf", "gpu[3-4]"): 265.0,
                 ("alltoall@whole", "gpu[1-4]"): 225.0,
                 ("all_reduce@whole", "gpu[1-4]"): 352.8})  # fmt: skip
    cmp = compare(base, run, rules())
    assert [c for c in cmp.changes if c.check == matrix] == []  # not per node, nor a median
    got = {(j.component, j.name, j.before, j.after, j.regression, j.rule) for j in cmp.jobs}
    assert got == {
        ("all_reduce@whole", "gpu[1-4]", 360.0, 352.8, False, "may drop at most 5 %"),
        ("alltoall@whole", "gpu[1-4]", 250.0, 225.0, True, "may drop at most 5 %"),
    }
    assert comparison_doc(cmp, "new", Path("b"))["summary"]["regressed_jobs"] == ["gpu[1-4]"]
