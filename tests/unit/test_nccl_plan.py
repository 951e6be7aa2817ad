"""The nccl localizer played with made-up outcomes: rounds, disjoint jobs, who is named."""

from __future__ import annotations

import pytest
from nodegate.stages.nccl.plan import NcclJob, auto_group_nodes

from tests.nccl_playback import bad_nodes, drop_first, needs_nodes, play


def names(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, n + 1)]


@pytest.mark.parametrize(
    ("n", "bad"),
    [
        (16, ["gpu0007"]),
        (64, ["gpu0013", "gpu0050"]),
        (256, ["gpu0001", "gpu0100", "gpu0255"]),
        (1024, ["gpu0002", "gpu0512", "gpu1000"]),
        (1024, ["gpu0003"]),
    ],
)
def test_bad_nodes_named_in_at_most_four_rounds_no_healthy_blamed(n, bad):
    played = play(names(n), bad_nodes(bad))
    assert played.named == tuple(sorted(bad))
    assert played.localization_rounds == 3  # groups, pairs, confirming pairs
    statuses = {played.localizer.loc.status(x) for x in names(n) if x not in bad}
    assert statuses == {"cleared"}


def test_every_round_is_disjoint_and_written_in_order():
    played = play(names(64), bad_nodes(["gpu0010", "gpu0011"]))
    loc = played.localizer.loc
    for number in {r.round.number for r in loc.results}:
        jobs = [r.test for r in loc.results if r.round.number == number]
        held = [x for j in jobs for x in j.nodes]
        assert len(held) == len(set(held)), number
    assert [label for label, _ in played.rounds] == ["1", "2", "3", "4", "5"]
    assert played.rounds[2] == ("3", 16)  # groups of 4


def test_healthy_set_stops_after_the_whole_set():
    played = play(names(16), bad_nodes([]))
    assert played.rounds == (("1", 16), ("2", 1)) and played.named == ()


def test_without_single_node_jobs_the_whole_set_of_every_node_comes_first():
    # --level quick: no round 1; the whole set holds every node, localization as usual
    played = play(names(16), bad_nodes(["gpu0007"]), single_node_jobs=False)
    assert played.rounds == (("2", 1), ("3", 8), ("4", 2), ("5", 1))
    # the same rounds as after single-node jobs that all passed, less round 1
    assert play(names(16), bad_nodes(["gpu0007"])).rounds == (("1", 16), *played.rounds)
    assert played.named == ("gpu0007",) and played.localization_rounds == 3
    whole = played.localizer.loc.whole()
    assert whole is not None and whole.test.nodes == tuple(names(16))
    assert not played.localizer.loc.of_phase("single")
    assert play(names(8), bad_nodes([]), single_node_jobs=False).rounds == (("2", 1),)
    assert play(names(1), bad_nodes([]), single_node_jobs=False).rounds == ()


def test_a_node_bad_alone_stays_out_of_the_whole_set():
    played = play(names(8), bad_nodes([], single_bad=["gpu0004"]))
    loc = played.localizer.loc
    whole = loc.whole()
    assert whole is not None and "gpu0004" not in whole.test.nodes
    assert loc.status("gpu0004") == "untested"


def test_fault_that_needs_the_whole_set_names_the_smallest_failing_group():
    played = play(names(64), needs_nodes(64))
    loc = played.localizer.loc
    assert played.named == () and loc.smallest_failing() == tuple(names(64))
    assert {loc.status(x) for x in names(64)} == {"group"}
    assert played.localization_rounds <= 4


def test_fault_that_needs_half_the_set_is_narrowed_to_a_half():
    played = play(names(64), needs_nodes(32))
    group = played.localizer.loc.smallest_failing()
    assert group is not None and len(group) == 32


def test_pairs_use_a_known_good_partner_never_twice():
    played = play(names(16), bad_nodes(["gpu0005"]))
    pairs = [r.test for r in played.localizer.loc.results if r.test.phase == "pair"]
    subject = [p for p in pairs if p.subject == "gpu0005"]
    assert len(subject) == 2 and len({p.partner for p in subject}) == 2


def test_job_keys():
    assert NcclJob("single", ("gpu1",)).key == "single-gpu1"
    assert NcclJob("whole", ("a", "b", "c")).key == "whole-3"
    assert NcclJob("pair", ("s", "g"), subject="s").key == "pair-s-g"
    assert [auto_group_nodes(n) for n in (16, 64, 256, 1024)] == [2, 4, 8, 8]


def test_a_node_lost_in_the_whole_set_job_is_left_out_of_it_the_rest_pass():
    nodes = names(32)
    played = play(nodes, bad_nodes([]), drop=lambda r: "gpu0005" if r.id.number == 2 else None)
    loc = played.localizer.loc
    # the whole set again without it, in a sub-round: no localization round spent
    assert played.rounds == (("1", 32), ("2", 1), ("2b", 1))
    whole = loc.whole()
    assert whole is not None and whole.passed and "gpu0005" not in whole.test.nodes
    assert len(whole.test.nodes) == 31 and played.localization_rounds == 0
    assert set(loc.down) == {"gpu0005"} and loc.smallest_failing() is None
    assert {n: loc.status(n) for n in nodes} == {
        n: "lost" if n == "gpu0005" else "pass" for n in nodes
    }


def test_one_node_lost_in_each_round_only_the_lost_nodes_are_not_cleared():
    nodes = names(32)
    played = play(nodes, bad_nodes([]), drop=drop_first())
    loc = played.localizer.loc
    lost = set(loc.down)
    assert len(lost) == len(played.rounds) - 1  # one per round after the single-node jobs
    for r in loc.results:  # a lost node is planned in no later round
        for n in set(r.test.nodes) & lost:
            first = min(o.round for o in loc.results if o.lost_why(n) is not None)
            assert r.round <= first, (n, r.test.key)
    assert {loc.status(n) for n in nodes if n not in lost} == {"cleared"}
    assert played.named == () and loc.smallest_failing() is None
    assert played.localization_rounds <= 4


def test_a_bad_node_stays_unadmitted_when_every_round_loses_a_node():
    nodes = names(32)
    played = play(nodes, bad_nodes(["gpu0007"]), drop=drop_first(skip=["gpu0007"]))
    loc = played.localizer.loc
    assert loc.status("gpu0007") in ("blamed", "suspect")
    others = {loc.status(n) for n in nodes if n not in loc.down and n != "gpu0007"}
    assert others == {"cleared"}
