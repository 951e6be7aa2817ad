"""Pair planning and bad-node localization (pure)."""

from __future__ import annotations

from collections import Counter

import pytest
from nodegate.framework.active.rounds import Round, RoundId
from nodegate.stages.ib_pairs.plan import (
    MAX_ROUNDS,
    Localization,
    PairResult,
    PairTest,
    next_round,
    round_one,
    rounds_used,
    suspect_paths,
)

RAILS = (0, 1, 2, 3, 4, 5, 6, 7)


def fleet(n: int, per_leaf: int = 4) -> tuple[list[str], dict[str, str]]:
    nodes = [f"gpu{i:04d}" for i in range(1, n + 1)]
    return nodes, {x: f"leaf{(i // per_leaf) + 1:02d}" for i, x in enumerate(nodes)}


def run_all(nodes, leaf, bad_rails=(), bad_links=(), seed=0, same_leaf=False, lost=None):
    """Play every round against a model: a test fails when a member is bad on that rail or
    the pair crosses a bad leaf-to-leaf link; `lost` maps a node to the round from which it
    cannot run its side of any test (its connection dropped)."""
    bad = set(bad_rails)
    links = {frozenset(x) for x in bad_links}
    gone_from = lost or {}
    loc = Localization(tuple(RAILS), tuple(nodes), leaf)

    def play(rnd: Round) -> None:
        for t in rnd.tests:
            gone = tuple(
                (n, f"connection to {n} lost")
                for n in t.nodes()
                if gone_from.get(n, MAX_ROUNDS + 1) <= rnd.id.number
            )
            if gone:
                loc.add(PairResult(t, rnd.id, False, None, gone[0][1], gone))
                continue
            broken = (t.server, t.rail) in bad or (t.client, t.rail) in bad
            broken |= frozenset((leaf[t.server], leaf[t.client])) in links
            loc.add(PairResult(t, rnd.id, not broken, 100.0 if broken else 390.0))

    for rnd in round_one(nodes, leaf, RAILS, same_leaf=same_leaf, seed=seed):
        play(rnd)
    while (rnd := next_round(loc)) is not None:
        play(rnd)
    return loc


def test_round_one_is_a_cross_leaf_matching_and_deterministic():
    nodes, leaf = fleet(16)
    (r1,) = round_one(nodes, leaf, RAILS, seed=7)
    assert r1 == round_one(nodes, leaf, RAILS, seed=7)[0]
    per_rail = Counter((n, t.rail) for t in r1.tests for n in t.nodes())
    assert set(per_rail.values()) == {1} and len(per_rail) == 16 * 8
    assert all(leaf[t.server] != leaf[t.client] for t in r1.tests)
    assert round_one(nodes, leaf, RAILS, seed=8)[0] != r1  # the seed matters


def test_same_leaf_option_keeps_pairs_inside_a_leaf():
    nodes, leaf = fleet(16)
    (r1,) = round_one(nodes, leaf, RAILS, same_leaf=True)
    assert all(leaf[t.server] == leaf[t.client] for t in r1.tests)


def test_odd_count_gets_a_sub_round_with_a_used_node():
    nodes, leaf = fleet(5)
    r1, r1b = round_one(nodes, leaf, RAILS)
    tested = {n for t in r1.tests for n in t.nodes()}
    assert len(tested) == 4 and r1b.id == RoundId(1, 1) and r1b.id.label == "1b"
    (odd,) = set(nodes) - tested
    assert {t.client for t in r1b.tests} == {odd}
    assert {t.server for t in r1b.tests} <= tested


def test_one_slow_rail_blames_that_node_and_clears_its_partner():
    nodes, leaf = fleet(16)
    loc = run_all(nodes, leaf, bad_rails=[("gpu0006", 2)])
    assert loc.status("gpu0006", 2) == "blamed"
    (first,) = [r for r in loc.of("gpu0006", 2) if r.round == RoundId(1)]
    assert loc.status(first.test.other("gpu0006"), 2) == "cleared"
    assert rounds_used(loc.results) == 3
    blamed = {(n, r) for n in nodes for r in RAILS if loc.status(n, r) == "blamed"}
    assert blamed == {("gpu0006", 2)}
    assert all(loc.status(n, r) == "pass" for n in nodes for r in RAILS if r != 2)


def test_bad_link_between_two_leaves_is_reported_not_blamed_on_nodes():
    nodes, leaf = fleet(16)
    (r1,) = round_one(nodes, leaf, RAILS)
    a, b = next((t.server, t.client) for t in r1.tests)
    loc = run_all(nodes, leaf, bad_links=[(leaf[a], leaf[b])])
    assert not any(loc.status(n, r) == "blamed" for n in nodes for r in RAILS)
    assert (min(leaf[a], leaf[b]), max(leaf[a], leaf[b]), 0) in suspect_paths(loc)
    assert loc.status(a, 0) == "cleared" and loc.status(b, 0) == "cleared"


@pytest.mark.parametrize("n", [16, 128, 1024])
@pytest.mark.parametrize("faults", [1, 5])
def test_rounds_do_not_grow_with_the_fleet(n, faults):
    nodes, leaf = fleet(n, per_leaf=16)
    bad = [(nodes[(i * 37 + 5) % n], i % 8) for i in range(faults)]
    loc = run_all(nodes, leaf, bad_rails=bad, seed=3)
    assert rounds_used(loc.results) <= 3
    assert {(x, r) for x in nodes for r in RAILS if loc.status(x, r) == "blamed"} == set(bad)
    others = [(x, r) for x in nodes for r in RAILS if (x, r) not in set(bad)]
    assert all(loc.status(x, r) in ("pass", "cleared") for x, r in others)


def test_a_node_bad_on_all_rails_is_blamed_on_each():
    nodes, leaf = fleet(16)
    loc = run_all(nodes, leaf, bad_rails=[("gpu0003", r) for r in RAILS])
    assert all(loc.status("gpu0003", r) == "blamed" for r in RAILS)
    assert rounds_used(loc.results) == 3


def test_no_good_partner_leaves_the_node_unconfirmed_never_passed():
    nodes, leaf = fleet(2)
    loc = run_all(nodes, leaf, bad_rails=[("gpu0001", 0)])
    # With two nodes there is nobody else to test against: neither is cleared.
    assert loc.status("gpu0001", 0) == "suspect" and loc.status("gpu0002", 0) == "suspect"


def test_localization_keeps_the_role_that_failed():
    nodes, leaf = fleet(16)
    (r1,) = round_one(nodes, leaf, RAILS)
    server = next(t.server for t in r1.tests)
    loc = Localization(tuple(RAILS), tuple(nodes), leaf)
    # A fault that shows only when the node serves (a hung server).
    for rnd in [r1]:
        for t in rnd.tests:
            loc.add(PairResult(t, RoundId(1), not (t.server == server and t.rail == 0), 390.0))
    while (rnd := next_round(loc)) is not None:
        for t in rnd.tests:
            loc.add(PairResult(t, rnd.id, not (t.server == server and t.rail == 0), 390.0))
    assert loc.status(server, 0) == "blamed"
    retests = [r.test for r in loc.results if r.round != RoundId(1) and r.test.subject == server]
    assert retests and all(t.server == server for t in retests)


def _partner(nodes, leaf, node):
    (r1,) = round_one(nodes, leaf, RAILS)
    return next(t.other(node) for t in r1.tests if node in t.nodes())


def test_a_lost_node_is_its_own_error_and_its_partner_is_retested_with_a_good_one():
    nodes, leaf = fleet(16)
    loc = run_all(nodes, leaf, lost={"gpu0003": 1})
    partner = _partner(nodes, leaf, "gpu0003")
    assert loc.down == {"gpu0003": "connection to gpu0003 lost"}
    assert {(n, r): loc.status(n, r) for n in nodes for r in RAILS} == {
        (n, r): "lost" if n == "gpu0003" else "pass" for n in nodes for r in RAILS
    }
    (r1,) = round_one(nodes, leaf, RAILS)
    served = {t.rail for t in r1.tests if t.server == partner}
    # Round 2: only the partner, per rail, in its round-1 role, against the first good node.
    ref = "gpu0001" if partner != "gpu0001" else "gpu0002"
    assert [r.test for r in loc.results if r.round == RoundId(2)] == sorted(
        PairTest(r, partner, ref, partner) if r in served else PairTest(r, ref, partner, partner)
        for r in RAILS
    )
    assert rounds_used(loc.results) == 2 and suspect_paths(loc) == []
    said = loc.history(partner, 0)
    assert [(r.round, r.lost) for r in said] == [
        (RoundId(1), (("gpu0003", "connection to gpu0003 lost"),)),
        (RoundId(2), ()),
    ]


def test_an_unreachable_node_is_nobodys_partner_and_nobody_is_blamed_for_it():
    nodes, leaf = fleet(16)
    loc = run_all(nodes, leaf, bad_rails=[("gpu0006", 2)], lost={"gpu0003": 1, "gpu0012": 1})
    later = [r.test for r in loc.results if r.round.number > 1]
    assert later and not any({"gpu0003", "gpu0012"} & set(t.nodes()) for t in later)
    blamed = {(n, r) for n in nodes for r in RAILS if loc.status(n, r) == "blamed"}
    assert blamed == {("gpu0006", 2)}
    assert {n for n in nodes for r in RAILS if loc.status(n, r) == "lost"} == {
        "gpu0003",
        "gpu0012",
    }


def test_a_reference_lost_under_its_subject_gets_the_subject_another_partner():
    nodes, leaf = fleet(16)
    healthy = run_all(nodes, leaf, bad_rails=[("gpu0006", 2)])
    (ref,) = [r.test.other("gpu0006") for r in healthy.of("gpu0006", 2) if r.round == RoundId(2)]
    loc = run_all(nodes, leaf, bad_rails=[("gpu0006", 2)], lost={ref: 2})
    r2, r3 = ([r for r in loc.history("gpu0006", 2) if r.round == RoundId(n)] for n in (2, 3))
    assert [r.lost_why(ref) for r in r2] == [f"connection to {ref} lost"]
    assert len(r3) == 1 and r3[0].test.other("gpu0006") not in (
        ref,
        _partner(nodes, leaf, "gpu0006"),
    )
    # One failure with a good partner is not two: unconfirmed, never blamed, never passed.
    assert loc.status("gpu0006", 2) == "suspect"
    assert loc.down == {ref: f"connection to {ref} lost"}
    assert all(loc.status(ref, r) == "pass" for r in RAILS)  # it measured them before


def test_nodes_whose_partners_were_all_lost_are_paired_with_each_other_and_pass():
    # Half the fleet (one sshd daemon's nodes) is lost in round 1 and every survivor's
    # partner was one of them: no node passed a rail, so no good partner exists.
    nodes, leaf = fleet(16, per_leaf=8)
    r1 = round_one(nodes, leaf, RAILS)[0]
    assert {frozenset((leaf[t.server], leaf[t.client])) for t in r1.tests} == {
        frozenset(("leaf01", "leaf02"))
    }
    dead = {n: 1 for n in nodes[8:]}
    loc = run_all(nodes, leaf, lost=dead)
    assert set(loc.down) == set(dead)
    assert {(n, r): loc.status(n, r) for n in nodes[:8] for r in RAILS} == {
        (n, r): "pass" for n in nodes[:8] for r in RAILS
    }
    assert rounds_used(loc.results) == 2
    r2 = [r.test for r in loc.results if r.round.number == 2]
    assert all(t.subject is None and not {t.server, t.client} & set(dead) for t in r2)


def test_two_healthy_nodes_in_a_broken_fleet_are_admitted():
    # each healthy node's round-1 partner is broken on every rail: nobody passes round 1
    nodes, leaf = fleet(4, per_leaf=2)
    pairs = {t.nodes() for t in round_one(nodes, leaf, RAILS)[0].tests if t.rail == 0}
    healthy = {min(p) for p in pairs}
    assert len(healthy) == 2
    bad = [(n, r) for n in nodes if n not in healthy for r in RAILS]
    loc = run_all(nodes, leaf, bad_rails=bad)
    for r in RAILS:
        got = {n: loc.status(n, r) for n in nodes}
        assert got == {n: "cleared" if n in healthy else "suspect" for n in nodes}, r
    assert rounds_used(loc.results) <= MAX_ROUNDS
    # the healthy two met in round 2 (neither end known good: both judged), and each broken
    # node was then tested against one of them
    met = [r for r in loc.results if r.round.number == 2 and set(r.test.nodes()) == healthy]
    assert len(met) == len(RAILS) and all(r.passed and r.test.subject is None for r in met)
    assert all(
        len(loc.failed_with_good(n, r)) == 1 for n in nodes if n not in healthy for r in RAILS
    )


def test_a_node_that_passed_another_rail_is_preferred_as_a_partner():
    # Nobody passes rail 0 in round 1: the first pair's server is healthy but its client is
    # broken everywhere, as are both nodes of the second pair; the other pairs fail rail 0
    # only (one end bad there), so their nodes pass the other rails. The healthy node meets
    # one of those on rail 0, not a node that passed nothing.
    nodes, leaf = fleet(8, per_leaf=4)
    pairs = sorted(t.nodes() for t in round_one(nodes, leaf, RAILS)[0].tests if t.rail == 0)
    (a, b), dead, rest = pairs[0], pairs[1], pairs[2:]
    bad = [(n, r) for n in (b, *dead) for r in RAILS] + [(p[0], 0) for p in rest]
    loc = run_all(nodes, leaf, bad_rails=bad)
    (mine,) = [r.test for r in loc.results if r.round.number == 2 and r.test.rail == 0
               and a in r.test.nodes()]  # fmt: skip
    assert mine.subject is None and mine.other(a) not in dead and loc.passed_any(mine.other(a))
