"""Long-running remote processes for active stages (a server on node A, a client on node B).

Active stages need what one framed script cannot give: start a server, read its output until it
is ready (never a fixed sleep), start a client elsewhere, then collect both under deadlines and
kill what is left. Each spawned command runs under `timeout` on the node, so it ends at its
deadline even if the client side vanishes; `kill()` ends it sooner through its recorded PID.

A channel that fails under a read, wait or kill (the connection dropped: ConnectionLost,
ChannelOpenError, BrokenPipeError, OSError, ...) never raises out of a RemoteProcess: the
process is marked `lost` with why, which is this node's error in this test, and what was read
until then is kept.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from nodegate.transport.script import (
    DEFAULT_MAX_BYTES,
    KILL_AFTER_S,
    TIMEOUT_RCS,
    in_sh_under_timeout,
)

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """How a spawned process ended; `stdout` includes lines already read with read_line()."""

    node: str
    cmd: str
    rc: int | None
    stdout: str
    stderr: str
    timed_out: bool
    killed: bool
    duration_s: float
    pid: int | None = None  # the wrapper's PID on the node (what kill() signals)
    tag: str = ""  # its NODEGATE_SPAWN tag (what the stray check looks for)
    lost: str | None = None  # why the channel to the node failed (connection lost), if it did
    overflow: str | None = None  # set when it printed past the byte cap and was killed for it


def overflow_reason(stream: str, limit: int) -> str:
    """Why a spawned process was killed for its output (what the verdict says).

    >>> overflow_reason("stdout", 8388608)
    'printed more than 8388608 bytes on stdout: killed (output kept up to the cap)'
    """
    return f"printed more than {limit} bytes on {stream}: killed (output kept up to the cap)"


# How the other end going away shows up depends on which read or write notices it first
# (asyncssh's ConnectionLost, or the socket's broken pipe / reset): one reason for all of them,
# so the same drop reads the same in every run.
_PEER_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, EOFError)
PEER_CLOSED = "closed by the other end"


def connection_lost(node: str, exc: BaseException) -> str:
    """How a lost connection or channel is reported, wherever it is noticed.

    >>> connection_lost("gpu005", ConnectionResetError("reset by peer"))
    'connection to gpu005 lost (closed by the other end)'
    >>> connection_lost("gpu005", TimeoutError("keepalive"))
    'connection to gpu005 lost (TimeoutError: keepalive)'
    """
    if isinstance(exc, _PEER_GONE) or type(exc).__name__ == "ConnectionLost":
        return f"connection to {node} lost ({PEER_CLOSED})"
    return f"connection to {node} lost ({type(exc).__name__}: {exc})"


SPAWN_ENV = "NODEGATE_SPAWN"


def wrap(cmd: str, timeout_s: float, tag: str) -> str:
    """The remote command line: report the PID on stderr, then run `cmd` under `timeout`.

    The tag is also exported as NODEGATE_SPAWN: every process the command starts inherits it,
    so a stray-process check can find exactly this spawn's survivors (a random tag cannot
    match a reused PID or another run's process of the same name).
    """
    bounded = in_sh_under_timeout(cmd, timeout_s)
    return f"echo {tag} $$ >&2; {SPAWN_ENV}={tag}; export {SPAWN_ENV}; exec {bounded} </dev/null"


class RemoteProcess(abc.ABC):
    """One spawned command on one node. Reads are bounded by monotonic deadlines, and what is
    kept of each stream by `max_bytes` (a node that floods is killed, never held in memory)."""

    max_bytes = DEFAULT_MAX_BYTES  # per stream, as a stage script's output is capped

    def __init__(self, node: str, cmd: str, timeout_s: float) -> None:
        self.node = node
        self.cmd = cmd
        self.timeout_s = timeout_s
        self.tag = f"@@{secrets.token_hex(8)}-pid"
        self.started = time.monotonic()
        self.pid: int | None = None
        self.killed = False
        self.result: ProcessResult | None = None  # set once wait() has collected it
        self.lost: str | None = None  # why the channel failed (see the module docstring)
        self.at_eof = False  # stdout ended: the process closed it (it exited), or was lost
        self._out: list[str] = []
        self._err: list[str] = []  # stderr read before wait() (kill()'s peek for the PID)
        self._buf = ""
        self._hung_up = False
        self.overflow: str | None = None

    @abc.abstractmethod
    async def _read_out(self, n: int) -> bytes: ...

    @abc.abstractmethod
    async def _read_err(self, n: int) -> bytes: ...

    @abc.abstractmethod
    async def _returncode(self) -> int | None: ...

    @abc.abstractmethod
    async def _run_kill(self, pid: int) -> None:
        """Send TERM (then KILL) to `pid` on the node."""

    @abc.abstractmethod
    def _close(self) -> None: ...

    def lost_reason(self, exc: BaseException) -> str:
        """Why the channel failed, for the evidence and the verdict; a transport that knows
        why its connection closed says so."""
        return connection_lost(self.node, exc)

    async def _io(self, op: Awaitable[R], default: R) -> R:
        """`op`, or `default` once the channel has failed: whatever the transport raises is
        this node's problem in this test (noted in `lost`), never an exception for the stage.
        Timeouts come from the callers' wait_for around this, as cancellation."""
        try:
            return await op
        except Exception as exc:  # noqa: BLE001 - see above
            if not self._hung_up and self.lost is None:
                self.lost = self.lost_reason(exc)
            return default

    def _hang_up(self) -> None:
        if self._hung_up:
            return
        self._hung_up = True
        with contextlib.suppress(Exception):  # closing a dead channel may raise: nothing to do
            self._close()

    async def read_line(self, deadline: float) -> str | None:
        """The next stdout line (without newline); None at EOF or at the deadline."""
        while "\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                chunk = await asyncio.wait_for(self._io(self._read_out(65536), b""), left)
            except asyncio.TimeoutError:
                return None
            if not chunk:
                self.at_eof = True
                return None
            self._buf += chunk.decode("utf-8", "replace")
            if len(self._buf) > self.max_bytes:  # one endless line: no readiness comes
                self.overflow = overflow_reason("stdout", self.max_bytes)
                return None
        line, _, self._buf = self._buf.partition("\n")
        self._out.append(line + "\n")
        return line

    async def wait_for_line(self, needle: str, deadline: float) -> bool:
        """Read until a stdout line contains `needle` (readiness); False at EOF/deadline."""
        while True:
            line = await self.read_line(deadline)
            if line is None:
                return False
            if needle in line:
                return True

    async def _drain(self, reader: str, deadline: float) -> tuple[str, bool]:
        """The rest of one stream: (text, stopped early: deadline or byte cap)."""
        chunks: list[bytes] = []
        read = self._read_out if reader == "out" else self._read_err
        kept = sum(map(len, self._out)) + len(self._buf) if reader == "out" else 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks).decode("utf-8", "replace"), True
            try:
                chunk = await asyncio.wait_for(self._io(read(65536), b""), left)
            except asyncio.TimeoutError:
                return b"".join(chunks).decode("utf-8", "replace"), True
            if not chunk:
                return b"".join(chunks).decode("utf-8", "replace"), False
            chunks.append(chunk)
            kept += len(chunk)
            if reader == "err" and self.pid is None:
                # Note the PID as soon as it arrives: a wait() cancelled mid-read (an
                # interrupted stage) loses its chunks, and kill() needs the PID.
                self._strip_pid(b"".join(chunks).decode("utf-8", "replace"))
            if kept > self.max_bytes:
                self.overflow = overflow_reason("std" + reader, self.max_bytes)
                # Killed now, so the other stream's drain meets its end, not the deadline.
                await self.kill(hang_up=False)
                head = b"".join(chunks)[: max(0, self.max_bytes - (kept - sum(map(len, chunks))))]
                return head.decode("utf-8", "replace"), True

    async def wait(self, deadline: float | None = None) -> ProcessResult:
        """Collect the rest; past `deadline` (default: its own timeout + slack) kill it."""
        if deadline is None:
            deadline = self.started + self.timeout_s + KILL_AFTER_S + 5
        if self.overflow is not None:  # read_line met an endless line
            await self.kill(hang_up=False)
        (out, t1), (err, t2) = await asyncio.gather(
            self._drain("out", deadline), self._drain("err", deadline)
        )
        timed_out = (t1 or t2) and self.overflow is None
        stderr = self._strip_pid("".join(self._err) + err)
        if not timed_out and self.lost is None and self.overflow is None:
            rc = await self._io(self._returncode(), None)
        else:
            rc = None
        if timed_out or self.overflow is not None:
            await self.kill()
        elif self.lost is not None and self.pid is not None:
            # The channel is gone, the process may not be: try to end it (`killed` says only
            # what nodegate ended at a deadline; the stray check says what is left).
            await self._io(self._run_kill(self.pid), None)
        self._hang_up()
        stdout = "".join(self._out) + self._buf + out
        self.result = ProcessResult(
            node=self.node,
            cmd=self.cmd,
            rc=rc,
            stdout=stdout,
            stderr=stderr,
            # rc 124/137 is `timeout`'s only at the deadline: before it, the command's own
            # exit (137: it was SIGKILLed, an OOM kill or a launcher reporting a rank's)
            timed_out=timed_out or (rc in TIMEOUT_RCS and self._at_deadline()),
            killed=self.killed,
            duration_s=round(time.monotonic() - self.started, 3),
            pid=self.pid,
            tag=self.tag,
            lost=self.lost,
            overflow=self.overflow,
        )
        return self.result

    def _at_deadline(self) -> bool:
        return time.monotonic() - self.started >= self.timeout_s - 0.5

    def _strip_pid(self, err: str) -> str:
        keep = []
        for line in err.splitlines(keepends=True):
            if line.startswith(self.tag + " "):
                value = line.split()[1] if len(line.split()) > 1 else ""
                self.pid = int(value) if value.isdigit() else self.pid
                continue
            keep.append(line)
        return "".join(keep)

    async def kill(self, hang_up: bool = True) -> None:
        """End the remote command now (TERM, KILL after 2 s, via its PID), then hang up
        (`hang_up=False`: a wait() still collects its last output, rc and stderr)."""
        if self.killed:
            return
        self.killed = True
        if self.pid is None:
            # The PID line may still be unread: peek at what stderr has so far (kept for
            # wait(): it may hold the process's own error message).
            try:
                early = await asyncio.wait_for(self._io(self._read_err(4096), b""), 0.5)
            except asyncio.TimeoutError:
                early = b""
            self._err.append(early.decode("utf-8", "replace"))
            self._strip_pid("".join(self._err))
        if self.pid is not None:
            await self._io(self._run_kill(self.pid), None)
        if hang_up:
            self._hang_up()


def kill_script(pid: int) -> str:
    """TERM the wrapper (timeout forwards it), KILL after 2 s if anything is left."""
    return (
        f"kill -TERM {pid} 2>/dev/null; for i in 1 2 3 4 5 6 7 8 9 10; do "
        f"kill -0 {pid} 2>/dev/null || exit 0; sleep 0.2; done; kill -KILL {pid} 2>/dev/null; "
        "exit 0"
    )


class SpawnError(Exception):
    """The process could not be started (node unreachable, session refused)."""

    def __init__(self, node: str, reach: str, detail: str) -> None:
        super().__init__(f"{node}: {reach}: {detail}")
        self.node = node
        self.reach = reach
        self.detail = detail
