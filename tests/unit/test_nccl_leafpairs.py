"""The fabric step of nccl localization: probes over sets of leaves name the slow leaf pair,
in the rounds node localization runs anyway; groups never cross a spine."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from nodegate.stages.nccl import leafpairs
from nodegate.stages.nccl.plan import NcclJob, leaf_groups

from tests.nccl_playback import play


def fleet(n: int, leaves: int) -> tuple[list[str], dict[str, str]]:
    names = [f"gpu{i:04d}" for i in range(1, n + 1)]
    return names, {x: f"leaf{i * leaves // n + 1:02d}" for i, x in enumerate(names)}


def faults(bad: Sequence[str], pair: Sequence[str], leaf: dict[str, str]):
    """A job over several nodes fails when it holds a bad node or nodes of both leaves."""

    def judge(job: NcclJob) -> bool:
        if job.phase == "single":
            return True
        crosses = bool(pair) and set(pair) <= {leaf[x] for x in job.nodes}
        return not set(job.nodes) & set(bad) and not crosses

    return judge


def test_narrow_keeps_the_pairs_inside_a_failed_job_drops_those_of_a_passed_one():
    cands = leafpairs.all_pairs(["a", "b", "c", "d"])
    assert len(cands) == 6
    assert leafpairs.narrow(cands, {"a", "b", "c"}, failed=True) == {
        ("a", "b"), ("a", "c"), ("b", "c")}  # fmt: skip
    assert leafpairs.narrow(cands, {"a", "b", "c"}, failed=False) == {
        ("a", "d"), ("b", "d"), ("c", "d")}  # fmt: skip


@pytest.mark.parametrize("cap", [1, 2, 8])
def test_a_design_keeps_each_leaf_within_its_free_nodes_and_covers_every_pair(cap):
    leaves = [f"leaf{i:02d}" for i in range(1, 33)]
    cands = leafpairs.all_pairs(leaves)
    probes = leafpairs.design(cands, dict.fromkeys(leaves, cap), cover=True)
    for lf in leaves:
        assert sum(lf in p for p in probes) <= cap, lf
    assert all(len(p) >= 2 for p in probes)
    held = {(a, b) for a, b in cands if any(a in p and b in p for p in probes)}
    assert held == cands  # the first round shows whether any pair is slow
    labels = {lf: sum(1 << i for i, p in enumerate(probes) if lf in p) for lf in leaves}
    sq, uncovered = leafpairs.score(cands, labels)
    assert uncovered == 0
    if cap == 1:  # one node a leaf: covering every pair takes one probe over every leaf
        assert probes == [tuple(leaves)]
    else:  # the classes' sizes: ~100 pairs or fewer in the largest with two nodes a leaf
        assert sq < len(cands) ** 2 // 4


def test_few_candidates_and_enough_nodes_one_probe_per_pair():
    cands = {("leaf01", "leaf02"), ("leaf01", "leaf03"), ("leaf02", "leaf03")}
    probes = leafpairs.design(cands, {"leaf01": 2, "leaf02": 2, "leaf03": 2})
    # two probes tell the three apart (the pair neither holds: both pass)
    assert probes == [("leaf01", "leaf03"), ("leaf01", "leaf02")]
    nodes = leafpairs.assign(probes, {"leaf01": ["a1", "a2"], "leaf02": ["b1", "b2"],
                                      "leaf03": ["c1", "c2"]})  # fmt: skip
    flat = [x for p in nodes for x in p]
    assert len(nodes) == 2 and len(flat) == len(set(flat))


def test_groups_stay_inside_their_leaf():
    names, leaf = fleet(64, 8)
    groups = leaf_groups(names, leaf, 0, 4)
    assert len(groups) == 16 and all(len({leaf[x] for x in g}) == 1 for g in groups)
    assert sorted(x for g in groups for x in g) == names
    # leaves of one node: their nodes form groups across leaves
    lone = {x: f"l{i}" for i, x in enumerate(names[:4])}
    assert leaf_groups(names[:4], lone, 0, 2) == [["gpu0001", "gpu0003"], ["gpu0002", "gpu0004"]]


@pytest.mark.parametrize(
    ("n", "bad", "pair"),
    [
        (64, ["gpu0005"], ("leaf20", "leaf26")),
        (64, ["gpu0013", "gpu0050", "gpu0061"], ("leaf09", "leaf19")),
        (256, ["gpu0001", "gpu0100"], ("leaf01", "leaf02")),
        (1024, ["gpu0002", "gpu0512", "gpu1000"], ("leaf14", "leaf31")),
        (1024, ["gpu0003"], ("leaf01", "leaf32")),  # the pair on the bad node's leaf
    ],
)
def test_bad_nodes_and_a_slow_leaf_pair_both_named_in_five_rounds(n, bad, pair):
    names, leaf = fleet(n, 32)
    played = play(names, faults(bad, pair, leaf), leaf)
    loc = played.localizer.loc
    assert played.named == tuple(sorted(bad))
    assert loc.slow_pair() == pair
    assert played.localization_rounds <= 5
    assert {loc.status(x) for x in names if x not in bad} == {"cleared"}
    assert loc.unexplained() == [] and loc.suspects() == []
    for number in {r.round.number for r in loc.results}:  # disjoint rounds
        held = [x for r in loc.results if r.round.number == number for x in r.test.nodes]
        assert len(held) == len(set(held)), number


def test_two_nodes_a_leaf_and_the_pair_on_a_bad_node_s_leaf_narrowed_not_named():
    # leaf03 keeps one good node: one probe a round can hold it (a bit a round), so five
    # rounds narrow its partner to a few leaves; the bad node is named all the same
    names, leaf = fleet(64, 32)
    played = play(names, faults(["gpu0005"], ("leaf03", "leaf27"), leaf), leaf)
    loc = played.localizer.loc
    assert played.named == ("gpu0005",) and played.localization_rounds == 5
    cands = loc.pair_candidates()
    assert cands is not None and ("leaf03", "leaf27") in cands and len(cands) <= 8
    assert all("leaf03" in p for p in cands) and loc.slow_pair() is None
    # no healthy node rejected: the failed jobs over good nodes are the candidates'
    assert {loc.status(x) for x in names if x != "gpu0005"} == {"cleared"}
    assert loc.unexplained() == []
    judge = judge_of(loc)
    marks = {n: v for n in names for v in judge.verdicts(n) if v.component.startswith("leaves")}
    held = {lf for p in cands for lf in p}
    assert sorted(marks) == sorted(x for x in names if leaf[x] in held and x != "gpu0005")
    v = marks["gpu0006"]
    assert (v.check, v.component, v.remediation) == (
        "nccl.matrix", "leaves (pair not named)",
        "check the uplinks and spines between these leaf pairs; no node is to blame")  # fmt: skip
    shown = ", ".join(f"{a}+{b}" for a, b in sorted(cands))
    assert v.message.startswith(
        "infrastructure: flows between two leaves are slow, the pair not named within 5 "
        f"rounds: one of {len(cands)} leaf pairs: {shown}; failed jobs over good nodes: "
    )


def judge_of(loc):
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.nccl.checks import Judge
    from nodegate.stages.nccl.profile import nccl_profile
    from nodegate.stages.nccl.results import JobReading

    from tests.unit.test_nccl_verdicts import REPO

    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    readings = {o.test: JobReading(o.value, o.value, o.error) for o in loc.results}

    def refs(o, node: str) -> tuple[str, ...]:
        return (f"raw/{node}/nccl.json#r{o.round.label}-{o.test.key}",)

    return Judge(loc, prof, readings, refs)


def test_a_slow_leaf_pair_alone_names_no_node():
    names, leaf = fleet(16, 4)
    played = play(names, faults([], ("leaf01", "leaf03"), leaf), leaf)
    loc = played.localizer.loc
    assert played.named == () and loc.slow_pair() == ("leaf01", "leaf03")
    assert {loc.status(x) for x in names} == {"cleared"}
    assert [r.test.phase for r in loc.results if r.round.number == 3] == ["group"] * 8
    assert played.localization_rounds == 2  # the groups, one round of probes


def test_no_fault_between_leaves_one_round_of_probes_beside_the_pairs():
    names, leaf = fleet(64, 8)
    played = play(names, faults(["gpu0010"], (), leaf), leaf)
    loc = played.localizer.loc
    assert played.named == ("gpu0010",) and loc.pair_candidates() is None
    assert loc.pairs_not_cleared() == set()
    # gpu0010's leaf-mates are busy in round 4: its leaf's pairs are probed in round 5
    probes = {r.round.number for r in loc.of_phase("probe")}
    assert probes == {4, 5} and played.localization_rounds == 3


def test_a_pair_failing_across_the_slow_pair_does_not_blame_a_healthy_suspect():
    # two leaves of two: gpu0001's only leaf-mate is bad, so its partners come from leaf02,
    # and the pair between leaf01 and leaf02 is slow
    names, leaf = fleet(8, 4)
    played = play(names, faults(["gpu0002"], ("leaf01", "leaf02"), leaf), leaf)
    loc = played.localizer.loc
    assert played.named == ("gpu0002",)
    assert loc.status("gpu0001") == "cleared"
    keys = {loc.partner_key("gpu0002", r.test.partner)
            for r in loc.pair_failures("gpu0002")}  # fmt: skip
    assert len(keys) >= 2  # never two partners on one leaf across the suspect's own


def test_the_pair_marks_the_nodes_of_its_leaves_naming_their_uplinks_no_node_rejected():
    from nodegate.core.values import Status
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.nccl.checks import Judge
    from nodegate.stages.nccl.profile import nccl_profile
    from nodegate.stages.nccl.results import JobReading

    from tests.unit.test_nccl_verdicts import REPO

    names, leaf = fleet(16, 4)
    loc = play(names, faults([], ("leaf01", "leaf03"), leaf), leaf).localizer.loc
    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    readings = {o.test: JobReading(o.value, o.value, o.error) for o in loc.results}

    def refs(o, node: str) -> tuple[str, ...]:
        return (f"raw/{node}/nccl.json#r{o.round.label}-{o.test.key}",)

    uplinks = {"leaf01": ["P17 -> spine01 P1", "P18 -> spine02 P1"],
               "leaf03": ["P17 -> spine01 P3", "P18 -> spine03 P3"]}  # fmt: skip
    judge = Judge(loc, prof, readings, refs, None, uplinks)
    got = {n: [v for v in judge.verdicts(n) if v.component.startswith("leaves ")] for n in names}
    assert sorted(n for n, vs in got.items() if vs) == names[:4] + names[8:12]
    v = got["gpu0001"][0]
    assert (v.check, v.status, v.component, v.observed, v.expected) == (
        "nccl.matrix", Status.PASS, "leaves leaf01+leaf03", 150.0, ">= 340")  # fmt: skip
    assert v.message == (
        "infrastructure: flows between leaf01 and leaf03 are slow: every failed job over nodes "
        "of both leaves (3: whole-16 (round 2): 150 GB/s, avg 150; probe-gpu0001-3 (round 4): "
        "150 GB/s, avg 150; probe-gpu0002-3 (round 4): 150 GB/s, avg 150), every job inside "
        "one leaf and over other leaves passed; between them: leaf01's uplinks (P17 -> spine01 P1, "
        "P18 -> spine02 P1) and leaf03's (P17 -> spine01 P3, P18 -> spine03 P3), both on spine01"
    )
    assert v.remediation == (
        "check leaf01's uplinks (P17 -> spine01 P1, P18 -> spine02 P1) and leaf03's (P17 -> "
        "spine01 P3, P18 -> spine03 P3), both on spine01 (link state, errors, routing); no node "
        "is to blame"
    )
    assert v.evidence == (
        "raw/gpu0001/nccl.json#r2-whole-16",
        "raw/gpu0001/nccl.json#r4-probe-gpu0001-3",
        "raw/gpu0001/nccl.json#r4-probe-gpu0002-3",
    )
    whole = {n: v for n in names for v in judge.verdicts(n) if v.check == "nccl.whole.busbw"}
    assert {v.status for v in whole.values()} == {Status.PASS}
    assert "between leaves: leaf01 and leaf03 (their flows slow)" in whole["gpu0005"].message
    # without the fabric stage's discovery: the leaves' uplinks, by name
    bare = Judge(loc, prof, readings, refs).fabric("gpu0001")[0]
    assert bare.message.endswith("between them: the uplinks of leaf01 and leaf03 and the "
                                 "spines between them")  # fmt: skip


def test_uplinks_from_the_fabric_stage_s_snapshot(monkeypatch, tmp_path):
    from nodegate.core.errors import ConfigError
    from nodegate.stages.fabric import discovered

    snap = {
        "subnets": {
            "0xfe80": {
                "nodes": {},
                "uplinks": {
                    "leaf01": {"18": "spine02 P1", "17": "spine01 P1"},
                    "leaf03": {"17": "spine01 P3"},
                },
            }
        }
    }

    def fake(run_dir):
        if run_dir.name == "none":
            raise ConfigError("no fabric stage evidence")
        return snap

    monkeypatch.setattr(discovered, "snapshot_of_run", fake)
    assert discovered.discovered_uplinks(tmp_path) == {
        "leaf01": ["P17 -> spine01 P1", "P18 -> spine02 P1"],
        "leaf03": ["P17 -> spine01 P3"],
    }
    assert discovered.discovered_uplinks(tmp_path / "none") == {}
