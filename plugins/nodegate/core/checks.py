"""Checks: a stage's one table of what it judges. A check id is written once, in its stage's
table; a check's function receives its `Check` and builds its verdicts from it
(`nodegate.core.verdicts`), and the suite items (`suites/test_<stage>.py`) are derived from the
tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from nodegate.core.values import Status, Verdict

F = TypeVar("F")  # what a check reads: a stage's facts of one node, or of the whole fleet
P = TypeVar("P")  # the stage's typed profile section

Scope = Literal["node", "fleet", "pipeline"]
# What a check's number is of: the node's own part, or a job of several nodes (the whole-set
# all-reduce): a job's number is the same on every member and belongs to the job (its verdicts
# name it: `Verdict.job`), compared once per job, never as each member's own.
Measures = Literal["node", "job"]


@dataclass(frozen=True, slots=True)
class Chart:
    """How report.html draws a check's numbers: `order` among the distributions shown first,
    `by_rail`: one distribution per rail (the rail named in the component, `(rail 3)`)."""

    order: int
    by_rail: bool = False


@dataclass(frozen=True, slots=True)
class Check(Generic[F, P]):
    """One check: stable dotted id (API for waivers and history), its pytest test name, what it
    judges, and the function that judges it.

    scope `node`: `fn(check, facts, profile) -> verdicts` for one node; `fleet`:
    `fn(check, {node: facts}, {node: profile}) -> verdicts` across the stage's nodes
    (uniformity); `pipeline`: judged by an active stage's own phases (fn is None). The function
    gets its Check so that it never writes its id again. `measures`: what its number is of
    (`Measures`).
    """

    id: str
    title: str
    fn: Callable[..., list[Verdict]] | None
    component_kind: str  # what a verdict's component names: "GPU", "HCA port", "node", ...
    test: str  # pytest function name; item ids `suites/test_<stage>.py::<test>[<node>]`
    scope: Scope = "node"
    chart: Chart | None = None  # drawn among the report's first distributions; None: after
    measures: Measures = "node"
    # The check judges the fabric's switches, cables between switches or subnet manager: a
    # fault there is a repair-list item (admission.json `infrastructure`), and the nodes behind
    # it PASS marked with it (`core.verdicts.marked`), never rejected for it.
    infrastructure: bool = False
    # The observed value is where a part is (a cable's far end: `leaf-r01-rail3 P12`): in A/B
    # mode a change since the baseline is a regression (the cable moved).
    placement: bool = False


AnyCheck = Check[Any, Any]


class CheckTable(Generic[F, P]):
    """A stage's checks in report order; ids and test names unique."""

    def __init__(self, stage: str, checks: Sequence[Check[F, P]]) -> None:
        self.stage = stage
        self.checks = tuple(checks)
        seen: set[str] = set()
        for c in self.checks:
            for key in (c.id, c.test):
                if key in seen:
                    raise ValueError(f"stage {stage}: {key} registered twice")
                seen.add(key)
            if (c.fn is None) != (c.scope == "pipeline"):
                raise ValueError(f"stage {stage}: {c.id}: fn is None exactly for scope pipeline")
            if not c.test.startswith("test_"):
                raise ValueError(f"stage {stage}: {c.id}: test name must start with test_")
        # Whether any check reads every node's facts (`judge_fleet`): a stage without one keeps
        # no node's facts once its node-scope checks have judged them.
        self.has_fleet = any(c.scope == "fleet" and c.fn is not None for c in self.checks)

    def __iter__(self) -> Iterator[Check[F, P]]:
        return iter(self.checks)

    def __len__(self) -> int:
        return len(self.checks)

    def ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.checks)

    def judge_node(self, node: str, facts: F, profile: P) -> list[Verdict]:
        """Every node-scope check on one node; a check that says nothing is an ERROR."""
        out: list[Verdict] = []
        for c in self.checks:
            if c.scope == "node" and c.fn is not None:
                out += _guarded(c, [node], c.fn(c, facts, profile))
        return out

    def judge_fleet(self, facts: dict[str, F], profiles: dict[str, P]) -> list[Verdict]:
        """Every fleet-scope check over the stage's nodes; silent nodes are ERRORs."""
        out: list[Verdict] = []
        for c in self.checks:
            if c.scope == "fleet" and c.fn is not None:
                out += _guarded(c, list(facts), c.fn(c, facts, profiles))
        return out

    def all_error(self, node: str, component: str, message: str) -> list[Verdict]:
        """One ERROR per check for a node that could not be judged at all."""
        return [Verdict(c.id, node, Status.ERROR, component, message=message) for c in self.checks]


def _guarded(check: AnyCheck, nodes: list[str], got: list[Verdict]) -> list[Verdict]:
    """Fail closed: every node the check was asked about gets at least one verdict."""
    said = {v.node for v in got}
    return got + [
        Verdict(check.id, n, Status.ERROR, "nodegate", message="check produced no verdict")
        for n in nodes
        if n not in said
    ]
