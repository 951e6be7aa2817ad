"""The collective matrix: its profile section (validated, typed), its rounds (pure planner),
its judge (floors and the curve), its jobs' arguments."""

from __future__ import annotations

from typing import Any

import pytest
from nodegate.core.errors import ConfigError
from nodegate.framework.active.rounds import Outcome, RoundId
from nodegate.stages.nccl.launch import job_env, perf_argv
from nodegate.stages.nccl.matrix import GroupResult, curve, describe, findings
from nodegate.stages.nccl.plan import NcclJob, NcclLocalizer, estimate_s, matrix_groups, matrix_plan
from nodegate.stages.nccl.profile import Matrix, Scale

from tests.unit.test_nccl_profile import REPO

NODES = [f"gpu{i:03d}" for i in range(1, 17)]
LEAF = {n: f"leaf{i // 4 + 1:02d}" for i, n in enumerate(NODES)}  # 4 leaves of 4


def matrix_doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "collectives": ["all_reduce", "alltoall"],
        "scales": {
            "whole": {"message_bytes": 1 << 30, "iterations": 5},
            "two_node_ring": {"message_bytes": 1 << 30, "iterations": 5},
            "leaf": {"message_bytes": 1 << 30, "iterations": 5},
            "leaves": {"message_bytes": 1 << 30, "iterations": 5, "leaves": 2},
        },
        "line_rate": {"value": 400, "unit": "GB/s"},
        "max_drop_pct": 20,
        "floors": {
            c: {s: {"min": m, "unit": "GB/s"} for s in ("two_node_ring", "leaf", "leaves", "whole")}
            for c, m in (("all_reduce", 340), ("alltoall", 200))
        },
    }
    doc.update(over)
    return doc


def test_scales_in_curve_order_and_groups_disjoint_per_scale() -> None:
    m = Matrix.of(matrix_doc())
    assert [s.name for s in m.scales] == ["two_node_ring", "leaf", "leaves", "whole"]
    groups = {s.name: matrix_groups(s, NODES, LEAF) for s in m.scales}
    assert groups["two_node_ring"][:2] == [("gpu001", "gpu002"), ("gpu003", "gpu004")]
    assert len(groups["two_node_ring"]) == 8
    assert groups["leaf"] == [tuple(NODES[i : i + 4]) for i in range(0, 16, 4)]
    assert groups["leaves"] == [tuple(NODES[:8]), tuple(NODES[8:])]
    assert groups["whole"] == [tuple(NODES)]
    for gs in groups.values():
        flat = [n for g in gs for n in g]
        assert len(flat) == len(set(flat))


def test_a_leaf_of_one_has_no_pair_and_a_short_last_chunk_joins_the_one_before() -> None:
    nodes = NODES[:13]  # leaf04 holds gpu013 only
    assert matrix_groups(Scale("two_node_ring", 8, 1), nodes, LEAF)[-1] == ("gpu011", "gpu012")
    three = matrix_groups(Scale("leaves", 8, 1, leaves=3), nodes, LEAF)
    assert three == [tuple(nodes)]  # leaves 1-3 and the lone leaf04: one group
    assert matrix_groups(Scale("leaf", 8, 1), ["gpu001"], LEAF) == []


def test_plan_rounds_and_its_estimate() -> None:
    m = Matrix.of(matrix_doc())
    rounds = matrix_plan(m, NODES, LEAF)
    assert [(r[0].collective, r[0].scale, len(r)) for r in rounds] == [
        ("all_reduce", "two_node_ring", 8), ("all_reduce", "leaf", 4),
        ("all_reduce", "leaves", 2), ("all_reduce", "whole", 1),
        ("alltoall", "two_node_ring", 8), ("alltoall", "leaf", 4),
        ("alltoall", "leaves", 2), ("alltoall", "whole", 1),
    ]  # fmt: skip
    # 8 rounds x 10 s start-up, 5 x 1 GiB at 340 GB/s (4 rounds) and at 200 GB/s (4 rounds)
    assert estimate_s(m, NODES, LEAF) == round(
        80 + 4 * 5 * 2**30 / 340e9 + 4 * 5 * 2**30 / 200e9, 1
    )


def test_profile_errors_name_the_key() -> None:
    floors = matrix_doc()["floors"]
    del floors["alltoall"]["leaves"]
    with pytest.raises(ConfigError, match=r"^nccl\.matrix\.floors\.alltoall\.leaves: no floor"):
        Matrix.of(matrix_doc(floors=floors))


def test_matrix_floors_need_their_sources(tmp_path) -> None:
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.nccl.profile import nccl_profile

    (tmp_path / "x.yaml").write_text(
        "name: x\ndescription: x\nextends: generic-hgx-h100\n"
        "nccl: {matrix: {collectives: [all_gather], "
        "floors: {all_gather: {leaf: {min: 100, unit: GB/s}, whole: {min: 90, unit: GB/s}}}}}\n"
    )
    lib = ProfileLibrary([tmp_path, REPO / "inventories" / "profiles"])
    with pytest.raises(ConfigError, match=r"nccl\.matrix\.floors\.all_gather\.leaf has no source"):
        nccl_profile(lib.get("x"))
    assert nccl_profile(lib.get("generic-hgx-h100")).matrix is not None


def result(c: str, scale: str, nodes: list[str], bw: float | None) -> GroupResult:
    return GroupResult(c, scale, tuple(nodes), bw)


def test_judge_floor_and_the_curve_name_the_tier() -> None:
    m = Matrix.of(matrix_doc())
    rs = [
        result("all_reduce", "leaf", NODES[:4], 360.0),
        result("all_reduce", "leaf", NODES[4:8], 358.0),
        result("all_reduce", "leaves", NODES[:8], 345.0),  # above the floor, 4 % down: fine
        result("alltoall", "leaf", NODES[:4], 277.0),
        result("alltoall", "leaves", NODES[:8], 210.0),  # above its floor, 24 % down
        result("alltoall", "leaves", NODES[8:], 276.0),
        result("alltoall", "whole", NODES, 139.0),  # below the floor and 50 % down
        result("all_reduce", "whole", NODES, None),  # nothing measured: no finding (an ERROR)
    ]
    got = findings(m, rs)
    assert [(f.group.collective, f.group.scale, f.group.nodes[0], f.reason) for f in got] == [
        ("alltoall", "leaves", "gpu001", "24 % below leaf (277 GB/s; at most 20 % allowed)"),
        ("alltoall", "whole", "gpu001",
         "139 GB/s below the floor 200; 50 % below leaves (276 GB/s; at most 20 % allowed)"),
    ]  # fmt: skip
    assert describe(got[0], LEAF, m.line_rate) == (
        "alltoall at leaves (8 nodes over leaf01, leaf02): 210 GB/s (52 % of line rate): 24 % "
        "below leaf (277 GB/s; at most 20 % allowed); the break is at the leaf uplinks and "
        "spines between these leaves"
    )
    pts = curve(m, rs)["alltoall"]
    assert [(p.scale, p.nodes, p.worst, p.best, p.efficiency) for p in pts] == [
        ("leaf", 4, 277.0, 277.0, 0.693), ("leaves", 8, 210.0, 276.0, 0.525),
        ("whole", 16, 139.0, 139.0, 0.347),
    ]  # fmt: skip


def test_matrix_jobs_run_their_collective_at_their_scale() -> None:
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.nccl.profile import nccl_profile

    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    job = NcclJob("matrix", ("gpu001", "gpu002"), collective="alltoall", scale="leaf")
    assert perf_argv(prof, job) == [
        "alltoall_perf", "-b", "1073741824", "-e", "1073741824", "-f", "2", "-g", "1", "-c", "1",
        "-n", "5", "-w", "5",
    ]  # fmt: skip
    ring = NcclJob("matrix", ("gpu001", "gpu002"), collective="all_reduce", scale="two_node_ring")
    assert job_env(prof, {}, "a:1", ring)["NCCL_ALGO"] == "Ring"
    assert "NCCL_ALGO" not in job_env(prof, {}, "a:1", job)


def test_localizer_runs_the_matrix_after_the_whole_set_on_nodes_still_in() -> None:
    m = Matrix.of(matrix_doc(collectives=["alltoall"], scales={
        "leaf": {"message_bytes": 8, "iterations": 1}}))  # fmt: skip
    nodes = NODES[:8]
    loc = NcclLocalizer(nodes, LEAF, matrix=m)
    for j in loc.first_rounds()[0].tests:
        loc.add(Outcome(j, RoundId(1), True, 400.0))
    whole = loc.next_round()
    assert whole is not None and whole.tests[0].phase == "whole"
    loc.add(Outcome(whole.tests[0], RoundId(2), True, 360.0))
    rnd = loc.next_round()
    assert rnd is not None and rnd.id == RoundId(3)
    assert [j.key for j in rnd.tests] == [
        "matrix-alltoall-leaf-gpu001-4", "matrix-alltoall-leaf-gpu005-4"]  # fmt: skip
    for j in rnd.tests:
        loc.add(Outcome(j, RoundId(3), True, 270.0))
    assert loc.next_round() is None
    assert loc.rounds_used() == 0  # the matrix is no localization round
