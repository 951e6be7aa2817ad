"""What an active stage supplies to the skeleton: a campaign per set of nodes tested together.

A campaign knows its units and tests (through its localizer), how to run one test over the
transport (`execute`, spawning only through the ledger), how to read what a test left
(`sanity`: value or tool error), the floor the value must reach (`performance`), and how to
turn what the localizer learnt into verdicts. The skeleton (`active.skeleton`) does the rest:
rounds, concurrency, plan files, evidence, cleanup.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from nodegate.core.thresholds import Threshold
from nodegate.core.values import Part, Reach, Verdict
from nodegate.framework.active.rounds import Localizer, Outcome, Sanity
from nodegate.transport.process import ProcessResult, RemoteProcess, SpawnError

T = TypeVar("T")


class Spawner(Protocol):
    """How a test starts remote processes: the stage's ledger (`active.ledger`)."""

    async def spawn(
        self, node: str, command: Sequence[Part], timeout_s: float
    ) -> RemoteProcess: ...


@dataclass(frozen=True, slots=True)
class Side:
    """One process of a test, or one that never started (`result` None, `detail` says why).

    `lost` (or its result's): the node could not run its side (unreachable, connection lost),
    which is that node's error and says nothing about the test's other nodes.
    """

    node: str
    role: str  # "server", "client", "launcher", ...
    cmd: str
    result: ProcessResult | None = None
    detail: str = ""
    lost: str | None = None

    @property
    def lost_why(self) -> str | None:
        """Why the node could not run this side, if it could not."""
        return self.lost or (self.result.lost if self.result is not None else None)


@dataclass(frozen=True, slots=True)
class Execution:
    """What running one test left: every side (the evidence) and, when orchestration failed
    before anything could be measured (a server that never listened), why."""

    sides: tuple[Side, ...]
    error: str | None = None
    # (node, why): nodes of the test with no side of their own (a launcher's ranks) whose
    # connection the transport lost by the time the test ended (the skeleton fills it in)
    dropped: tuple[tuple[str, str], ...] = ()

    def lost(self) -> tuple[tuple[str, str], ...]:
        """(node, why) for each node that could not run its side, or whose connection was
        lost under the test, first reason per node."""
        out: dict[str, str] = {}
        for s in self.sides:
            why = s.lost_why
            if why is not None:
                out.setdefault(s.node, why)
        for node, why in self.dropped:
            out.setdefault(node, why)
        return tuple(out.items())


# Spawn failures of a node that was never connected: the node is unreachable.
_UNREACHABLE = {r.value for r in Reach} - {Reach.OK.value, Reach.ERROR.value}


def spawn_failure(exc: SpawnError) -> str:
    """Why a node could not start its side, as its verdict says it.

    >>> spawn_failure(SpawnError("gpu003", "auth_failed", "authentication refused by gpu003"))
    'unreachable: authentication refused by gpu003'
    """
    return f"unreachable: {exc.detail}" if exc.reach in _UNREACHABLE else exc.detail


class EvidenceRefs(Protocol[T]):
    """Where the raw output of an outcome is: `raw/<node>/<stage>.json#<command id>`."""

    def refs(self, outcome: Outcome[T], node: str) -> tuple[str, ...]: ...


class Campaign(abc.ABC, Generic[T]):
    """One active run over a set of nodes (ib_pairs: the nodes of one profile)."""

    name: str  # names the run directory's files: <stage>/plan-<name>.json
    nodes: tuple[str, ...]  # every node taking part (the cleanup check runs on each)
    localizer: Localizer[T]
    performance: Threshold  # the floor a sane value must reach

    def plan_header(self) -> dict[str, Any]:
        """What the plan file says before its rounds (method, addresses used, ...)."""
        return {}

    def plan_note(self) -> str | None:
        """A line for the terminal before the first round (what the plan will cost), if any."""
        return None

    @abc.abstractmethod
    def doc_of(self, test: T) -> dict[str, Any]:
        """A planned test as data, for the plan file and the evidence."""

    @abc.abstractmethod
    def nodes_of(self, test: T) -> tuple[str, ...]:
        """Every node the test holds. A node that ran none of the test's processes and has no
        side of its own (a rank started by mpirun on the launcher's behalf) is checked for the
        test's processes too: launchers must pass NODEGATE_SPAWN on (`mpirun -x
        NODEGATE_SPAWN`; srun does)."""

    @abc.abstractmethod
    def key_of(self, test: T) -> str:
        """A test's id within its round (`rail3-gpu026-to-gpu001`); ids are `r<round>-<key>`."""

    def resources(self, test: T) -> frozenset[Hashable]:
        """The hardware the test holds while it runs: two tests that share any of it never
        overlap (`active.scheduler`). Default: each of its nodes (a node takes part in one
        test at a time); ib_pairs: each of its two nodes' rail."""
        return frozenset(self.nodes_of(test))

    def channels(self, test: T) -> int:
        """How many processes the test starts through `spawn` (or as children of the
        controller): each holds a channel until it ends, and the running tests' sum stays
        under --max-active. A test that spawns more is a campaign bug (RuntimeError).
        Default: one per node."""
        return len(self.nodes_of(test))

    @abc.abstractmethod
    async def execute(self, test: T, spawn: Spawner) -> Execution:
        """Run one test; every remote process through `spawn`, every wait under a deadline."""

    @abc.abstractmethod
    def sanity(self, test: T, run: Execution) -> Sanity:
        """The measured value, or why the output cannot be trusted (a tool error, not a low
        number)."""

    def passes(self, test: T, value: float | None) -> bool:
        """Performance: whether a sane value reaches the floor (a stage whose floor depends on
        the test, or that judges more than one number, says so here)."""
        return self.performance.holds(value)

    def localization_doc(self) -> dict[str, Any] | None:
        """What localization concluded (written to <stage>/localization-<name>.json)."""
        return None

    @abc.abstractmethod
    def verdicts(self, evidence: EvidenceRefs[T]) -> list[Verdict]:
        """One verdict per unit at least, from what the localizer learnt."""
