"""Jobs, rounds and bad-node localization of the `nccl` stage (pure: no I/O).

Round 1 runs every node alone (one job per node, all at once); round 2 one job over every node
whose single-node run passed (the whole set). Without single-node jobs (profile
`single_node_jobs: false`, `--level quick`) round 1 is empty and the whole set holds every
node. When that fails, localization plans rounds of disjoint jobs that run at once (a node is
in one job at a time):

  groups   the whole set split into small groups (`group_nodes`, else about sqrt(N/3), 2..8)
           inside each leaf (no group crosses a spine: a fault between leaves fails none);
           a failing group's members are suspects, a passing group's members are known good;
  pairs    each suspect with a known-good partner (a different one each time, of its own
           leaf first, else of a leaf no earlier partner was on): failing with two good
           partners blames the node, passing once clears it (a slow leaf pair can fail one
           pair of a healthy node, never two; a leaf's last good node stays free for the
           probes while other leaves have partners);
  probes   the fabric step, with leaves known (labels or the fabric stage's cabling): once the
           groups ran, the free good nodes run probes over sets of leaves (`leafpairs`) that
           name the leaf pair whose flows are slow, in the same rounds as the pairs; a failed
           job that holds that pair and no named node is explained by it (its nodes cleared);
  halves   with no leaves known, when every group passed, the fault needs a larger group:
           halves of the set, then halves of a failing half, naming the smallest group that
           still fails.

A node lost under a job (its connection dropped: the skeleton's `lost`) is that node's error
and the job judges none of its nodes: a whole-set job runs again without the lost nodes (a
sub-round, 2b, at most twice; then localization goes on with the rest); the other members of
a lost group, pair or half are paired with a good node in the next round, as suspects are
(passing clears them, failing makes them one).

With 1 to 3 bad nodes among N <= 1,024: groups, pairs, confirming pairs: 3 rounds after the
whole set (the fourth takes suspects that found no partner in time); probes may take one round
more than `max_rounds` (bench/bench_nccl.py --matrix: the table).

The collective matrix (profile `nccl.matrix`) runs after that, on the nodes still in (not
lost, named or suspected): one round per (collective, scale), each round the scale's disjoint
groups at once (`matrix_groups`): `two_node_ring` pairs inside a leaf (NCCL_ALGO=Ring),
`leaf` one group per leaf, `leaves` groups of k neighbouring leaves, `whole` every node.
`estimate_s` is the plan's time budget for those rounds, at the floors.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nodegate.framework.active.rounds import Outcome, Round, RoundId
from nodegate.stages.nccl import leafpairs
from nodegate.stages.nccl.leafpairs import Pair
from nodegate.stages.nccl.profile import Matrix, Scale

Phase = Literal["single", "whole", "group", "pair", "half", "probe", "matrix"]
LOCAL = ("group", "pair", "half", "probe")  # localization's phases
MATRIX_LAUNCH_S = 10.0  # the time budget's start-up of one job (launcher, NCCL init)
SINGLE_ROUND, WHOLE_ROUND = 1, 2  # localization rounds are numbered from 3
MAX_WHOLE_RETRIES = 2  # a whole-set job that lost a node runs again without it (2b, 2c)
PROBE_EXTRA_ROUNDS = 1  # probes may run this many rounds past `max_rounds`


@dataclass(frozen=True, order=True)
class NcclJob:
    """One all_reduce_perf job over `nodes` (the first launches it); `subject`: the suspect a
    pair judges (its partner is known good)."""

    phase: str
    nodes: tuple[str, ...]
    subject: str | None = None
    collective: str = "all_reduce"
    scale: str = ""  # a matrix job's scale

    def __hash__(self) -> int:
        # Asked of every node's reading of a job (a whole-set job holds every node): hashed
        # once, not once per node over its whole node tuple; not pickled (hashes of str differ
        # between processes).
        h: int | None = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.phase, self.nodes, self.subject, self.collective, self.scale))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def key(self) -> str:
        """`single-gpu001`, `whole-16`, `group-gpu001-4`, `pair-gpu007-gpu002`,
        `matrix-alltoall-leaf-gpu001-8`."""
        if self.phase == "matrix":
            return f"matrix-{self.collective}-{self.scale}-{self.nodes[0]}-{len(self.nodes)}"
        if self.phase == "single":
            return f"single-{self.nodes[0]}"
        if self.phase == "pair":
            return f"pair-{self.subject}-{self.partner}"
        if self.phase == "whole":
            return f"whole-{len(self.nodes)}"
        return f"{self.phase}-{self.nodes[0]}-{len(self.nodes)}"

    @property
    def partner(self) -> str | None:
        """The known-good node of a pair."""
        return next((n for n in self.nodes if n != self.subject), None)


NcclOutcome = Outcome[NcclJob]
Status = Literal["pass", "cleared", "blamed", "suspect", "group", "lost", "untested"]


def auto_group_nodes(n: int) -> int:
    """Group size for `n` nodes: few bad nodes leave at most 3 failing groups, so round 2 has
    3 * g suspects to pair with good nodes; sqrt(n/3) balances jobs against suspects."""
    return max(2, min(8, math.isqrt(max(n // 3, 1))))


def spread(nodes: Sequence[str], leaf: Mapping[str, str], seed: int, parts: int) -> list[list[str]]:
    """`parts` groups of near-equal size, each taking nodes from every leaf in turn."""
    rng = random.Random(seed)
    order = [n for _, _, n in sorted((leaf.get(n, ""), rng.random(), n) for n in nodes)]
    return [sorted(order[i::parts]) for i in range(parts)]


def leaf_groups(
    nodes: Sequence[str], leaf: Mapping[str, str], seed: int, g: int
) -> list[list[str]]:
    """Groups of about `g` inside each leaf (`spread` over one leaf's nodes); the nodes of
    leaves too small for a group of two form groups across leaves (as `spread`)."""
    out: list[list[str]] = []
    rest: list[str] = []
    for ns in by_leaf(nodes, leaf):
        if len(ns) < 2:
            rest.extend(ns)
            continue
        out.extend(spread(ns, leaf, seed, max(1, len(ns) // g)))
    if len(rest) >= 2:
        out.extend(spread(rest, leaf, seed, max(1, len(rest) // g)))
    elif rest and out:
        out[-1] = sorted(out[-1] + rest)
    return out


def by_leaf(nodes: Sequence[str], leaf: Mapping[str, str]) -> list[list[str]]:
    """The nodes per leaf, leaves in name order (an unlabelled node: leaf "")."""
    out: dict[str, list[str]] = {}
    for n in sorted(nodes):
        out.setdefault(leaf.get(n, ""), []).append(n)
    return [out[k] for k in sorted(out)]


def matrix_groups(
    scale: Scale, nodes: Sequence[str], leaf: Mapping[str, str]
) -> list[tuple[str, ...]]:
    """The disjoint groups of one scale over `nodes` (see the module docstring); a leaf with
    one node has no pair, a last leaf short of k joins the group before it."""
    leaves = by_leaf(nodes, leaf)
    if scale.name == "two_node_ring":
        return [tuple(ns[i : i + 2]) for ns in leaves for i in range(0, len(ns) - 1, 2)]
    if scale.name == "leaf":
        return [tuple(ns) for ns in leaves if len(ns) >= 2]
    if scale.name == "leaves":
        k = scale.leaves
        chunks = [leaves[i : i + k] for i in range(0, len(leaves), k)]
        if len(chunks) > 1 and len(chunks[-1]) < k:
            chunks[-2].extend(chunks.pop())
        return [tuple(n for ns in c for n in ns) for c in chunks if len(c) >= 2]
    return [tuple(sorted(nodes))] if len(nodes) >= 2 else []


def matrix_plan(
    matrix: Matrix, nodes: Sequence[str], leaf: Mapping[str, str]
) -> list[list[NcclJob]]:
    """One round of jobs per (collective, scale), collectives outer, scales in curve order;
    a scale with no group over these nodes has no round."""
    rounds = []
    for c in matrix.collectives:
        for sc in matrix.scales:
            groups = matrix_groups(sc, nodes, leaf)
            if groups:
                rounds.append([NcclJob("matrix", g, collective=c, scale=sc.name) for g in groups])
    return rounds


def estimate_s(matrix: Matrix, nodes: Sequence[str], leaf: Mapping[str, str]) -> float:
    """The matrix's modelled wall time: rounds one after the other, each as long as one job
    (its groups run at once): start-up, then the iterations' bytes at the scale's floor."""
    total = 0.0
    for jobs in matrix_plan(matrix, nodes, leaf):
        sc = next(s for s in matrix.scales if s.name == jobs[0].scale)
        floor = matrix.floors[(jobs[0].collective, sc.name)].value or 1.0
        total += MATRIX_LAUNCH_S + sc.iterations * sc.message_bytes / (float(floor) * 1e9)
    return round(total, 1)


@dataclass
class Localization:
    """What the jobs said so far, per node."""

    nodes: tuple[str, ...]
    leaf: Mapping[str, str]
    results: list[NcclOutcome] = field(default_factory=list)
    down: dict[str, str] = field(default_factory=dict)  # node -> why it could not take part
    singles: bool = True  # round 1 runs every node alone (else the whole set holds every node)
    _memo: dict[Any, Any] = field(default_factory=dict)  # derived sets, until the next add

    def add(self, r: NcclOutcome) -> None:
        self._memo.clear()
        self.results.append(r)
        for n, why in r.lost:
            self.down.setdefault(n, why)

    def of_phase(self, *phases: str) -> list[NcclOutcome]:
        key = ("of_phase", *phases)
        if key not in self._memo:
            self._memo[key] = [r for r in self.results if r.test.phase in phases]
        got: list[NcclOutcome] = self._memo[key]
        return got

    def jobs_of(self, node: str) -> list[NcclOutcome]:
        """Every job that held `node`, in the order they ran (an index: a judge asking this
        of every node of a whole-set job scans each job once, not once per node)."""
        if "jobs_of" not in self._memo:
            index: dict[str, list[NcclOutcome]] = {}
            for r in self.results:
                for n in r.test.nodes:
                    index.setdefault(n, []).append(r)
            self._memo["jobs_of"] = index
        got: dict[str, list[NcclOutcome]] = self._memo["jobs_of"]
        return got.get(node, [])

    def judged(self, r: NcclOutcome) -> bool:
        """Whether the job says anything of its nodes (no node was lost under it)."""
        return not r.lost

    def single(self, node: str) -> NcclOutcome | None:
        return next((r for r in self.jobs_of(node) if r.test.phase == "single"), None)

    def whole(self) -> NcclOutcome | None:
        """The latest whole-set job: one that lost a node is planned again without it."""
        wholes = self.of_phase("whole")
        return wholes[-1] if wholes else None

    def whole_of(self, node: str) -> NcclOutcome | None:
        """The latest whole-set job that held `node` (a lost node: the one it was lost in)."""
        return next((r for r in reversed(self.jobs_of(node)) if r.test.phase == "whole"), None)

    def retest(self) -> list[str]:
        """Nodes a localization job could not judge (a node under it was lost), not lost
        themselves, that no judged job has placed since: paired with a good node next."""
        if "retest" not in self._memo:
            last: dict[str, NcclOutcome] = {}
            for r in self.of_phase(*LOCAL):
                for n in r.test.nodes:
                    last[n] = r
            self._memo["retest"] = sorted(
                n
                for n, r in last.items()
                if not self.judged(r) and n not in self.down and n not in self.good()
            )
        got: list[str] = self._memo["retest"]
        return got

    def members(self) -> tuple[str, ...]:
        """The whole set: nodes whose single-node job passed (every node without them)."""
        if not self.singles:
            return self.nodes
        return tuple(n for n in self.nodes if (r := self.single(n)) is not None and r.passed)

    def good(self) -> set[str]:
        """Nodes that passed a localization job and are not lost: the reference pool."""
        if "good" not in self._memo:
            self._memo["good"] = self._good()
        got: set[str] = self._memo["good"]
        return got

    def _good(self) -> set[str]:
        out = {n for r in self.of_phase(*LOCAL) if r.passed for n in r.test.nodes}
        return out - self.down.keys() - self.blamed()

    def leaf_of(self, node: str) -> str:
        return self.leaf.get(node, "")

    def partner_key(self, subject: str, partner: str | None) -> str:
        """What a pair's partner stands for: itself on the subject's own leaf (no spine
        between them), else its leaf (a slow leaf pair fails every pair across it)."""
        lf = self.leaf_of(partner or "")
        return f"node {partner}" if lf == self.leaf_of(subject) else f"leaf {lf}"

    def leaves(self) -> list[str]:
        """The leaves of the whole set's nodes (none when unlabelled or all on one)."""
        whole = self.whole()
        got = sorted({self.leaf_of(n) for n in (whole.test.nodes if whole else ())} - {""})
        return got if len(got) >= 2 else []

    def pair_candidates(self) -> set[Pair] | None:
        """The leaf pairs a slow link may lie between, from every judged job over nodes known
        good on several leaves (`leafpairs.narrow`); None until one of them failed (no job
        has shown a fault between leaves yet)."""
        return self._pairs()[0] if self._pairs()[1] else None

    def pairs_not_cleared(self) -> set[Pair]:
        """The leaf pairs no passed job over good nodes held (a fault shown or not)."""
        return self._pairs()[0]

    def _pairs(self) -> tuple[set[Pair], bool]:
        if "pairs" not in self._memo:
            cands = leafpairs.all_pairs(self.leaves())
            shown = False
            good = self.good()
            for r in self.results:
                if r.test.phase in ("single", "matrix") or not self.judged(r):
                    continue
                lvs = {self.leaf_of(n) for n in r.test.nodes}
                if len(lvs) < 2 or (not r.passed and not set(r.test.nodes) <= good):
                    continue
                shown = shown or not r.passed
                cands = leafpairs.narrow(cands, lvs, not r.passed)
            self._memo["pairs"] = cands, shown
        got: tuple[set[Pair], bool] = self._memo["pairs"]
        return got

    def slow_pair(self) -> Pair | None:
        """The leaf pair named: the one candidate left after a job showed a fault."""
        cands = self.pair_candidates()
        return next(iter(cands)) if cands is not None and len(cands) == 1 else None

    def holds_slow_pair(self, nodes: Sequence[str]) -> bool:
        """Whether the nodes span the slow leaf pair (not named yet: one of the candidates)."""
        cands = self.pair_candidates() or set()
        lvs = {self.leaf_of(n) for n in nodes}
        return any(a in lvs and b in lvs for a, b in cands)

    def pair_failures(self, node: str) -> list[NcclOutcome]:
        """Pairs that failed with `node` as the suspect and a good partner (judged ones)."""
        return [
            r
            for r in self.of_phase("pair")
            if r.test.subject == node and not r.passed and self.judged(r)
        ]

    def blamed(self) -> set[str]:
        if "blamed" not in self._memo:
            self._memo["blamed"] = self._blamed()
        got: set[str] = self._memo["blamed"]
        return got

    def _blamed(self) -> set[str]:
        partners: dict[str, set[str]] = {}
        for r in self.of_phase("pair"):
            if r.test.subject is not None and not r.passed and self.judged(r):
                key = self.partner_key(r.test.subject, r.test.partner)
                partners.setdefault(r.test.subject, set()).add(key)
        return {n for n, ps in partners.items() if len(ps) >= 2}

    def suspects(self) -> list[str]:
        """Members of failing (judged) groups, and subjects of failing pairs, not yet cleared,
        blamed or lost."""
        if "suspects" not in self._memo:
            self._memo["suspects"] = self._suspects()
        got: list[str] = self._memo["suspects"]
        return got

    def _suspects(self) -> list[str]:
        failed = {
            n
            for r in self.of_phase("group", "pair")
            if not r.passed and self.judged(r)
            for n in ([r.test.subject] if r.test.phase == "pair" else r.test.nodes)
            if n is not None
        }
        cleared = {r.test.subject for r in self.of_phase("pair") if r.passed and r.test.subject}
        return sorted(failed - cleared - self.blamed() - self.down.keys())

    def smallest_failing(self) -> tuple[str, ...] | None:
        """The smallest job over several nodes that failed with none of its nodes to blame:
        every node cleared by itself with good partners (or every smaller group passed)."""
        if "smallest_failing" not in self._memo:
            self._memo["smallest_failing"] = self._smallest_failing()
        got: tuple[str, ...] | None = self._memo["smallest_failing"]
        return got

    def _smallest_failing(self) -> tuple[str, ...] | None:
        failing = self.unexplained()
        return min(failing, key=len) if failing else None

    def unexplained(self) -> list[tuple[str, ...]]:
        """The nodes of every judged job over several nodes that failed holding no node named,
        suspected or lost: a fault no single node explains."""
        if "unexplained" not in self._memo:
            explained = set(self.suspects()) | self.blamed() | self.down.keys()
            self._memo["unexplained"] = [
                r.test.nodes
                for r in self.of_phase("whole", "group", "half", "probe")
                if not r.passed
                and self.judged(r)
                and not explained & set(r.test.nodes)
                and not self.holds_slow_pair(r.test.nodes)
            ]
        got: list[tuple[str, ...]] = self._memo["unexplained"]
        return got

    def _sets(self) -> dict[str, frozenset[str]]:
        """The whole set's, the suspects' and the unexplained groups' nodes as sets (asked of
        every node by `status`)."""
        if "sets" not in self._memo:
            whole = self.whole()
            self._memo["sets"] = {
                "whole": frozenset(whole.test.nodes if whole else ()),
                "suspects": frozenset(self.suspects()),
                "unexplained": frozenset(n for g in self.unexplained() for n in g),
            }
        got: dict[str, frozenset[str]] = self._memo["sets"]
        return got

    def status(self, node: str) -> Status:
        """`cleared`: the node passed a localization job and every failed job it was in holds
        a node named, suspected or lost; `group`: it was in a failed job that none explains."""
        whole = self.whole()
        if node in self.down:
            return "lost"
        if whole is None or node not in self._sets()["whole"]:
            return "untested"
        if whole.passed:
            return "pass"
        if node in self.blamed():
            return "blamed"
        if node in self._sets()["suspects"]:
            return "suspect"
        if node in self._sets()["unexplained"]:
            return "group"
        if node in self.good():
            return "cleared"
        return "suspect"  # failed with the whole set only: never cleared by a smaller job


class NcclLocalizer:
    """The nccl localizer for the active skeleton (see the module docstring)."""

    def __init__(
        self,
        nodes: Sequence[str],
        leaf: Mapping[str, str],
        *,
        max_rounds: int = 4,
        group_nodes: int = 0,
        seed: int = 0,
        matrix: Matrix | None = None,
        single_node_jobs: bool = True,
    ) -> None:
        self.loc = Localization(tuple(nodes), leaf, singles=single_node_jobs)
        self.matrix = matrix
        self._matrix_rounds: list[list[NcclJob]] | None = None  # planned once localization ends
        self.max_rounds = max_rounds
        self.group_nodes = group_nodes
        self.seed = seed
        self._split: set[tuple[str, ...]] = set()  # sets already cut into halves

    def first_rounds(self) -> list[Round[NcclJob]]:
        if not self.loc.singles:
            whole = self._localize()  # round 2, the whole set of every node (none: < 2 nodes)
            return [whole] if whole is not None else []
        return [
            Round(RoundId(SINGLE_ROUND), tuple(NcclJob("single", (n,)) for n in self.loc.nodes))
        ]

    def add(self, outcome: NcclOutcome) -> None:
        self.loc.add(outcome)

    def rounds_used(self) -> int:
        """Localization rounds run after the whole-set job."""
        return rounds_used(self.loc.results)

    def still_in(self) -> list[str]:
        """The whole set's nodes not lost, named or suspected: the matrix's nodes."""
        loc = self.loc
        whole = loc.whole()
        if whole is None:
            return []
        out = set(loc.down) | loc.blamed() | set(loc.suspects())
        return [n for n in whole.test.nodes if n not in out]

    def next_round(self) -> Round[NcclJob] | None:
        rnd = None if self._matrix_rounds is not None else self._localize()
        if rnd is not None or self.matrix is None or self.loc.whole() is None:
            return rnd
        if self._matrix_rounds is None:
            self._matrix_rounds = matrix_plan(self.matrix, self.still_in(), self.loc.leaf)
        if not self._matrix_rounds:
            return None
        number = max(r.round.number for r in self.loc.results) + 1
        return Round(RoundId(number), tuple(self._matrix_rounds.pop(0)))

    def _localize(self) -> Round[NcclJob] | None:
        loc = self.loc
        done = {r.round.number for r in loc.results}
        if WHOLE_ROUND not in done:
            members = loc.members()
            if len(members) < 2:
                return None
            return Round(RoundId(WHOLE_ROUND), (NcclJob("whole", members),))
        whole = loc.whole()
        if whole is None or whole.passed:
            return None
        live = [n for n in whole.test.nodes if n not in loc.down]
        if len(live) < 2:
            return None
        if not loc.judged(whole) and whole.round.sub < MAX_WHOLE_RETRIES:
            # A node was lost under it: the whole set again without the lost (a sub-round);
            # past the retries, localization goes on with the rest, as after a failure.
            job = NcclJob("whole", tuple(live))
            return Round(RoundId(WHOLE_ROUND, whole.round.sub + 1), (job,))
        used = self.rounds_used()
        if used >= self.max_rounds + PROBE_EXTRA_ROUNDS:
            return None
        number = max(done) + 1
        if number == WHOLE_ROUND + 1:
            groups = self._groups(live)
            return Round(RoundId(number), tuple(groups)) if groups else None
        jobs: list[NcclJob] = []
        if used < self.max_rounds:
            failed = any(not r.passed and loc.judged(r) for r in loc.of_phase("group", "pair"))
            if failed or loc.retest():
                jobs = self._pairs()
            elif not loc.leaves():
                jobs = self._halves(live)
        jobs += self._probes({n for j in jobs for n in j.nodes})
        return Round(RoundId(number), tuple(jobs)) if jobs else None

    def _probes(self, busy: set[str]) -> list[NcclJob]:
        """The fabric step's probes on good nodes no other job of the round holds: the first
        round's to show whether a fault lies between leaves (every pair in a probe, as far as
        nodes allow), later ones until one pair is left (see `leafpairs`)."""
        loc = self.loc
        leaves = loc.leaves()
        if not leaves:
            return []
        shown = loc.pair_candidates() is not None
        cands = loc.pairs_not_cleared()
        if len(cands) <= shown:
            return []  # named (or none: no fault between leaves, or no one pair explains it)
        free: dict[str, list[str]] = {}
        for n in sorted(loc.good() - busy):
            free.setdefault(loc.leaf_of(n), []).append(n)
        cap = {lf: len(ns) for lf, ns in free.items()}
        probes = leafpairs.design(cands, cap, self.seed, cover=not shown)
        return [NcclJob("probe", g) for g in leafpairs.assign(probes, free)]

    def _groups(self, members: Sequence[str]) -> list[NcclJob]:
        g = self.group_nodes or auto_group_nodes(len(members))
        groups = leaf_groups(members, self.loc.leaf, self.seed, g)
        if len(groups) < 2:
            return []  # no smaller group than the whole set: nothing to learn by splitting
        return [NcclJob("group", tuple(p)) for p in groups]

    def _halves(self, members: Sequence[str]) -> list[NcclJob]:
        """Every group passed: halves of the smallest failing set, while bigger than a group."""
        smallest: tuple[str, ...] = self.loc.smallest_failing() or tuple(members)
        live = [n for n in smallest if n not in self.loc.down]
        g = self.group_nodes or auto_group_nodes(len(members))
        judged = [r for r in self.loc.of_phase("whole") if self.loc.judged(r)]
        if not judged:
            return []  # no whole-set job said anything (each lost a node): nothing to halve
        if len(live) // 2 <= g or smallest in self._split:
            return []  # both halves passed before, or a half would be no bigger than a group
        self._split.add(smallest)
        halves = spread(live, self.loc.leaf, self.seed, 2)
        return [NcclJob("half", tuple(h)) for h in halves]

    def _pairs(self) -> list[NcclJob]:
        loc = self.loc
        pool = sorted(loc.good())
        busy: set[str] = set()
        jobs = []
        for s in dict.fromkeys(loc.suspects() + loc.retest()):
            tried = {loc.partner_key(s, r.test.partner)
                     for r in loc.of_phase("pair") if r.test.subject == s}  # fmt: skip
            # its own leaf first (no spine between them), then by leaf name
            mine = loc.leaf_of(s)
            own = [g for g in pool if loc.leaf_of(g) == mine]
            other = [g for g in pool if loc.leaf_of(g) != mine]
            # the leaf's last good node is kept for the probes when another leaf has one
            order = own + other if len(own) >= 2 or not other else other + own
            partner = next((g for g in order if g not in busy and g != s
                            and loc.partner_key(s, g) not in tried), None)  # fmt: skip
            if partner is None:
                continue  # waits for a partner a later round clears
            busy.update((s, partner))
            # The suspect launches: a fault on the launching node shows as on any other.
            jobs.append(NcclJob("pair", (s, partner), subject=s))
        return jobs


def rounds_used(results: Iterable[NcclOutcome]) -> int:
    """Localization rounds after the whole-set job (the matrix's not counted)."""
    return len(
        {
            r.round.number
            for r in results
            if r.round.number > WHOLE_ROUND and r.test.phase != "matrix"
        }
    )
