"""Rounds, outcomes and localization of an active stage, as data (generic over the test).

A *unit* is what gets blamed (a node's rail for ib_pairs; a node for NCCL). A *test* holds
some units and runs as one measurement (a server/client pair on one rail; an all-reduce over a
group of nodes). A *round* is a set of tests that run at once. A *localizer* plans the first
rounds, learns from every outcome, and plans the next round or stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class RoundId:
    """A round: `number` counts sequential rounds (1, 2, 3), `sub` > 0 is a sub-round run after
    round `number` (round 1's odd node out).

    >>> RoundId(1, 1).label
    '1b'
    """

    number: int
    sub: int = 0

    @property
    def label(self) -> str:
        """For display and file names only: "1", "1b", "2"."""
        return str(self.number) + ("" if self.sub == 0 else chr(ord("a") + self.sub))

    def doc(self) -> dict[str, Any]:
        return {"number": self.number, "sub": self.sub, "label": self.label}


# Generic dataclasses without slots: `Outcome[PairTest](...)` sets __orig_class__, which a
# frozen slotted class rejects (CPython < 3.12).
@dataclass(frozen=True)
class Round(Generic[T]):
    """Tests that run at the same time; a unit takes part in at most one of them."""

    id: RoundId
    tests: tuple[T, ...]


@dataclass(frozen=True, slots=True)
class Sanity:
    """What a test's output says: the measured value, or why there is none to trust.

    `error` set means the tool did not run or its output was not understood (an ERROR, never
    a low number); a value may come with an error when one side measured and the other failed.
    """

    value: float | None
    error: str | None = None


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """One test after sanity and performance: passed only when sane and above the floor.

    `lost`: (node, why) for each node that could not run its side (unreachable, connection
    lost). Such a test is that node's error and judges none of the test's other nodes.
    """

    test: T
    round: RoundId
    passed: bool
    value: float | None = None
    error: str | None = None
    lost: tuple[tuple[str, str], ...] = ()

    def lost_why(self, node: str) -> str | None:
        """Why `node` could not run its side of this test, if it could not."""
        return next((why for n, why in self.lost if n == node), None)


class Localizer(Protocol[T]):
    """Plans rounds from what was learnt: `first_rounds`, then `add` every outcome of a round,
    then `next_round` (None: nothing left to learn). Pure: no I/O."""

    def first_rounds(self) -> Sequence[Round[T]]: ...

    def add(self, outcome: Outcome[T]) -> None: ...

    def next_round(self) -> Round[T] | None: ...
