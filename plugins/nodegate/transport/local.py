"""Local and replay transports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from asyncio.subprocess import Process
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nodegate.core.values import CommandResult, CommandSpec, NodeOutcome, Part, Reach
from nodegate.transport.base import (
    Session,
    Transport,
    read_until,
    session_limit_reason,
    shell_end,
)
from nodegate.transport.evidence import EvidenceWriter, capture_reach, read_capture
from nodegate.transport.hangup import HANGUP_GRACE_S, session_kill_script
from nodegate.transport.process import RemoteProcess, kill_script, wrap
from nodegate.transport.replay_process import CapturedProcesses
from nodegate.transport.script import LAUNCHER, StageScript, command_line


class LocalTransport(Transport):
    """Runs stage scripts on this machine (for capture on a GPU box, and for tests)."""

    name = "local"

    async def _session(self, node: str, script: StageScript) -> Session:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            LAUNCHER,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(script.text.encode())
        await proc.stdin.drain()
        proc.stdin.close()
        deadline = time.monotonic() + script.deadline_s
        limit = script.max_session_bytes
        try:
            (out, t1), (err, t2) = await asyncio.gather(
                read_until(proc.stdout, deadline, limit), read_until(proc.stderr, deadline, limit)
            )
        except asyncio.CancelledError:  # an interrupted run: end the session's processes now
            await asyncio.shield(_hang_up(proc, script.nonce))
            raise
        if t1 or t2:
            # The script's children (the hung command) hold the pipes: end the whole group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        too_much = session_limit_reason(limit, max(len(out), len(err)))
        if too_much:
            return Session(Reach.ERROR, out, err, too_much)
        if t1 or t2:
            return Session(
                Reach.TIMEOUT, out, err, f"session exceeded its {script.deadline_s:g} s deadline"
            )
        return Session(Reach.OK, out, err, ended=shell_end(proc.returncode))

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        cmd = command_line(command)
        p = LocalProcess(node, cmd, timeout_s)
        p.proc = await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            wrap(cmd, timeout_s, p.tag),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return p


async def _hang_up(proc: Process, nonce: str) -> None:
    """Kill the script's session: its shell's group, and the commands' own (`timeout`'s)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    killer = await asyncio.create_subprocess_exec("sh", "-c", session_kill_script(nonce))
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(killer.wait(), HANGUP_GRACE_S)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), HANGUP_GRACE_S)


class LocalProcess(RemoteProcess):
    """A command run on this machine by the local transport."""

    proc: Process

    async def _read_out(self, n: int) -> bytes:
        assert self.proc.stdout is not None
        return await self.proc.stdout.read(n)

    async def _read_err(self, n: int) -> bytes:
        assert self.proc.stderr is not None
        return await self.proc.stderr.read(n)

    async def _returncode(self) -> int | None:
        return await self.proc.wait()

    async def _run_kill(self, pid: int) -> None:
        killer = await asyncio.create_subprocess_exec("sh", "-c", kill_script(pid))
        await killer.wait()

    def _close(self) -> None:
        # Hang up as an SSH channel does: stop reading its output. A pipe left open (a process
        # killed in mid-flood leaves output unread) outlives the event loop, and closing it
        # then fails ("Event loop is closed", at garbage collection).
        transport = getattr(self.proc, "_transport", None)  # asyncio keeps it private
        for fd in (1, 2):
            pipe = transport.get_pipe_transport(fd) if transport is not None else None
            if pipe is not None:
                pipe.close()


class ReplayTransport(Transport):
    """Answers from a captured bundle (any run's raw/ directory); runs nothing. Active stages
    get the processes the captured run spawned (`transport.replay_process`)."""

    name = "replay"

    def __init__(self, bundle: str | Path, *, evidence: EvidenceWriter | None = None) -> None:
        super().__init__(fanout=1024, evidence=evidence)
        self.bundle = Path(bundle)
        if not self.bundle.is_dir():
            raise FileNotFoundError(f"replay bundle {self.bundle} is not a directory")
        self.processes = CapturedProcesses(self.bundle)

    def address(self, node: str) -> str:
        return self.processes.address(node) or node

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        return self.processes.take(node, command_line(command), timeout_s)

    async def _session(self, node: str, script: StageScript) -> Session:
        raise NotImplementedError  # run_node is overridden: a replay has no script

    async def run_node(self, node: str, stage: str, specs: Sequence[CommandSpec]) -> NodeOutcome:
        try:
            doc = read_capture(self.bundle, node, stage)
        except (ValueError, OSError) as exc:
            doc, why = None, f"unreadable capture: {exc}"
        else:
            why = f"no capture of stage {stage!r} for {node} in {self.bundle}"
        if doc is None:
            outcome = NodeOutcome(node, Reach.ERROR, {}, why)
        else:
            reach, detail = capture_reach(doc)
            captured: dict[str, Any] = doc.get("commands", {})
            results: dict[str, CommandResult] = {}
            missing: list[str] = []
            for spec in specs:
                c = captured.get(spec.id)
                if c is None:
                    missing.append(spec.id)
                    continue
                cmd = command_line(spec.argv)
                if c.get("cmd") != cmd:
                    # The check now runs a different command than the one captured: the
                    # captured output is not evidence for it.
                    missing.append(f"{spec.id} (captured command differs)")
                    continue
                results[spec.id] = CommandResult(
                    id=spec.id,
                    cmd=cmd,
                    rc=c.get("rc"),
                    stdout=c.get("stdout", ""),
                    stderr=c.get("stderr", ""),
                    duration_s=c.get("duration_s"),
                    timed_out=bool(c.get("timed_out", False)),
                    truncated=c.get("truncated"),
                )
            if missing and reach is Reach.OK:
                detail = "not in the capture: " + ", ".join(missing)
            outcome = NodeOutcome(node, reach, results, detail)
        if self.evidence is not None:
            outcome = self.evidence.record(stage, outcome)
        return outcome
