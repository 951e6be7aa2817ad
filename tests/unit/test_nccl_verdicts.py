"""Per-node verdicts of the nccl stage from a played localization: when the whole-set job fails,
only the nodes localization named fail it; the nodes it cleared pass, saying why."""

from __future__ import annotations

from pathlib import Path

from nodegate.core.values import Status, Verdict
from nodegate.profiles import ProfileLibrary
from nodegate.stages.nccl.checks import LOCALIZED, NO_SINGLES, SINGLE, WHOLE, Judge
from nodegate.stages.nccl.plan import NcclJob, NcclOutcome
from nodegate.stages.nccl.profile import nccl_profile
from nodegate.stages.nccl.results import JobReading

from tests.nccl_playback import Played, bad_nodes, erring_nodes, needs_nodes, play

REPO = Path(__file__).resolve().parents[2]
HANG = "job did not finish within 10 s: every rank killed"


def names(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, n + 1)]


def judged(played: Played) -> dict[str, dict[str, Verdict]]:
    """check -> node -> verdict, as the campaign judges them (readings from the outcomes)."""
    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    loc = played.localizer.loc
    readings = {o.test: JobReading(o.value, o.value, o.error) for o in loc.results}

    def refs(o: NcclOutcome, node: str) -> tuple[str, ...]:
        return (f"raw/{node}/nccl.json#r{o.round.label}-{o.test.key}",)

    judge = Judge(loc, prof, readings, refs)
    out: dict[str, dict[str, Verdict]] = {}
    for node in loc.nodes:
        for v in judge.verdicts(node):
            out.setdefault(v.check, {})[node] = v
    return out


def statuses(verdicts: dict[str, Verdict]) -> dict[str, Status]:
    return {n: v.status for n, v in verdicts.items()}


def only(nodes: list[str], bad: dict[str, Status]) -> dict[str, Status]:
    return {n: bad.get(n, Status.PASS) for n in nodes}


def test_without_single_node_jobs_the_single_check_passes_saying_so_the_rest_as_with_them():
    nodes = names(16)
    quick = judged(play(nodes, bad_nodes(["gpu0007"]), single_node_jobs=False))
    std = judged(play(nodes, bad_nodes(["gpu0007"])))
    assert {(v.status, v.component, v.message) for v in quick[SINGLE.id].values()} == {
        (Status.PASS, "node", NO_SINGLES)
    }
    for check in (WHOLE.id, LOCALIZED.id):
        assert (
            statuses(quick[check]) == statuses(std[check]) == only(nodes, {"gpu0007": Status.FAIL})
        )


def test_one_slow_node_of_16_only_it_fails_the_whole_set():
    nodes = names(16)
    v = judged(play(nodes, bad_nodes(["gpu0007"])))
    assert statuses(v[WHOLE.id]) == only(nodes, {"gpu0007": Status.FAIL})
    assert statuses(v[LOCALIZED.id]) == only(nodes, {"gpu0007": Status.FAIL})
    named = v[LOCALIZED.id]["gpu0007"]
    assert (named.observed, named.expected) == (150.0, ">= 340")
    bad = v[WHOLE.id]["gpu0007"]
    assert bad.observed == 150.0 and bad.message.startswith(
        "whole-16 (round 2): 150 GB/s, avg 150; localized: gpu0007; this node fails with good "
        "partners: pair-gpu0007-gpu0002 (round 4): 150 GB/s, avg 150; pair-gpu0007-gpu0001 "
        "(round 5): 150 GB/s, avg 150 [all_reduce_perf "
    )
    assert bad.evidence == (
        "raw/gpu0007/nccl.json#r2-whole-16",
        "raw/gpu0007/nccl.json#r4-pair-gpu0007-gpu0002",
        "raw/gpu0007/nccl.json#r5-pair-gpu0007-gpu0001",
    )
    good = v[WHOLE.id]["gpu0001"]
    assert good.observed == 300.0 and good.expected == ">= 340"
    assert good.message.startswith(
        "whole-set job failed (whole-16 (round 2): 150 GB/s, avg 150); localized: gpu0007; "
        "this node cleared by group-gpu0001-2 (round 3): 300 GB/s, avg 300 [all_reduce_perf "
    ), good.message
    assert good.evidence == (
        "raw/gpu0001/nccl.json#r2-whole-16",
        "raw/gpu0001/nccl.json#r3-group-gpu0001-2",
    )
    assert good.remediation is None


def test_two_slow_nodes_of_64_only_they_fail():
    nodes = names(64)
    bad = {"gpu0013": Status.FAIL, "gpu0050": Status.FAIL}
    v = judged(play(nodes, bad_nodes(list(bad))))
    assert statuses(v[WHOLE.id]) == only(nodes, bad)
    assert statuses(v[LOCALIZED.id]) == only(nodes, bad)
    assert "localized: gpu[0013,0050]; this node cleared by " in v[WHOLE.id]["gpu0001"].message


def test_a_hang_is_the_named_node_s_error_the_others_pass():
    nodes = names(8)
    v = judged(play(nodes, erring_nodes(["gpu0003"], HANG)))
    assert statuses(v[WHOLE.id]) == only(nodes, {"gpu0003": Status.ERROR})
    assert statuses(v[LOCALIZED.id]) == only(nodes, {"gpu0003": Status.ERROR})
    assert v[WHOLE.id]["gpu0003"].observed is None and v[LOCALIZED.id]["gpu0003"].observed is None
    assert v[WHOLE.id]["gpu0003"].message.startswith(
        f"whole-8 (round 2): {HANG}; localized: gpu0003"
    )
    assert v[WHOLE.id]["gpu0001"].message.startswith(
        f"whole-set job failed (whole-8 (round 2): {HANG}); localized: gpu0003; this node cleared "
        "by pair-gpu0001-gpu0002 (round 4): 300 GB/s"
    )


def test_a_fault_that_needs_the_whole_set_fails_every_node():
    nodes = names(64)
    v = judged(play(nodes, needs_nodes(64)))
    assert statuses(v[WHOLE.id]) == dict.fromkeys(nodes, Status.FAIL)
    assert statuses(v[LOCALIZED.id]) == dict.fromkeys(nodes, Status.FAIL)
    assert v[WHOLE.id]["gpu0001"].message.startswith(
        "whole-64 (round 2): 150 GB/s, avg 150; the fault needs a group of 64 nodes, no single "
        "node to blame (smallest failing: gpu[0001-0064]) [all_reduce_perf "
    )


def test_a_fault_no_node_explains_clears_no_node():
    # both halves fail, every group of 4 passes: the smallest failing group is a half, and no
    # node is cleared (each was in a failed job nothing explains: the whole set)
    nodes = names(64)
    played = play(nodes, needs_nodes(32))
    group = played.localizer.loc.smallest_failing()
    assert group is not None and len(group) == 32
    v = judged(played)
    assert statuses(v[WHOLE.id]) == dict.fromkeys(nodes, Status.FAIL)
    assert statuses(v[LOCALIZED.id]) == dict.fromkeys(nodes, Status.FAIL)
    assert "the fault needs a group of 32 nodes, no single node to blame" in (
        v[WHOLE.id]["gpu0001"].message
    )


def test_a_node_bad_alone_skips_the_whole_set():
    nodes = names(8)
    v = judged(play(nodes, bad_nodes([], single_bad=["gpu0004"])))
    assert statuses(v[WHOLE.id]) == only(nodes, {"gpu0004": Status.SKIP})
    assert v[WHOLE.id]["gpu0004"].message == "not in the whole-set job: its single-node job failed"


def test_a_node_lost_in_the_whole_set_job_is_its_error_every_other_node_passes():
    nodes = names(32)
    played = play(nodes, bad_nodes([]), drop=lambda r: "gpu0005" if r.id.number == 2 else None)
    v = judged(played)
    for check in (WHOLE.id, LOCALIZED.id):
        assert statuses(v[check]) == only(nodes, {"gpu0005": Status.ERROR}), check
    lost = "connection to gpu0005 lost (closed by the other end)"
    assert v[LOCALIZED.id]["gpu0005"].message == lost
    assert v[WHOLE.id]["gpu0005"].message.startswith(f"whole-32 (round 2): not run ({lost})")
    assert v[WHOLE.id]["gpu0001"].message.startswith("whole-31 (round 2b): 300 GB/s")
    assert "the fault needs a group" not in v[WHOLE.id]["gpu0005"].message


def test_slow_nodes_fail_the_whole_set_at_their_measured_busbw_when_it_hung():
    # 24 nodes: gpu0003 hangs every job of several nodes (the whole set too: nothing measured
    # there), gpu0005 and gpu0017 are slow; their FAIL carries what their own jobs measured
    nodes = names(24)
    slow = {"gpu0005", "gpu0017"}

    def judge(job: NcclJob) -> bool | str:
        if len(job.nodes) > 1 and "gpu0003" in job.nodes:
            return HANG
        return not set(job.nodes) & slow if len(job.nodes) > 1 else True

    v = judged(play(nodes, judge))
    assert statuses(v[WHOLE.id]) == only(
        nodes, {"gpu0003": Status.ERROR, "gpu0005": Status.FAIL, "gpu0017": Status.FAIL}
    )
    for node in sorted(slow):
        bad = v[WHOLE.id][node]
        assert (bad.observed, bad.expected, bad.unit) == (150.0, ">= 340", "GB/s"), bad.message
        assert bad.reference is not None and not bad.reference.holds(bad.observed)
        assert bad.message.startswith(f"whole-24 (round 2): {HANG}; localized: "), bad.message
