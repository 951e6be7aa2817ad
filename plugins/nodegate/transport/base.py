"""The transport interface: run one stage's commands on many nodes, one session per node."""

from __future__ import annotations

import abc
import asyncio
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from nodegate.core.settings import DEFAULT_FANOUT
from nodegate.core.values import CommandSpec, NodeOutcome, Part, Reach
from nodegate.transport.evidence import EvidenceWriter
from nodegate.transport.process import RemoteProcess, SpawnError
from nodegate.transport.script import DEFAULT_MAX_BYTES, StageScript, build_script, parse_frames

# `Session.ended` of a transport that does not say how the shell ended: never a clean end.
NOT_REPORTED = "ended without the transport reporting how"


@dataclass(frozen=True, slots=True)
class Session:
    """What one node session returned: how far it got, its two streams, connections opened,
    and how its shell ended: `ended` None when it exited 0, else what it did ("killed by
    SIGKILL", "exited 3", "closed without an exit status"; `shell_end` words these)."""

    reach: Reach
    stdout: bytes = b""
    stderr: bytes = b""
    detail: str = ""
    connects: int = 0
    ended: str | None = NOT_REPORTED


def shell_end(status: int | None, signal_name: str | None = None) -> str | None:
    """How a shell ended, from its exit status (negative: the signal, as asyncio gives it) or
    the name of the signal that ended it; None when it exited 0.

    >>> shell_end(0), shell_end(3), shell_end(-9), shell_end(None, "TERM"), shell_end(None)
    (None, 'exited 3', 'killed by SIGKILL', 'killed by SIGTERM', 'closed without an exit status')
    """
    if signal_name:
        return f"killed by SIG{signal_name.removeprefix('SIG')}"
    if status is None:
        return "closed without an exit status"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return None if status == 0 else f"exited {status}"


class _Readable(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


async def read_until(
    stream: _Readable, deadline: float, limit: int | None = None
) -> tuple[bytes, bool]:
    """Read a stream to EOF, until the monotonic `deadline`, or until `limit` bytes;
    (bytes so far, stopped early)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or (limit is not None and size > limit):
            return b"".join(chunks), True
        try:
            chunk = await asyncio.wait_for(stream.read(65536), left)
        except asyncio.TimeoutError:
            return b"".join(chunks), True
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)


def session_limit_reason(script_limit: int, got: int) -> str | None:
    """Why a session was stopped for sending too much, or None."""
    if got > script_limit:
        return f"node sent more than {script_limit} bytes (output caps exceeded): session closed"
    return None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where processes spawned on a set of nodes run, as a launcher among them must know it:
    `job` the scheduler allocation every one of them is in (a Slurm job id) and `names` each
    node's name there; or no job, `in_step` saying whether a process spawned on the first of
    them still runs inside a scheduler step (and so sees the scheduler's environment), and
    `outside` the nodes a scheduler transport reaches outside its allocation, with why."""

    job: str | None = None
    names: Mapping[str, str] = field(default_factory=dict)
    in_step: bool = False
    outside: Mapping[str, str] = field(default_factory=dict)

    @property
    def outside_why(self) -> str:
        return "; ".join(f"{n}: {why}" for n, why in sorted(self.outside.items()))


class Transport(abc.ABC):
    """Runs stage scripts on nodes. Outcomes are data; no exception escapes `run_stage`."""

    name = "abstract"

    def __init__(
        self,
        *,
        fanout: int = DEFAULT_FANOUT,
        evidence: EvidenceWriter | None = None,
        max_output_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if fanout < 1:
            raise ValueError("fanout must be >= 1")
        self.fanout = fanout
        self.evidence = evidence
        self.max_output_bytes = max_output_bytes
        self._sem: asyncio.Semaphore | None = None

    @property
    def sem(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.fanout)
        return self._sem

    @abc.abstractmethod
    async def _session(self, node: str, script: StageScript) -> Session:
        """Run `script` on `node` within its deadline and byte limit; whatever came back."""

    async def run_node(self, node: str, stage: str, specs: Sequence[CommandSpec]) -> NodeOutcome:
        """One round trip: all of `specs` in one session on `node`."""
        script = build_script(specs, max_bytes=self.max_output_bytes)
        t0 = time.monotonic()
        async with self.sem:
            try:
                s = await self._session(node, script)
            except Exception as exc:  # noqa: BLE001 - a transport bug must not lose the fleet
                s = Session(Reach.ERROR, detail=f"{type(exc).__name__}: {exc}")
        return await self.outcome(node, stage, script, s, t0)

    async def outcome(
        self, node: str, stage: str, script: StageScript, s: Session, t0: float
    ) -> NodeOutcome:
        """A node's session -> its NodeOutcome (frames parsed, evidence written); every
        transport builds outcomes here, so the same bytes give the same outcome."""
        reach, detail, connects = s.reach, s.detail, s.connects
        frames = parse_frames(script, s.stdout)
        results = frames.results
        if frames.problem is not None:
            reach = Reach.ERROR if reach is Reach.OK else reach
            detail = "; ".join(x for x in (detail, "session integrity: " + frames.problem) if x)
        elif reach is Reach.OK and (not frames.done or s.ended is not None):
            # Any command could have written any frame into the shell's stdout (/proc/<pid>/
            # fd): only a shell that wrote DONE and then exited 0 vouches for its frames.
            reach = Reach.ERROR
            if frames.done:
                why = f"shell {s.ended} after its last frame"
            else:
                shell = s.stderr.decode("utf-8", "replace").strip().splitlines()
                why = (
                    "session ended before every command reported"
                    + (f" (shell {s.ended})" if s.ended is not None else "")
                    + (f" ({shell[-1][:200]})" if shell else "")
                )
            detail = "; ".join(x for x in (detail, "session integrity: " + why) if x)
        outcome = NodeOutcome(
            node=node,
            reach=reach,
            results=results,
            detail=detail,
            duration_s=round(time.monotonic() - t0, 6),
            connects=connects,
        )
        if self.evidence is not None:
            # Off the event loop: file I/O must not stall the other nodes' sessions.
            outcome = await asyncio.to_thread(self.evidence.record, stage, outcome)
        return outcome

    async def run_stage(
        self, stage: str, plan: Mapping[str, Sequence[CommandSpec]]
    ) -> dict[str, NodeOutcome]:
        """Run each node's commands concurrently (bounded by fanout), in the plan's order."""
        got: dict[str, NodeOutcome] = {}
        await self.stream_stage(stage, plan, lambda o: got.__setitem__(o.node, o))
        return {n: got[n] for n in plan}

    async def stream_stage(
        self,
        stage: str,
        plan: Mapping[str, Sequence[CommandSpec]],
        on_outcome: Callable[[NodeOutcome], None],
    ) -> None:
        """Like `run_stage`, but each node's outcome goes to `on_outcome` (on the event loop)
        as soon as it is in, and none is kept here: a passive stage parses a node's output
        and lets it go while the other nodes still answer (`on_outcome` must not raise)."""
        if type(self).run_stage is not Transport.run_stage:
            # A transport written against run_stage alone (a site plugin's): its outcomes.
            for o in (await self.run_stage(stage, plan)).values():
                on_outcome(o)
            return

        async def one(node: str) -> None:
            on_outcome(await self.run_node(node, stage, plan[node]))

        await asyncio.gather(*(one(n) for n in plan))

    def address(self, node: str) -> str:
        """The address other nodes use to reach `node` (an ib_write_bw client's server)."""
        return node

    def lost_why(self, node: str) -> str | None:
        """Why the open connection to `node` was lost (it dropped under us), if it was: an
        active stage reads it for the nodes of a test that ran no process of their own (a
        launcher's ranks). None for a transport that holds no connection."""
        return None

    async def placement(self, nodes: Sequence[str]) -> Placement:
        """Where processes spawned on `nodes` run (a launcher's ranks among them): by default
        no scheduler, each node reached as its own host."""
        return Placement()

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        """Start `command` on `node` under `timeout timeout_s` and return at once (active
        stages); its parts are rendered by `script.command_line` (what the process's `cmd` is).

        Raises SpawnError when the node cannot run it.
        """
        raise SpawnError(node, "error", f"the {self.name} transport cannot start processes")

    async def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections; the default transport holds none."""
