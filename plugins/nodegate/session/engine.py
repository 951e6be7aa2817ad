"""The run: stages in order over the selected nodes, on one event loop that holds the fleet's
connections for the whole run. Runs once on the pytest controller; xdist workers only read.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from nodegate.admission.remediation import RemediationTable, table_of
from nodegate.admission.waivers import WaiverSet
from nodegate.core.results import RunResult
from nodegate.core.values import Reach, Status, Verdict
from nodegate.framework.stage import Stage, StageContext, StageOptions
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.reach import SESSION_CHECK
from nodegate.stages.registry import STAGES
from nodegate.transport.base import Transport

T = TypeVar("T")
CANCEL_GRACE_S = 60.0  # how long an interrupted run may take to clean up
STOP_GRACE_S = 5.0  # how long tasks still pending when the loop stops may take to end


class LoopThread:
    """An asyncio loop on a daemon thread; sync code submits coroutines to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="nodegate-loop", daemon=True
        )
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        finished = threading.Event()

        async def guarded() -> T:
            try:
                return await coro
            finally:
                finished.set()

        fut: Future[T] = asyncio.run_coroutine_threadsafe(guarded(), self.loop)
        try:
            return fut.result(timeout)
        except BaseException:
            # Interrupted (Ctrl-C) or out of time: cancel the coroutine, so that its cleanup
            # runs (an active stage kills what it started), and give the cleanup a while.
            fut.cancel()
            finished.wait(CANCEL_GRACE_S)
            raise

    def stop(self) -> None:
        """Cancel what is still pending, let it finish (bounded), then stop and close the loop:
        a task left pending on a closed loop is reported at exit ("Task was destroyed")."""
        if self.loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(_cancel_pending(), self.loop)
            with contextlib.suppress(Exception):  # its own wait is bounded; this is a backstop
                fut.result(STOP_GRACE_S + 1)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
        if not self.loop.is_running():
            self.loop.close()


async def _cancel_pending() -> None:
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=STOP_GRACE_S)


class Engine:
    """Runs the selected stages for the selected nodes and checks."""

    def __init__(
        self,
        nodes: Sequence[Node],
        profiles: Mapping[str, Profile],
        transport: Transport,
        run_dir: Path,
        stages: Sequence[Stage] = STAGES,
        options: StageOptions | None = None,
        waivers: WaiverSet | None = None,
    ) -> None:
        self.nodes = list(nodes)
        self.profiles = profiles
        self.transport = transport
        self.run_dir = run_dir
        self.stages = list(stages)
        self.options = options or StageOptions()
        self.waivers = waivers or WaiverSet()  # a waived FAIL/ERROR goes on like a pass
        self.result = RunResult()  # filled as the stages end: what an interrupted run measured
        self._tables: dict[str, RemediationTable] = {}

    def classified(self, v: Verdict) -> Verdict:
        """`v` with its remediation class from its node's profile (every verdict has one)."""
        prof = self.profiles.get(v.node)
        if prof is None:
            return RemediationTable().classify(v)
        if prof.name not in self._tables:
            self._tables[prof.name] = table_of(prof.data)
        return self._tables[prof.name].classify(v)

    def _skips_after_failure(self, node: str) -> bool:
        """Whether the node's profile takes a failed node out of later passive stages too
        (`session.after_failure: skip`, e.g. at --level quick); default: they still read it."""
        prof = self.profiles.get(node)
        section = prof.data.get("session") if prof is not None else None
        return isinstance(section, Mapping) and section.get("after_failure") == "skip"

    def blocks(self, v: Verdict) -> bool:
        """Whether `v` keeps its node out of later active stages: not a pass, and no active
        waiver covers it (a waived node goes on like a passing one, so that it can be admitted)."""
        if v.status is Status.PASS:
            return False
        return self.waivers.match(v.check, v.node, v.component, v.status.value) is None

    async def run(self, selected: Iterable[tuple[str, str]]) -> RunResult:
        """`selected`: (check id, node) pairs; a stage runs for the nodes it has items for."""
        want: dict[str, set[str]] = {}
        for check, node in selected:
            want.setdefault(check, set()).add(node)
        result = self.result = RunResult()
        blocked: dict[str, str] = {}  # node -> why it is out of active stages
        for stage in self.stages:
            stage_nodes = set().union(*(want.get(c.id, set()) for c in stage.checks))
            if not stage_nodes:
                continue
            part: list[Node] = []
            for n in self.nodes:
                if n.name not in stage_nodes:
                    continue
                if stage.active:
                    why = blocked.get(n.name)
                elif self._skips_after_failure(n.name):
                    why = _unreachable(result, n.name) or blocked.get(n.name)
                else:
                    why = _unreachable(result, n.name)
                if why:
                    for c in stage.checks:
                        skip = Verdict(c.id, n.name, Status.SKIP, message=f"not run: {why}")
                        result.add(self.classified(skip))
                else:
                    part.append(n)
            t0 = time.monotonic()
            progress = self.options.progress
            if part:
                ctx = StageContext(
                    nodes=part,
                    profiles=self.profiles,
                    transport=self.transport,
                    run_dir=self.run_dir,
                    options=self.options,
                    cleared=frozenset(n.name for n in part if n.name not in blocked),
                )
                try:
                    verdicts = await stage.run(ctx)
                except asyncio.CancelledError:
                    result.interrupted = stage.name  # the stage has cleaned up: say where
                    raise
                except Exception as exc:  # noqa: BLE001 - a stage bug must not lose the run
                    why = f"stage {stage.name} failed: {type(exc).__name__}: {exc}"
                    verdicts = [
                        v for n in part for v in stage.checks.all_error(n.name, "nodegate", why)
                    ]
                for v in verdicts:
                    result.add(self.classified(v))
                if progress is not None:
                    failed = {v.node for v in verdicts if v.status is not Status.PASS}
                    progress.stage_finished(stage.name, len(failed))
            result.timings[stage.name] = round(time.monotonic() - t0, 3)
            result.stages_run.append(stage.name)
            for (_check, node), vs in result.verdicts.items():
                bad = [v for v in vs if self.blocks(v)]
                if bad and node not in blocked:
                    blocked[node] = f"{bad[0].check} {bad[0].status.value} in an earlier stage"
        result.connections = getattr(self.transport, "connections_opened", 0)
        return result


def _unreachable(result: RunResult, node: str) -> str | None:
    """A node whose SSH check failed is out of every later stage (one the scheduler holds,
    with the reason it is not tested)."""
    for v in result.for_item(SESSION_CHECK.id, node):
        if v.observed == Reach.HELD.value:
            return v.message
        if v.status is not Status.PASS:
            return f"node not reachable ({v.observed})"
    return None
