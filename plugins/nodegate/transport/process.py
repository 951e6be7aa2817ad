"""Long-running remote processes for active stages (a server on node A, a client on node B).

Active stages need what one framed script cannot give: start a server, read its output until it
is ready (never a fixed sleep), start a client elsewhere, then collect both under deadlines and
kill what is left. Each spawned command runs under `timeout` on the node, so it ends at its
deadline even if the client side vanishes; `kill()` ends it sooner through its recorded PID.
"""

from __future__ import annotations

import abc
import asyncio
import secrets
import shlex
import time
from dataclasses import dataclass

from nodegate.transport.script import KILL_AFTER_S, TIMEOUT_RCS


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


SPAWN_ENV = "NODEGATE_SPAWN"


def wrap(cmd: str, timeout_s: float, tag: str) -> str:
    """The remote command line: report the PID on stderr, then run `cmd` under `timeout`.

    The tag is also exported as NODEGATE_SPAWN: every process the command starts inherits it,
    so a stray-process check can find exactly this spawn's survivors (a random tag cannot
    match a reused PID or another run's process of the same name).
    """
    inner = shlex.quote(cmd)
    bounded = f"timeout -k {KILL_AFTER_S:g} {timeout_s:g} sh -c {inner}"
    return f"echo {tag} $$ >&2; {SPAWN_ENV}={tag}; export {SPAWN_ENV}; exec {bounded} </dev/null"


class RemoteProcess(abc.ABC):
    """One spawned command on one node. Reads are bounded by monotonic deadlines."""

    def __init__(self, node: str, cmd: str, timeout_s: float) -> None:
        self.node = node
        self.cmd = cmd
        self.timeout_s = timeout_s
        self.tag = f"@@{secrets.token_hex(8)}-pid"
        self.started = time.monotonic()
        self.pid: int | None = None
        self.killed = False
        self.result: ProcessResult | None = None  # set once wait() has collected it
        self._out: list[str] = []
        self._err: list[str] = []
        self._buf = ""

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

    async def read_line(self, deadline: float) -> str | None:
        """The next stdout line (without newline); None at EOF or at the deadline."""
        while "\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                chunk = await asyncio.wait_for(self._read_out(65536), left)
            except asyncio.TimeoutError:
                return None
            if not chunk:
                return None
            self._buf += chunk.decode("utf-8", "replace")
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
        chunks: list[bytes] = []
        read = self._read_out if reader == "out" else self._read_err
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks).decode("utf-8", "replace"), True
            try:
                chunk = await asyncio.wait_for(read(65536), left)
            except asyncio.TimeoutError:
                return b"".join(chunks).decode("utf-8", "replace"), True
            if not chunk:
                return b"".join(chunks).decode("utf-8", "replace"), False
            chunks.append(chunk)
            if reader == "err" and self.pid is None:
                # Note the PID as soon as it arrives: a wait() cancelled mid-read (an
                # interrupted stage) loses its chunks, and kill() needs the PID.
                self._strip_pid(b"".join(chunks).decode("utf-8", "replace"))

    async def wait(self, deadline: float | None = None) -> ProcessResult:
        """Collect the rest; past `deadline` (default: its own timeout + slack) kill it."""
        if deadline is None:
            deadline = self.started + self.timeout_s + KILL_AFTER_S + 5
        (out, t1), (err, t2) = await asyncio.gather(
            self._drain("out", deadline), self._drain("err", deadline)
        )
        timed_out = t1 or t2
        stderr = self._strip_pid(err)
        if timed_out:
            await self.kill()
            rc = None
        else:
            rc = await self._returncode()
        self._close()
        stdout = "".join(self._out) + self._buf + out
        self.result = ProcessResult(
            node=self.node,
            cmd=self.cmd,
            rc=rc,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out or rc in TIMEOUT_RCS,
            killed=self.killed,
            duration_s=round(time.monotonic() - self.started, 3),
            pid=self.pid,
            tag=self.tag,
        )
        return self.result

    def _strip_pid(self, err: str) -> str:
        keep = []
        for line in err.splitlines(keepends=True):
            if line.startswith(self.tag + " "):
                value = line.split()[1] if len(line.split()) > 1 else ""
                self.pid = int(value) if value.isdigit() else self.pid
                continue
            keep.append(line)
        return "".join(keep)

    async def kill(self) -> None:
        """End the remote command now (TERM, KILL after 2 s, via its PID), then hang up."""
        if self.killed:
            return
        self.killed = True
        if self.pid is None:
            # The PID line may still be unread: peek at what stderr has so far.
            try:
                early = await asyncio.wait_for(self._read_err(4096), 0.5)
            except asyncio.TimeoutError:
                early = b""
            self._strip_pid(early.decode("utf-8", "replace"))
        if self.pid is not None:
            await self._run_kill(self.pid)
        self._close()


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
