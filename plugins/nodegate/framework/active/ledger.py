"""The process ledger of an active stage: every remote process it spawned (node, PID, command,
tag), so cleanup kills what is left by PID and the stray check sees only what the stage started.

Each spawn exports a random tag (NODEGATE_SPAWN, `transport.process.wrap`) that every process
it starts inherits. The stray check lists the processes of a node whose environment carries one
of that node's tags: the recorded PIDs and any child they left behind, even one that left their
process group, and nothing else. Matching by name (`pgrep ib_write_bw`) would see every other
run's processes on a shared machine (simulated nodes share one kernel) and fail clean runs; a
reused PID cannot carry a random tag.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence

from nodegate.core.values import CommandSpec, NodeOutcome, Part, Shell
from nodegate.transport.base import Transport
from nodegate.transport.process import SPAWN_ENV, RemoteProcess

SPAWN_WAIT_S = 15.0  # cleanup waits this long for spawns still opening their channel
KILL_WAIT_S = 30.0  # and this long for the kills
STRAY_TIMEOUT_S = 15.0
STRAY_CMD_ID = "stray"


class ProcessLedger:
    """Spawns through the transport and remembers every process, cancellation included."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._procs: list[RemoteProcess] = []
        self._pending: set[asyncio.Future[RemoteProcess]] = set()
        self._watched: dict[str, set[str]] = {}  # node -> tags spawned elsewhere for it

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        """Start `command` on `node` (raises SpawnError); recorded even if the caller is
        cancelled while the channel opens, so cleanup still finds it."""
        fut = asyncio.ensure_future(self.transport.spawn(node, command, timeout_s))
        self._pending.add(fut)
        fut.add_done_callback(self._register)
        return await asyncio.shield(fut)

    def _register(self, fut: asyncio.Future[RemoteProcess]) -> None:
        self._pending.discard(fut)
        if not fut.cancelled() and fut.exception() is None:
            self._procs.append(fut.result())

    def watch(self, nodes: Iterable[str], tags: Iterable[str]) -> None:
        """Look for `tags` on `nodes` too: processes a launcher started there for its test
        (mpirun/srun ranks inherit NODEGATE_SPAWN when the launcher passes it on)."""
        for n in nodes:
            self._watched.setdefault(n, set()).update(tags)

    async def kill_survivors(self) -> int:
        """Kill, by PID, every process whose end was never collected; how many there were."""
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=SPAWN_WAIT_S)
        left = [p for p in self._procs if p.result is None]
        if left:
            kills = asyncio.gather(*(p.kill() for p in left), return_exceptions=True)
            # Past the wait, each command's own `timeout` still ends it; the stray check says.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(kills, KILL_WAIT_S)
        return len(left)

    def stray_command(self, node: str) -> CommandSpec:
        """The check for `node`: processes still carrying a tag of what was started there."""
        tags = {p.tag for p in self._procs if p.node == node} | self._watched.get(node, set())
        return CommandSpec(STRAY_CMD_ID, stray_script(sorted(tags)), STRAY_TIMEOUT_S)

    async def stray_check(self, stage: str, nodes: Sequence[str]) -> dict[str, NodeOutcome]:
        """Run the stray check on `nodes` (evidence `raw/<node>/<stage>-cleanup.json#stray`)."""
        plan = {n: [self.stray_command(n)] for n in nodes}
        return await self.transport.run_stage(f"{stage}-cleanup", plan)


class SpawnScope:
    """The spawns of one test, through the ledger: what the test started, and where; at most
    `allowed` of them (the channels its campaign declared and the scheduler reserved)."""

    def __init__(self, ledger: ProcessLedger, allowed: int | None = None) -> None:
        self.ledger = ledger
        self.allowed = allowed
        self.attempts = 0
        self.started: list[RemoteProcess] = []

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        self.attempts += 1
        if self.allowed is not None and self.attempts > self.allowed:
            raise RuntimeError(
                f"a test started more than the {self.allowed} process(es) its campaign's "
                f"channels() declares (spawning on {node}): the --max-active count is wrong"
            )
        p = await self.ledger.spawn(node, command, timeout_s)
        self.started.append(p)
        return p

    def watch_on(self, test_nodes: Iterable[str]) -> None:
        """The test's nodes that ran none of its processes (a launcher's group) are checked
        for the test's tags after the stage."""
        ran = {p.node for p in self.started}
        self.ledger.watch([n for n in test_nodes if n not in ran], [p.tag for p in self.started])


def stray_script(tags: Sequence[str]) -> tuple[Part, ...]:
    """`<pid> <command line>` per live process whose environment holds one of `tags`.

    Fails (rc 3) rather than pass when /proc or `grep -z` is not there to look with.
    """
    if not tags:
        return ("true",)
    patterns: list[Part] = []
    for t in sorted(set(tags)):
        patterns += ["-e", f"{SPAWN_ENV}={t}"]
    return (
        Shell(
            "[ -r /proc/self/environ ] || { echo 'cannot read /proc/<pid>/environ' >&2; exit 3; }\n"
            "printf 'x\\0' | grep -qzx x || { echo 'grep -z not available' >&2; exit 3; }\n"
            "for f in $(grep -lsazxF "
        ),
        *patterns,
        Shell(
            " /proc/[0-9]*/environ); do\n"
            "  p=${f#/proc/}; p=${p%/environ}\n"
            "  a=$(tr '\\0' ' ' < \"/proc/$p/cmdline\" 2>/dev/null) || continue\n"
            '  [ -n "$a" ] && printf \'%s %s\\n\' "$p" "${a% }"\n'
            "done\n"
            "exit 0"
        ),
    )


def stray_lines(stdout: str) -> list[str]:
    """The stray check's report lines (`<pid> <command line>`)."""
    return [line for line in stdout.splitlines() if line.strip()]
