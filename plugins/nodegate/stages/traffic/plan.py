"""The traffic stage's plan, pure: incast rounds (every node a receiver once per rail), then a
bisection per rail, then re-tests of suspects against known-good partners.

Order: nodes by leaf, shuffled within a leaf by the seed, then dealt round-robin over the
leaves, so that neighbours in the order sit under different leaves. Incast round j: the
receivers are m nodes spread over the leaves (m = N // (k + 2)), each with the next m nodes as
victim receivers and the rest dealt as senders (at most k each); the first sender of each incast
also drives the victim flow. Bisection: the first half of the leaf-sorted order sends to a
seeded permutation of the other half, partners under different leaves where the plan can.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from nodegate.framework.active.rounds import Outcome, Round, RoundId

Kind = Literal["incast", "bisection"]


@dataclass(frozen=True, slots=True, order=True)
class TrafficTest:
    """One pattern on one rail: an incast (senders -> receiver, plus the victim flow `victim`
    = (sender, victim receiver)) or a bisection (`pairs`: (sender, receiver) flows)."""

    kind: Kind
    rail: int
    receiver: str = ""
    senders: tuple[str, ...] = ()
    victim: tuple[str, str] | None = None
    pairs: tuple[tuple[str, str], ...] = ()
    retest: str = ""  # the suspect this test re-tests against known-good partners

    def nodes(self) -> tuple[str, ...]:
        """Every node of the test, in a stable order."""
        out: list[str] = []
        if self.kind == "incast":
            out = [self.receiver, *self.senders]
            if self.victim is not None:
                out.append(self.victim[1])
        else:
            for a, b in self.pairs:
                out += [a, b]
        return tuple(dict.fromkeys(out))

    def flows(self) -> tuple[tuple[str, str, str], ...]:
        """(name, sender, receiver) of every flow that runs under load."""
        if self.kind == "bisection":
            return tuple((f"{a}->{b}", a, b) for a, b in self.pairs)
        out = [(f"{s}->{self.receiver}", s, self.receiver) for s in self.senders]
        if self.victim is not None:
            out.append((f"victim {self.victim[0]}->{self.victim[1]}", *self.victim))
        return tuple(out)


def order(nodes: Sequence[str], leaf: Mapping[str, str], seed: int) -> list[str]:
    """Leaf by leaf (seeded within a leaf), dealt round-robin over the leaves."""
    rng = random.Random(seed)
    by_leaf: dict[str, list[str]] = {}
    for n in sorted(nodes):
        by_leaf.setdefault(leaf.get(n, ""), []).append(n)
    for members in by_leaf.values():
        rng.shuffle(members)
    out: list[str] = []
    queues = [by_leaf[k] for k in sorted(by_leaf)]
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def incast_rounds(
    nodes: Sequence[str], leaf: Mapping[str, str], rails: Sequence[int], k: int, seed: int
) -> list[Round[TrafficTest]]:
    """Every node a receiver once per rail; rails run at once (one test per rail per node)."""
    seq = order(nodes, leaf, seed)
    n = len(seq)
    m = max(1, n // (k + 2))
    rounds: list[Round[TrafficTest]] = []
    for j, start in enumerate(range(0, n, m)):
        receivers = seq[start : start + m]
        rest = [x for x in seq[start + len(receivers) :] + seq[:start]]
        victims, rest = rest[: len(receivers)], rest[len(receivers) :]
        per = max(1, min(k, len(rest) // len(receivers)))
        tests = []
        for i, r in enumerate(receivers):
            senders = tuple(rest[i * per : (i + 1) * per])
            if not senders:
                continue
            w = victims[i] if i < len(victims) else None
            for rail in rails:
                tests.append(
                    TrafficTest("incast", rail, r, senders, (senders[0], w) if w else None)
                )
        rounds.append(Round(RoundId(j + 1), tuple(tests)))
    return rounds


def bisection(
    nodes: Sequence[str], leaf: Mapping[str, str], rails: Sequence[int], seed: int, number: int
) -> Round[TrafficTest]:
    """Half the nodes (by leaf) send to a seeded permutation of the other half, across the
    spine where the leaves allow it."""
    by_leaf = sorted(nodes, key=lambda x: (leaf.get(x, ""), x))
    half = len(by_leaf) // 2
    a, b = by_leaf[:half], by_leaf[half : 2 * half]
    rng = random.Random(seed)
    best: list[str] = []
    fewest = len(a) + 1
    for _ in range(64):  # the first seeded permutation with no same-leaf pair, if any
        cand = list(b)
        rng.shuffle(cand)
        same = sum(leaf.get(x) == leaf.get(y) for x, y in zip(a, cand, strict=True))
        if same < fewest:
            best, fewest = cand, same
        if same == 0:
            break
    pairs = tuple(zip(a, best, strict=True))
    tests = [TrafficTest("bisection", r, pairs=pairs) for r in rails]
    if len(by_leaf) % 2 and pairs:
        # The odd node out sends alone to a node of the other half under another leaf; the
        # two tests share that node's rail, so they run one after the other.
        odd = by_leaf[-1]
        to = next((y for y in a if leaf.get(y) != leaf.get(odd)), a[0])
        tests += [TrafficTest("bisection", r, pairs=((odd, to),)) for r in rails]
    return Round(RoundId(number), tuple(tests))


def without(t: TrafficTest, lost: set[str]) -> TrafficTest | None:
    """A planned test with the nodes lost so far taken out (None: nothing left to test)."""
    if t.kind == "bisection":
        pairs = tuple(p for p in t.pairs if not set(p) & lost)
        return replace(t, pairs=pairs) if pairs else None
    senders = tuple(s for s in t.senders if s not in lost)
    if t.receiver in lost or not senders:
        return None
    victim = t.victim if t.victim is not None and not set(t.victim) & lost else None
    return replace(t, senders=senders, victim=victim)


@dataclass
class TrafficPlan:
    """The localizer: the incast rounds and the bisection, each planned again without the
    nodes lost so far (a node that cannot run its side is nobody's partner again), then one
    round of re-tests: each leaf a bisection could not tell from another (`leaf_suspects`),
    and each receiver whose incast was lost with a node, receiving from known-good senders."""

    nodes: tuple[str, ...]
    leaf: Mapping[str, str]
    rails: tuple[int, ...]
    k: int
    seed: int
    # rail -> node -> the switch that rail lands on, where the fabric stage discovered it
    # (the leaves a rail's re-tests and blame name); else `leaf`
    rail_leaf: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    outcomes: list[Outcome[TrafficTest]] = field(default_factory=list)
    # (rail, leaves): a bisection whose slow flows each of these leaves could explain
    leaf_suspects: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    retested: bool = False
    planned: list[Round[TrafficTest]] = field(default_factory=list)

    def __post_init__(self) -> None:
        rounds = incast_rounds(self.nodes, self.leaf, self.rails, self.k, self.seed)
        rounds.append(bisection(self.nodes, self.leaf, self.rails, self.seed, len(rounds) + 1))
        self.planned = rounds

    def leaf_on(self, rail: int) -> Mapping[str, str]:
        """node -> its leaf on `rail`: the discovered switch, else the `leaf` label."""
        return self.rail_leaf.get(rail) or self.leaf

    def lost(self) -> set[str]:
        return {n for o in self.outcomes for n, _ in o.lost}

    def first_rounds(self) -> list[Round[TrafficTest]]:
        return self.planned[:1]

    def add(self, outcome: Outcome[TrafficTest]) -> None:
        self.outcomes.append(outcome)

    def next_round(self) -> Round[TrafficTest] | None:
        done = {o.round.number for o in self.outcomes}
        lost = self.lost()
        for r in self.planned:
            if r.id.number in done:
                continue
            if r.tests and r.tests[0].kind == "bisection":  # planned again without the lost
                left = [n for n in self.nodes if n not in lost]
                tests = bisection(left, self.leaf, self.rails, self.seed, r.id.number).tests
            else:
                tests = tuple(x for t in r.tests if (x := without(t, lost)) is not None)
            if tests:
                return Round(r.id, tests)
            done.add(r.id.number)
        if self.retested:
            return None
        self.retested = True
        number = max(done) + 1
        left = [n for n in self.nodes if n not in lost]
        again = [
            t for rail, leaves in self.leaf_suspects
            for t in leaf_retests(left, self.leaf_on(rail), rail, leaves, self.seed)
        ]  # fmt: skip
        again += self.receiver_retests(lost, {(n, t.rail) for t in again for n in t.nodes()})
        return Round(RoundId(number), tuple(again)) if again else None

    def receiver_retests(self, lost: set[str], busy: set[tuple[str, int]]) -> list[TrafficTest]:
        """The receivers of incasts lost with a node: an incast to each from nodes that have
        passed nothing against them (any node not lost), so that its notification point is
        still judged."""
        out = []
        for o in self.outcomes:
            t = o.test
            if not o.lost or t.kind != "incast" or t.receiver in lost:
                continue
            good = [
                n for n in order(self.nodes, self.leaf, self.seed)
                if n != t.receiver and n not in lost and (n, t.rail) not in busy
            ][: self.k]  # fmt: skip
            if (t.receiver, t.rail) in busy or len(good) < 2:
                continue
            x = TrafficTest("incast", t.rail, t.receiver, tuple(good), retest=t.receiver)
            busy.update((n, t.rail) for n in x.nodes())
            out.append(x)
        return out


def leaf_retests(
    nodes: Sequence[str], leaf: Mapping[str, str], rail: int, suspects: Sequence[str], seed: int
) -> list[TrafficTest]:
    """Per suspect leaf: two of its nodes send to two nodes under a leaf that is no suspect,
    which send back (two flows up its uplinks, two down): slow only if that leaf is at fault.
    Tests of one rail that share nodes run one after the other (the scheduler's resources)."""
    seq = order(nodes, leaf, seed)
    good = [n for n in seq if leaf.get(n) not in suspects]
    out = []
    for x in suspects:
        mine = [n for n in seq if leaf.get(n) == x]
        if len(mine) < 2 or len(good) < 2:
            continue
        (x1, x2), (g1, g2) = mine[:2], good[:2]
        pairs = ((x1, g1), (x2, g2), (g1, x1), (g2, x2))
        out.append(TrafficTest("bisection", rail, pairs=pairs, retest=x))
    return out
