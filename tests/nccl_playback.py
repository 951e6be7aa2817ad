"""Play the nccl localizer against made-up outcomes (no launcher): for unit tests and bench/
(a test helper, not part of the product).

`play(nodes, judge)` runs the localizer's rounds, asking `judge(job)` whether each job
passes (True), fails at a value (False) or ends in a tool error (its text), as the skeleton
would after running it. `drop(round)` names a node whose connection is lost in that round (its
job is lost; a job planned over it later would be too).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from nodegate.framework.active.rounds import Outcome, Round
from nodegate.stages.nccl.plan import NcclJob, NcclLocalizer


@dataclass(frozen=True, slots=True)
class Played:
    localizer: NcclLocalizer
    rounds: tuple[tuple[str, int], ...]  # (round label, jobs) in order
    named: tuple[str, ...]

    @property
    def localization_rounds(self) -> int:
        return self.localizer.rounds_used()

    @property
    def jobs(self) -> int:
        return sum(n for _, n in self.rounds)


def play(
    nodes: Sequence[str],
    judge: Callable[[NcclJob], bool | str],
    leaf: Mapping[str, str] | None = None,
    drop: Callable[[Round[NcclJob]], str | None] | None = None,
    **options: int,
) -> Played:
    loc = NcclLocalizer(nodes, leaf or {}, **options)
    gone: set[str] = set()
    pending = list(loc.first_rounds())
    rounds: list[tuple[str, int]] = []
    while pending:
        rnd = pending.pop(0)
        rounds.append((rnd.id.label, len(rnd.tests)))
        dropped = drop(rnd) if drop is not None else None
        if dropped is not None:
            gone.add(dropped)
        for job in rnd.tests:
            got = judge(job)
            lost = tuple((n, lost_reason(n)) for n in job.nodes if n in gone)
            if lost:
                loc.add(Outcome(job, rnd.id, False, None, "; ".join(w for _, w in lost), lost))
            elif isinstance(got, str):  # a tool error (a hang, an NCCL error): nothing measured
                loc.add(Outcome(job, rnd.id, False, None, got))
            else:
                loc.add(Outcome(job, rnd.id, got, 300.0 if got else 150.0))
        if not pending:
            nxt = loc.next_round()
            if nxt is not None:
                pending.append(nxt)
    return Played(loc, tuple(rounds), tuple(sorted(loc.loc.blamed())))


def lost_reason(node: str) -> str:
    return f"connection to {node} lost (closed by the other end)"


def drop_first(skip: Collection[str] = ()) -> Callable[[Round[NcclJob]], str | None]:
    """Each round past the single-node jobs loses one node of its first job (not in `skip`,
    not lost already): a chaos run that cuts one node's connection per round."""
    gone: set[str] = set()

    def drop(rnd: Round[NcclJob]) -> str | None:
        if rnd.id.number == 1:
            return None
        for job in rnd.tests:
            for n in job.nodes:
                if n not in skip and n not in gone:
                    gone.add(n)
                    return n
        return None

    return drop


def bad_nodes(bad: Collection[str], single_bad: Collection[str] = ()) -> Callable[[NcclJob], bool]:
    """A job passes unless it holds a bad node (`single_bad`: bad alone too)."""

    def judge(job: NcclJob) -> bool:
        if job.phase == "single":
            return not set(job.nodes) & set(single_bad)
        return not set(job.nodes) & set(bad)

    return judge


def erring_nodes(bad: Collection[str], error: str) -> Callable[[NcclJob], bool | str]:
    """A job over several nodes ends in `error` when it holds a bad node (a hang, IB error)."""
    return lambda job: error if len(job.nodes) > 1 and set(job.nodes) & set(bad) else True


def needs_nodes(least: int) -> Callable[[NcclJob], bool]:
    """A fault that shows only in jobs of `least` nodes or more (no node to blame)."""
    return lambda job: len(job.nodes) < least
