"""Pair planning and localization for ib_write_bw between nodes, per rail (pure, no I/O).

Round 1 pairs every participant once (a perfect matching; with an odd count the last node is
tested against an already-used node in a sub-round, since a node must never run two tests on
one rail at once: they would share the link and both read low). By default partners sit under
different leaves so the traffic crosses the spine; `same_leaf` keeps pairs inside a leaf.

Localization: a (pair, rail) that fails is split; each member is re-tested on that rail against
a node that passed it (round 2). A member that passes with a good partner is cleared; one that
fails is tested against a second, different good partner (round 3) and blamed if it fails
again. Both members clearing elsewhere points at the path between their leaves. Members left
without a good partner (none passed the rail, or none is free) are paired with each other, a
node that passed another rail first: such a test judges both ends, as round 1 does (passing
clears both). At most three sequential rounds (plus round 1's odd-node sub-round), whatever
the fleet size.

A node that cannot run its side of a test (unreachable, connection lost) is `lost`: that test
is its error, judges its partner not at all (the partner gets a good partner in the next
round, or stays untested), and the node is nobody's partner again.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nodegate.framework.active.rounds import Outcome, Round, RoundId

MAX_ROUNDS = 3


@dataclass(frozen=True, slots=True, order=True)
class PairTest:
    """One ib_write_bw run: server and client HCAs of the same rail."""

    rail: int
    server: str
    client: str
    subject: str | None = None  # the node under test (rounds 2-3); None: both (round 1)

    def nodes(self) -> tuple[str, str]:
        return (self.server, self.client)

    def other(self, node: str) -> str:
        return self.client if node == self.server else self.server


# A test's outcome: `value` is the BW average in Gb/s, `error` the tool's message when it did
# not measure.
PairResult = Outcome[PairTest]
PairRound = Round[PairTest]


@dataclass
class Localization:
    """Everything learnt so far. In rounds 2 and 3 each test has a subject (the node under test)
    and a good partner: only a node's own tests (round 1, or as the subject) judge it."""

    rails: tuple[int, ...]
    nodes: tuple[str, ...]
    leaf: Mapping[str, str]
    results: list[PairResult] = field(default_factory=list)
    # The switch each (node, rail) lands on, where the fabric stage discovered it: a suspect
    # path is named by the rail's own leaves (else by `leaf`).
    rail_leaf: Mapping[tuple[str, int], str] = field(default_factory=dict)
    down: dict[str, str] = field(default_factory=dict)  # lost node -> why, the first time
    _subject: dict[tuple[str, int], list[PairResult]] = field(default_factory=dict)
    _history: dict[tuple[str, int], list[PairResult]] = field(default_factory=dict)
    _good: dict[int, set[str]] = field(default_factory=dict)
    _retest: set[tuple[str, int]] = field(default_factory=set)  # last test said nothing

    def add(self, r: PairResult) -> None:
        self.results.append(r)
        t = r.test
        judged = t.nodes() if t.subject is None else (t.subject,)
        for n in t.nodes():
            why = r.lost_why(n)
            if why is not None:
                self.down.setdefault(n, why)
            if why is not None or n in judged:
                self._history.setdefault((n, t.rail), []).append(r)
        if r.lost:
            # Says nothing of the nodes that could run their side: test them again.
            self._retest.update((n, t.rail) for n in judged if r.lost_why(n) is None)
            return
        for n in judged:
            self._subject.setdefault((n, t.rail), []).append(r)
            self._retest.discard((n, t.rail))
        if r.passed:
            self._good.setdefault(t.rail, set()).update(t.nodes())

    def of(self, node: str, rail: int) -> list[PairResult]:
        """The tests that judge `node` on `rail` (not those where it served as reference)."""
        return self._subject.get((node, rail), [])

    def history(self, node: str, rail: int) -> list[PairResult]:
        """Those, plus the tests of `node` on `rail` that a lost node (itself or its
        partner) kept from judging it, in round order."""
        return self._history.get((node, rail), [])

    def needs_retest(self, node: str, rail: int) -> bool:
        """The node's last test on the rail said nothing of it (its partner was lost)."""
        return (node, rail) in self._retest and node not in self.down

    def good(self, rail: int) -> set[str]:
        """Nodes that passed this rail with some partner and are not lost (the reference
        pool)."""
        return self._good.get(rail, set()) - self.down.keys()

    def failed_with_good(self, node: str, rail: int) -> list[PairResult]:
        """Failures of `node` against partners that were good when the test was planned (it
        was the test's subject)."""
        return [r for r in self.of(node, rail) if not r.passed and r.test.subject == node]

    def passed_any(self, node: str) -> bool:
        """Whether `node` passed some rail (it runs ib_write_bw, its host is sound)."""
        return any(node in self._good.get(rail, ()) for rail in self.rails)

    def status(self, node: str, rail: int) -> str:
        """pass | cleared | blamed | lost | suspect | untested."""
        rs = self.of(node, rail)
        later = [r for r in rs if r.round.number != 1]
        if rs and all(r.passed for r in rs):
            return "pass"  # round 1; or a first test with a good partner, round 1's lost
        if any(r.passed for r in later):
            return "cleared"
        if len({r.test.other(node) for r in self.failed_with_good(node, rail)}) >= 2:
            return "blamed"
        if node in self.down:
            return "lost"  # could not run its side before the rail was settled
        return "suspect" if rs else "untested"  # suspect: failed, not confirmed either way


def _order(nodes: Sequence[str], leaf: Mapping[str, str], seed: int) -> list[str]:
    rng = random.Random(seed)
    keyed = [(leaf.get(n, ""), rng.random(), n) for n in nodes]
    return [n for _, _, n in sorted(keyed)]


def round_one(
    nodes: Sequence[str],
    leaf: Mapping[str, str],
    rails: Sequence[int],
    *,
    same_leaf: bool = False,
    seed: int = 0,
) -> list[PairRound]:
    """The first round (and, for an odd count, its sub-round), deterministic for a seed."""
    if len(nodes) < 2:
        return []
    order = _order(nodes, leaf, seed)
    pairs: list[tuple[str, str]] = []
    if same_leaf:
        # Consecutive nodes of the leaf-sorted order: inside a leaf except at leaf borders.
        pairs = [(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)]
        left = order[-1] if len(order) % 2 else None
    else:
        # Node i with node i + half of the leaf-sorted order: partners under different leaves
        # unless one leaf holds more than half the participants.
        half = len(order) // 2
        pairs = [(order[i], order[i + half]) for i in range(half)]
        left = order[-1] if len(order) % 2 else None
    # Roles alternate by rail, so each node serves on half its rails and is a client on the
    # other half: a fault that shows on one side only (a hung server, a client that cannot
    # connect) is still seen in round 1.
    rounds = [
        Round(
            RoundId(1),
            tuple(
                PairTest(r, a, b) if i % 2 == 0 else PairTest(r, b, a)
                for a, b in pairs
                for i, r in enumerate(rails)
            ),
        )
    ]
    if left is not None:
        partner = next((n for n in order if n != left and leaf.get(n) != leaf.get(left)), order[0])
        if partner == left:
            partner = order[1]
        rounds.append(Round(RoundId(1, 1), tuple(PairTest(r, partner, left) for r in rails)))
    return rounds


def next_round(loc: Localization) -> PairRound | None:
    """The next localization round from what failed so far; None when nothing is left to learn."""
    done = {r.round.number for r in loc.results}
    number = 2 if 2 not in done else 3
    if number > MAX_ROUNDS or MAX_ROUNDS in done:
        return None
    tests: list[PairTest] = []
    for rail in loc.rails:
        good = loc.good(rail)
        busy: set[str] = set()
        left: list[str] = []  # no good partner free for them on this rail
        for node in _needs_partner(loc, rail, number):
            used = _used(loc, node, rail)
            pool = sorted(
                (g for g in good if g != node and g not in used and g not in busy),
                key=lambda g: _preference(loc, node, g),
            )
            if not pool:
                left.append(node)
                continue
            partner = pool[0]
            busy.update((node, partner))
            tests.append(_oriented(loc, rail, node, partner, subject=node))
        tests += _among_themselves(loc, rail, left, busy)
    if not tests:
        return None
    return Round(RoundId(number), tuple(sorted(tests)))


def _used(loc: Localization, node: str, rail: int) -> set[str]:
    return {r.test.other(node) for r in loc.history(node, rail)}


def _oriented(
    loc: Localization, rail: int, node: str, partner: str, subject: str | None
) -> PairTest:
    """Same role as where `node` failed: a fault may show only on the server (or client)
    side."""
    if _last_unsettled_as_server(loc, node, rail):
        return PairTest(rail, node, partner, subject=subject)
    return PairTest(rail, partner, node, subject=subject)


def _among_themselves(
    loc: Localization, rail: int, left: Sequence[str], busy: set[str]
) -> list[PairTest]:
    """Nodes left without a good partner are paired with each other, or with a node not yet
    settled on the rail (failed or untested there, not blamed nor lost), a node that passed
    another rail first, never with a partner they already met there. Neither end is known
    good, so the test judges both (as round 1 does): passing clears both, failing confirms
    nothing."""
    unsettled = [n for n in loc.nodes if loc.status(n, rail) in ("suspect", "untested")]
    tests = []
    for node in left:
        if node in busy:
            continue  # taken as another left node's partner
        used = _used(loc, node, rail)
        pool = sorted(
            (n for n in unsettled if n != node and n not in busy and n not in used),
            key=lambda n: (not loc.passed_any(n), n not in left, _preference(loc, node, n)),
        )
        if not pool:
            continue  # stays unconfirmed: reported as such, never admitted
        busy.update((node, pool[0]))
        tests.append(_oriented(loc, rail, node, pool[0], subject=None))
    return tests


def _last_unsettled_as_server(loc: Localization, node: str, rail: int) -> bool:
    """Whether the node served in its last test that failed or said nothing (partner lost)."""
    failed = [r for r in loc.history(node, rail) if not r.passed]
    return bool(failed) and failed[-1].test.server == node


def _needs_partner(loc: Localization, rail: int, number: int) -> list[str]:
    out = []
    for node in loc.nodes:
        if node in loc.down:
            continue  # lost: nobody's partner again, itself included
        if loc.needs_retest(node, rail) and loc.status(node, rail) in ("suspect", "untested"):
            out.append(node)
            continue
        rs = loc.of(node, rail)
        if not rs or any(r.passed for r in rs if r.round.number != 1):
            continue
        tried = len(loc.failed_with_good(node, rail))
        failed = any(not r.passed for r in rs)
        # Round 3: a second good partner after one failure, or a first one for a node that
        # met none yet (round 2 paired it with another node left without one).
        if failed and (tried == 0 or (number == 3 and tried == 1)):
            out.append(node)
    return out


def _preference(loc: Localization, node: str, partner: str) -> tuple[int, str]:
    """Prefer a partner away from the leaves of the node's failed partners (so a bad path
    between two leaves is not crossed again), then by name for determinism."""
    bad_leaves = {
        loc.leaf.get(r.test.other(node))
        for rail in loc.rails
        for r in loc.of(node, rail)
        if not r.passed
    }
    return (1 if loc.leaf.get(partner) in bad_leaves else 0, partner)


def suspect_paths(loc: Localization) -> list[tuple[str, str, int]]:
    """Leaf pairs (and rail) whose round-1 test failed while both members cleared elsewhere."""
    out = set()
    for r in loc.results:
        if r.round.number == 1 and not r.passed and not r.lost:
            a, b = r.test.nodes()
            if loc.status(a, r.test.rail) == "cleared" and loc.status(b, r.test.rail) == "cleared":
                rail = r.test.rail
                la, lb = sorted(
                    loc.rail_leaf.get((n, rail)) or loc.leaf.get(n, "?") for n in (a, b)
                )
                out.add((la, lb, r.test.rail))
    return sorted(out)


def rounds_used(results: Iterable[PairResult]) -> int:
    """Sequential rounds that ran (a sub-round counts with its round)."""
    return len({r.round.number for r in results})


class PairLocalizer:
    """The ib_pairs localizer for the active skeleton: round 1 (and 1b) from the pairing, then
    `next_round` from what failed."""

    def __init__(
        self,
        nodes: Sequence[str],
        leaf: Mapping[str, str],
        rails: Sequence[int],
        *,
        same_leaf: bool,
        seed: int,
        rail_leaf: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        self.loc = Localization(tuple(sorted(rails)), tuple(nodes), leaf)
        self.loc.rail_leaf = dict(rail_leaf or {})
        self._first = round_one(nodes, leaf, sorted(rails), same_leaf=same_leaf, seed=seed)

    def first_rounds(self) -> list[PairRound]:
        return list(self._first)

    def add(self, outcome: PairResult) -> None:
        self.loc.add(outcome)

    def next_round(self) -> PairRound | None:
        return next_round(self.loc)
