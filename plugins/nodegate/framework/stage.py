"""Stage framework: a stage plans commands, gathers them (one round trip per node), judges.

A new stage is a module with a Stage subclass, its parsers, its simulated tools and its profile
keys; the engine runs stages in order and hands each the nodes still in.
"""

from __future__ import annotations

import abc
import asyncio
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar, final

from nodegate.core.checks import CheckTable
from nodegate.core.errors import ParseError
from nodegate.core.settings import DEFAULT_MAX_ACTIVE
from nodegate.core.values import CommandResult, CommandSpec, NodeOutcome, Reach, Status, Verdict
from nodegate.framework.pool import Judged, JudgePool, judge_one
from nodegate.framework.progress import ProgressSink
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.transport.base import Transport
from nodegate.transport.script import StageScript

T = TypeVar("T")
F = TypeVar("F")
P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class StageOptions:
    """The run's options a stage reads: the channel limit (active stages' remote processes;
    passive node sessions are bounded by the transport's own fan-out) and where to show
    progress lines."""

    max_active: int = DEFAULT_MAX_ACTIVE
    log: Callable[[str], None] | None = None  # active stages show their plan as they go
    progress: ProgressSink | None = None  # stages, nodes and rounds as they go (framework.progress)
    fabric_snapshot: str | None = None  # the inventory's golden fabric snapshot (fabric stage)
    judge_pool: JudgePool | None = None  # --jobs N > 1: passive stages parse+judge there


@dataclass
class StageContext:
    """What a stage gets to run with."""

    nodes: Sequence[Node]  # nodes taking part, in inventory order
    profiles: Mapping[str, Profile]  # node -> profile
    transport: Transport
    run_dir: Path
    options: StageOptions = field(default_factory=StageOptions)
    # Nodes that passed every earlier stage of this run (the fabric stage picks its observers
    # among them); None: not known (every node counts as cleared).
    cleared: frozenset[str] | None = None


class Stage(abc.ABC):
    """A pipeline stage: its name (also its profile section's), its check table and `run`."""

    name: str = "abstract"
    checks: CheckTable[Any, Any] = CheckTable("abstract", ())
    # Active stages (traffic between nodes) take only nodes that passed every earlier stage.
    active: bool = False
    # What a SKU whose section is null has none of (roce: "RoCE rails"): every check PASSes
    # as not applicable. None: a null section is a missing one, every check ERROR.
    not_applicable: str | None = None

    @abc.abstractmethod
    async def run(self, ctx: StageContext) -> list[Verdict]:
        """Gather and judge; one verdict per (check, node) at least, for every node in ctx."""

    def has_section(self, profile: Profile) -> bool:
        """Whether the profile has the stage's section (missing or null: it has not)."""
        return isinstance(profile.data.get(self.name), Mapping)

    def applicable(self, ctx: StageContext) -> tuple[StageContext, list[Verdict]]:
        """ctx narrowed to the nodes the stage applies to; every check PASS for the others
        (their profile's section is null and the stage says what that means)."""
        if self.not_applicable is None:
            return ctx, []
        verdicts: list[Verdict] = []
        rest: list[Node] = []
        for n in ctx.nodes:
            prof = ctx.profiles[n.name]
            if self.name not in prof.data or prof.data[self.name] is not None:
                rest.append(n)
                continue
            note = f"profile {prof.name} has no {self.not_applicable} ({self.name}: null)"
            verdicts += [
                Verdict(c.id, n.name, Status.PASS, self.not_applicable,
                        expected="not applicable", message=note)
                for c in self.checks
            ]  # fmt: skip
        return (ctx if len(rest) == len(ctx.nodes) else replace(ctx, nodes=rest)), verdicts

    def announce(self, ctx: StageContext, script_deadline_s: float | None = None) -> None:
        """Tell the progress display the stage has started on ctx's nodes."""
        if ctx.options.progress is not None and ctx.nodes:
            ctx.options.progress.stage_started(
                self.name, len(ctx.nodes), active=self.active, script_deadline_s=script_deadline_s
            )


class PassiveStage(Stage, Generic[F, P]):
    """Reads node state: one script per node, facts built by parsers, judged by the check table.

    A passive stage supplies `commands`, `profile_of` (its typed profile section), `facts`
    (one node's outcome -> frozen facts, parsing only through nodegate.parsers) and `checks`
    (its CheckTable); `run` and `evaluate` are the same for every stage: a node whose profile
    has no section of the stage's name is every check ERROR (fail closed), a null one is
    `not_applicable` where the stage says so.
    """

    @abc.abstractmethod
    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]: ...

    def plan(self, ctx: StageContext) -> dict[str, list[CommandSpec]]:
        """Each node's commands. A stage whose commands depend on the other nodes (the fabric
        stage's observers: one node per subnet runs the fabric queries) overrides this."""
        return {n.name: self.commands(n, ctx.profiles[n.name]) for n in ctx.nodes}

    def profile_of(self, profile: Profile) -> P:
        """The stage's typed profile section (built once per profile)."""
        raise NotImplementedError(f"stage {self.name} has no typed profile")

    def facts(self, outcome: NodeOutcome, profile: P) -> F:
        """One reachable node's outcome as the stage's frozen facts."""
        raise NotImplementedError(f"stage {self.name} builds no facts")

    def fleet_facts(self, facts: F) -> F:
        """What of a node's facts the stage's fleet-scope checks read: kept, once its
        node-scope checks have judged it, until the stage's end (every node's, so at 10,000
        nodes a stage keeps 10,000 of these). By default all of them; a stage whose fleet
        checks read less returns its facts with the rest left out."""
        return facts

    def unreachable(self, outcome: NodeOutcome) -> list[Verdict]:
        """Verdicts for a node whose session never ran (every check ERROR)."""
        return unreachable_verdicts(self, outcome, first_check_fails=False)

    def evaluate(self, outcomes: Mapping[str, NodeOutcome], ctx: StageContext) -> list[Verdict]:
        judge = NodeJudge(self, ctx)
        for node in ctx.nodes:
            judge.add(outcomes[node.name])
        return judge.verdicts()

    @final
    async def run(self, ctx: StageContext) -> list[Verdict]:
        ctx, verdicts = self.applicable(ctx)
        ready: list[Node] = []
        for n in ctx.nodes:
            prof = ctx.profiles[n.name]
            if self.has_section(prof):
                ready.append(n)
                continue
            # Fail closed: nothing to judge against is an error, not a pass.
            why = f"profile {prof.name} ({prof.source}) has no {self.name!r} section"
            verdicts += self.checks.all_error(n.name, "profile", why)
        if not ready:
            self.announce(ctx)
        if ready:
            plan = self.plan(replace(ctx, nodes=ready))
            self.announce(ctx, max(StageScript("", "", tuple(s)).deadline_s for s in plan.values()))
            # Each node judged as its outcome comes in: its output is parsed while the others
            # still answer, and only its facts are kept (not ~400 KB of text per node).
            judge = NodeJudge(self, replace(ctx, nodes=ready), ctx.options.judge_pool)
            try:
                await ctx.transport.stream_stage(self.name, plan, judge.add)
                await judge.settled()
            finally:
                judge.cancel()  # cancelled (Ctrl-C): what the workers still hold is dropped
            verdicts += judge.verdicts()
        return verdicts


# How many nodes per --jobs worker may be sent and not judged yet: enough that a worker never
# waits for the next one, few enough that the raw outputs queued stay a few MB.
IN_FLIGHT_PER_WORKER = 8


class NodeJudge(Generic[F, P]):
    """A passive stage's judging, one node at a time as outcomes arrive; `verdicts()` in node
    order (the stage's nodes), then the fleet-scope checks over every node's facts. With a
    `pool` (`--jobs N`), a reachable node's outcome is judged in a worker process (here while
    the workers are behind) and `settled()` waits for them; the verdicts are the same
    (`nodegate.framework.pool`)."""

    def __init__(
        self, stage: PassiveStage[F, P], ctx: StageContext, pool: JudgePool | None = None
    ) -> None:
        self.stage = stage
        self.table: CheckTable[F, P] = stage.checks
        self.ctx = ctx
        self.by_node: dict[str, list[Verdict]] = {}
        self.facts: dict[str, F] = {}
        self.profs: dict[str, P] = {}
        # A stage whose commands depend on the other nodes (`plan` overridden: the fabric
        # stage's observers) keeps what it planned for its judging: judged here, where it is.
        own_plan = type(stage).plan is not PassiveStage.plan
        self.pool = pool if pool is not None and pool.takes(stage) and not own_plan else None
        self.pending: dict[str, Future[Judged]] = {}
        self._in_flight: deque[Future[Judged]] = deque()  # sent, in the order sent

    def add(self, out: NodeOutcome) -> None:
        """Judge one node's outcome, here or in the pool (never raises: a stage bug is that
        node's ERROR). A node the workers would only queue (IN_FLIGHT_PER_WORKER per worker
        already sent and not judged) is judged here: each one queued holds its raw output
        (~400 KB on an 8-GPU node), and a replay or a fast fleet delivers outcomes faster
        than the workers judge them (10,000 queued: 4 GB)."""
        profile = self.ctx.profiles[out.node]
        if self.pool is not None and out.reach is Reach.OK and self._room(self.pool.jobs):
            try:
                fut = self.pool.submit(self.stage.name, profile, out)
            except Exception:  # noqa: BLE001 - a pool that cannot take it: judged here
                pass
            else:
                self.pending[out.node] = fut
                self._in_flight.append(fut)
                return
        self._take(out.node, judge_one(self.stage, profile, out))

    def _room(self, jobs: int) -> bool:
        """Whether fewer than IN_FLIGHT_PER_WORKER nodes per worker are sent and not judged
        (workers judge in about the order sent: the judged ones are let go from the front)."""
        while self._in_flight and self._in_flight[0].done():
            self._in_flight.popleft()
        return len(self._in_flight) < jobs * IN_FLIGHT_PER_WORKER

    def _take(self, node: str, j: Judged) -> None:
        self.by_node[node] = j.verdicts
        if j.judged and self.table.has_fleet:  # only a fleet-scope check reads them later
            self.facts[node], self.profs[node] = j.facts, j.prof
        else:
            self.facts.pop(node, None)

    async def settled(self) -> None:
        """Wait for the nodes the pool judges; a worker lost is its nodes' ERROR."""
        for node, fut in list(self.pending.items()):
            try:
                j = await asyncio.wrap_future(fut)
            except Exception as exc:  # noqa: BLE001 - fail closed, never a pass
                why = f"stage {self.stage.name} failed: parse worker: {type(exc).__name__}: {exc}"
                j = Judged(self.table.all_error(node, "nodegate", why))
            del self.pending[node]
            if j.judged:  # the typed profile, built here once per profile (not sent back)
                j = replace(j, prof=self.stage.profile_of(self.ctx.profiles[node]))
            self._take(node, j)

    def cancel(self) -> None:
        for fut in self.pending.values():
            fut.cancel()

    def verdicts(self) -> list[Verdict]:
        if self.pending:
            raise RuntimeError(f"{len(self.pending)} nodes still being judged: settled() first")
        order = [n.name for n in self.ctx.nodes]
        missing = [n for n in order if n not in self.by_node]
        if missing:  # a transport that lost a node: fail closed, never a pass
            raise RuntimeError(f"no outcome for {len(missing)} nodes (first {missing[0]})")
        out = [v for n in order for v in self.by_node[n]]
        facts = {n: self.facts[n] for n in order if n in self.facts}
        profs = {n: self.profs[n] for n in facts}
        return out + self.table.judge_fleet(facts, profs)


class OutcomeReader:
    """Reads one node's command outcomes through parsers; failures are kept as reasons (which
    become ERROR verdicts), never passes."""

    def __init__(self, stage: str, outcome: NodeOutcome) -> None:
        self.stage = stage
        self.outcome = outcome
        self.errors: dict[str, str] = {}

    def evidence(self, *cmd_ids: str) -> tuple[str, ...]:
        out = []
        for c in cmd_ids:
            r = self.outcome.results.get(c)
            if r is not None and r.evidence:
                out.append(r.evidence)
        return tuple(out)

    def result(self, cmd_id: str) -> CommandResult | None:
        return self.outcome.results.get(cmd_id)

    def parse(
        self, cmd_id: str, parser: Callable[[str], T], *, absent_rcs: tuple[int, ...] = ()
    ) -> T | None:
        """Parsed output of `cmd_id`; None with a reason in `errors` when it is not usable.

        `absent_rcs`: exit codes meaning "not installed / not present" (recorded as absent,
        which the check judges against the profile's `required`).
        """
        r = self.outcome.results.get(cmd_id)
        if r is None:
            self.errors[cmd_id] = f"command {cmd_id} did not run" + (
                f" ({self.outcome.detail})" if self.outcome.detail else ""
            )
            return None
        if r.timed_out:
            self.errors[cmd_id] = f"`{r.cmd}` timed out" + (
                f" after {r.duration_s:.1f} s" if r.duration_s else ""
            )
            return None
        if r.truncated:
            self.errors[cmd_id] = f"output of `{r.cmd}` not usable: {r.truncated}"
            return None
        if r.rc in absent_rcs:
            self.errors[cmd_id] = f"absent: `{r.cmd}` exited {r.rc}: {_first_line(r)}"
            return None
        if r.rc != 0:
            self.errors[cmd_id] = f"`{r.cmd}` exited {r.rc}: {_first_line(r)}"
            return None
        try:
            return parser(r.stdout)
        except ParseError as exc:
            self.errors[cmd_id] = f"unrecognized output of `{r.cmd}`: {exc.reason}"
            return None
        except Exception as exc:  # noqa: BLE001 - a parser bug is an ERROR for this node only
            self.errors[cmd_id] = f"parser failed on `{r.cmd}`: {type(exc).__name__}: {exc}"
            return None

    def absent(self, cmd_id: str) -> bool:
        return self.errors.get(cmd_id, "").startswith("absent:")


def _first_line(r: CommandResult) -> str:
    """What a failed command said: stderr's first line, else stdout's (nvidia-smi prints
    "Failed to initialize NVML: ..." on stdout)."""
    for text in (r.stderr, r.stdout):  # a failed command's output can be MiBs: its head only
        for line in text[:_HEAD_CHARS].splitlines():
            if line.strip():
                return line.strip()[:200]
    return "(no output)"


_HEAD_CHARS = 4096  # where a failed command's first meaningful line is looked for


# What the operator does about a node whose session never ran, by how it failed.
REMEDIATION = {
    Reach.UNREACHABLE: "check the node's power, network and sshd; then requalify",
    Reach.TIMEOUT: "check the node's power, network and sshd; then requalify",
    Reach.AUTH_FAILED: "check the SSH user and key the inventory gives for the node",
    Reach.HOSTKEY_UNKNOWN: (
        "verify the node's host key out of band and add it to known_hosts "
        "(or run once with --accept-new-hostkeys)"
    ),
    Reach.HOSTKEY_CHANGED: (
        "find out why the node's host key changed (re-imaged, or someone in the path); "
        "verify the new key, then replace its known_hosts entry (ssh-keygen -R)"
    ),
    Reach.ERROR: "read the reason; fix the inventory or ssh_config entry for the node",
    Reach.OK: "check the node's power, network and sshd; then requalify",
    Reach.HELD: (
        "the scheduler holds the node: requalify it once SSH reaches it (drained nodes run "
        "over SSH), or after it is resumed"
    ),
}
# Its remediation class (`nodegate.admission.remediation`): a dead node is rebooted first.
REMEDIATION_CLASS = {
    Reach.UNREACHABLE: "reboot",
    Reach.TIMEOUT: "reboot",
    Reach.AUTH_FAILED: "fix_config",
    Reach.HOSTKEY_UNKNOWN: "fix_config",
    Reach.HOSTKEY_CHANGED: "fix_config",
    Reach.ERROR: "fix_config",
    Reach.OK: "reboot",
    Reach.HELD: "retest",
}


def unreachable_verdicts(
    stage: Stage, outcome: NodeOutcome, *, first_check_fails: bool
) -> list[Verdict]:
    """A node whose session never ran: every check ERROR (the reach check itself FAIL); a
    node the scheduler holds (`Reach.HELD`): every check SKIP, saying who holds it and why
    (the gate makes it not qualified: not tested, not rejected)."""
    if outcome.reach is Reach.HELD:
        return [
            Verdict(
                check=c.id,
                node=outcome.node,
                status=Status.SKIP,
                component="scheduler",
                observed=Reach.HELD.value,
                message=outcome.detail,
                remediation=REMEDIATION[Reach.HELD] if i == 0 else None,
                remediation_class=REMEDIATION_CLASS[Reach.HELD],
            )  # fmt: skip
            for i, c in enumerate(stage.checks)
        ]
    why = f"{outcome.reach.value}: {outcome.detail}".rstrip(": ")
    out = []
    for i, c in enumerate(stage.checks):
        fail = first_check_fails and i == 0
        out.append(
            Verdict(
                check=c.id,
                node=outcome.node,
                status=Status.FAIL if fail else Status.ERROR,
                component="ssh",
                observed=outcome.reach.value,
                expected=Reach.OK.value if fail else None,
                message=why if fail else f"not judged: node session failed ({why})",
                remediation=REMEDIATION[outcome.reach] if fail else None,
                remediation_class=REMEDIATION_CLASS[outcome.reach] if fail else None,
            )
        )
    return out
