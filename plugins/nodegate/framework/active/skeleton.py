"""The active-stage skeleton: plan -> run -> sanity -> performance -> localize -> cleanup.

    plan         the localizer's rounds; each written to <run>/<stage>/plan-<campaign>.json
                 before it runs
    run          every test of a round at once, each as soon as the hardware it holds is free
                 (the campaign's `resources`: a node's rail, a node) and its processes fit
                 under --max-active (`active.scheduler`); remote processes only through the
                 ledger; the plan file says the concurrency planned and used
    sanity       could every node run its side, and is every node's connection still up (else
                 the outcome names the nodes `lost`: their error, no judgement on the others,
                 the localizer plans again without them); did the tool run, is its output
                 understood: a value or a tool error (ERROR)
    performance  a sane value against the campaign's floor (below it: FAIL)
    localize     outcomes feed the localizer, which plans the next round or stops
    cleanup      always (errors and interrupts included): kill by PID what the ledger holds
                 that never ended; then, on a completed run, the stray check on every node

An interrupt (task cancelled, KeyboardInterrupt) still kills what the stage started, then
re-raises. A stage is an `ActiveStage` whose nodes of one profile form one `Campaign`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Generic, TypeVar, final

from nodegate.core.values import Verdict
from nodegate.core.words import plural
from nodegate.framework.active.campaign import Campaign, Execution, Side, spawn_failure
from nodegate.framework.active.evidence import ActiveEvidence
from nodegate.framework.active.judge import cleanup_verdicts
from nodegate.framework.active.ledger import ProcessLedger, SpawnScope
from nodegate.framework.active.rounds import Outcome, Round
from nodegate.framework.active.scheduler import Claim, Scheduler, Usage, first_wave
from nodegate.framework.stage import Stage, StageContext, StageOptions
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.transport.evidence import EvidenceWriter
from nodegate.transport.process import SpawnError

T = TypeVar("T")


class ActiveStage(Stage, Generic[T]):
    """A stage that puts traffic between nodes. Supplies `campaign_for` (the campaign of one
    profile's nodes), `tool` and `cleanup_check`, and `unfit` where a profile needs more than
    the stage's section; the skeleton plans and runs the rest."""

    active = True
    tool: str = "process"  # names the cleanup check's component and messages
    cleanup_check: str = ""  # id of the check judged by the stray check

    def plan(self, ctx: StageContext) -> tuple[list[Campaign[T]], list[Verdict]]:
        """The nodes of each profile form one campaign (`campaign_for`); a node whose profile
        has no section of the stage's name, or that `unfit` turns away, is every check ERROR."""
        verdicts: list[Verdict] = []
        groups: dict[str, list[Node]] = {}
        for n in ctx.nodes:
            prof = ctx.profiles[n.name]
            why = self.unfit(prof) if self.has_section(prof) else f"no {self.name!r} section"
            if why:
                verdicts += self.unjudged(n.name, f"profile {prof.name}: {why}")
                continue
            groups.setdefault(prof.name, []).append(n)
        campaigns: list[Campaign[T]] = []
        for name, members in groups.items():
            got = self.campaign_for(name, ctx.profiles[members[0].name], members, ctx)
            if isinstance(got, list):
                verdicts += got
            else:
                campaigns.append(got)
        return campaigns, verdicts

    def unfit(self, profile: Profile) -> str | None:
        """Why nodes of a profile with the stage's section still cannot take part (None: they
        can)."""
        return None

    def campaign_for(
        self, name: str, profile: Profile, nodes: list[Node], ctx: StageContext
    ) -> Campaign[T] | list[Verdict]:
        """The campaign of profile `name`'s nodes, or their verdicts when they cannot form one
        (`unjudged`)."""
        raise NotImplementedError(f"stage {self.name} plans no campaign")

    def unjudged(self, node: str, message: str) -> list[Verdict]:
        """Every check ERROR for a node that cannot take part, and why."""
        return self.checks.all_error(node, self.name, message)

    @final
    async def run(self, ctx: StageContext) -> list[Verdict]:
        ctx, verdicts = self.applicable(ctx)
        self.announce(ctx)
        campaigns, more = self.plan(ctx)
        verdicts += more
        for c in campaigns:
            verdicts += await run_campaign(self, c, ctx)
        return verdicts


async def run_campaign(stage: ActiveStage[T], c: Campaign[T], ctx: StageContext) -> list[Verdict]:
    """The pipeline for one campaign; cleanup runs whatever happens, the stray check after."""
    ledger = ProcessLedger(ctx.transport)
    writer = ctx.transport.evidence or EvidenceWriter(ctx.run_dir / "raw", ctx.transport.name)
    book: ActiveEvidence[T] = ActiveEvidence(writer, stage.name, c.key_of, ctx.transport.address)
    out_dir = ctx.run_dir / stage.name
    out_dir.mkdir(parents=True, exist_ok=True)
    opts = ctx.options
    try:
        await localize(stage.name, c, ledger, book, out_dir, opts)
        verdicts = c.verdicts(book)
        doc = c.localization_doc()
        if doc is not None:
            write_json(out_dir / f"localization-{c.name}.json", doc)
    finally:
        killed = await cleanup(ledger)
        if killed and opts.log is not None:
            opts.log(f"{stage.name} {c.name}: cleanup killed {killed} process(es) by PID")
    strays = await ledger.stray_check(stage.name, c.nodes)
    return verdicts + cleanup_verdicts(stage.cleanup_check, stage.tool, c.nodes, strays)


async def localize(
    stage: str,
    c: Campaign[T],
    ledger: ProcessLedger,
    book: ActiveEvidence[T],
    out_dir: Path,
    opts: StageOptions,
) -> None:
    """Rounds until the localizer stops: plan, run, sanity, performance, localize."""
    pending = list(c.localizer.first_rounds())
    planned: list[dict[str, Any]] = []
    note = c.plan_note()
    if note is not None and opts.log is not None:
        opts.log(f"{stage} {c.name}: {note}")
    while pending:
        rnd = pending.pop(0)
        claims = [Claim(c.resources(t), c.channels(t)) for t in rnd.tests]
        plan_round(c, rnd, planned, out_dir, concurrency_doc(claims, opts.max_active))
        if opts.log is not None:
            opts.log(f"{stage} {c.name}: round {rnd.id.label}: {plural(len(rnd.tests), 'test')}")
        done = None
        if opts.progress is not None:
            label = f"{c.name}: round {rnd.id.label}"
            opts.progress.round_started(stage, label, len(rnd.tests))
            done = functools.partial(opts.progress.test_done, stage, label)
        t0 = time.monotonic()
        results, used = await run_round(c, rnd, ledger, opts.max_active, done)
        planned[-1]["concurrency"]["used"] = {
            "tests": used.peak_tests,
            "channels": used.peak_channels,
            "wall_s": round(time.monotonic() - t0, 3),
        }
        write_plan(c, planned, out_dir)
        for test, execution in results:
            book.add(rnd.id, test, c.doc_of(test), execution)
            c.localizer.add(judge(c, rnd, test, execution))
        await book.flush()
        if not pending:
            nxt = c.localizer.next_round()
            if nxt is not None:
                pending.append(nxt)


def concurrency_doc(claims: list[Claim], max_active: int) -> dict[str, Any]:
    """What the plan says of a round's concurrency before it runs: the channel limit, the
    channels its tests declare in all, and how many tests and channels start at once."""
    start = first_wave(claims, max_active)
    return {
        "max_active": max_active,
        "channels": sum(c.channels for c in claims),
        "at_start": {"tests": start.peak_tests, "channels": start.peak_channels},
    }


def plan_round(
    c: Campaign[T],
    rnd: Round[T],
    planned: list[dict[str, Any]],
    out_dir: Path,
    concurrency: dict[str, Any],
) -> None:
    """Write the plan so far, this round included, before the round runs."""
    planned.append(
        {
            "round": rnd.id.label,
            "id": rnd.id.doc(),
            "concurrency": concurrency,
            "tests": [c.doc_of(t) for t in rnd.tests],
        }
    )
    write_plan(c, planned, out_dir)


def write_plan(c: Campaign[T], planned: list[dict[str, Any]], out_dir: Path) -> None:
    write_json(out_dir / f"plan-{c.name}.json", {**c.plan_header(), "rounds": planned})


async def run_round(
    c: Campaign[T],
    rnd: Round[T],
    ledger: ProcessLedger,
    max_active: int,
    on_done: Callable[[], None] | None = None,
) -> tuple[list[tuple[T, Execution]], Usage]:
    """Every test of the round, each once its resources are free and its channels fit under
    `max_active` (`active.scheduler`); results in plan order, and what the round used."""
    sched = Scheduler(max_active)

    async def one(i: int, t: T) -> tuple[T, Execution]:
        claim = Claim(c.resources(t), c.channels(t))
        async with sched.hold(i, claim):
            scope = SpawnScope(ledger, claim.channels)
            try:
                run = await c.execute(t, scope)
            except SpawnError as exc:
                # A campaign that lets a spawn failure through: still that node's error
                # in this test, never the stage's.
                why = spawn_failure(exc)
                run = Execution((Side(exc.node, "spawn", "", None, f"not started: {why}", why),))
        # Nodes with a side of their own ran (or failed to start) their own process:
        # only the others (a launcher's ranks) are checked for the test's tags.
        own = {s.node for s in run.sides}
        others = [n for n in c.nodes_of(t) if n not in own]
        scope.watch_on(others)
        run = with_dropped(run, others, ledger.transport.lost_why)
        if on_done is not None:
            on_done()
        return t, run

    results = await asyncio.gather(*(one(i, t) for i, t in enumerate(rnd.tests)))
    return list(results), sched.usage


def with_dropped(
    run: Execution, others: Sequence[str], lost_why: Callable[[str], str | None]
) -> Execution:
    """The test's nodes that ran no side of their own (a launcher's ranks) and whose connection
    was lost by the time it ended are lost in it, as a side's node would be: their error, no
    judgement of the test's other nodes (the localizer plans again without them)."""
    dropped = tuple((n, why) for n in others if (why := lost_why(n)) is not None)
    return replace(run, dropped=run.dropped + dropped) if dropped else run


def judge(c: Campaign[T], rnd: Round[T], test: T, run: Execution) -> Outcome[T]:
    """A node that could not run its side (unreachable, connection lost) first: its error,
    nothing measured; then sanity (a tool error is never a low number), then performance."""
    lost = run.lost()
    if lost:
        return Outcome(test, rnd.id, False, None, "; ".join(w for _, w in lost), lost)
    sane = c.sanity(test, run)
    passed = sane.error is None and c.passes(test, sane.value)
    return Outcome(test, rnd.id, passed, sane.value, sane.error)


async def cleanup(ledger: ProcessLedger) -> int:
    """Kill by PID what never ended; shielded, so a second cancel cannot stop the kills."""
    return await asyncio.shield(asyncio.ensure_future(ledger.kill_survivors()))


def write_json(path: Path, doc: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
