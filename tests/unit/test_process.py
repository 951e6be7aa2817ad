"""Spawned processes for active stages: readiness by output, deadlines, kill by PID."""

from __future__ import annotations

import asyncio
import os
import time

import asyncssh
from nodegate.core.values import Shell
from nodegate.transport.local import LocalTransport
from nodegate.transport.process import ProcessResult, RemoteProcess


def test_server_ready_then_client_then_both_collected(tmp_path):
    port_file = tmp_path / "ready"

    async def go():
        t = LocalTransport()
        server = await t.spawn(
            "a", (Shell(f"sleep 0.3; touch {port_file}; echo listening; sleep 0.3; echo done"),), 10
        )
        assert await server.wait_for_line("listening", time.monotonic() + 5)
        client = await t.spawn("b", (Shell(f"test -e {port_file} && echo connected"),), 10)
        return await asyncio.gather(server.wait(), client.wait())

    s, c = asyncio.run(go())
    assert s.rc == 0 and s.stdout == "listening\ndone\n" and not s.timed_out
    assert c.rc == 0 and c.stdout == "connected\n"
    assert "@@" not in s.stderr  # the PID line is not output


def test_readiness_never_comes_and_the_process_is_killed(tmp_path):
    pid_file = tmp_path / "pid"

    async def go():
        t = LocalTransport()
        p = await t.spawn("a", (Shell(f"echo $$ > {pid_file}; exec sleep 30"),), 60)
        ready = await p.wait_for_line("listening", time.monotonic() + 0.5)
        await p.kill()
        return ready, await p.wait(time.monotonic() + 5)

    ready, res = asyncio.run(go())
    assert ready is False and res.killed
    pid = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"stray process {pid} left running")


def test_own_deadline_ends_a_hung_command():
    async def go():
        p = await LocalTransport().spawn("a", ("sleep", "30"), 0.5)
        return await p.wait()

    res = asyncio.run(go())
    assert res.timed_out and res.rc == 124 and res.duration_s < 10


class _Dropping(RemoteProcess):
    """A channel that delivers what it has, then fails as a dropped SSH connection does:
    every read, the exit status, the kill and the close raise."""

    def __init__(self, out: bytes, err: bytes) -> None:
        super().__init__("gpu005", "ib_write_bw -d mlx5_0", 60)
        self.outs = [out]
        self.errs = [f"{self.tag} 4242\n".encode() + err]
        self.kills: list[int] = []

    async def _read_out(self, n: int) -> bytes:
        if self.outs:
            return self.outs.pop(0)
        raise asyncssh.ConnectionLost("Connection lost")

    async def _read_err(self, n: int) -> bytes:
        if self.errs:
            return self.errs.pop(0)
        raise asyncssh.ConnectionLost("Connection lost")

    async def _returncode(self) -> int | None:
        raise BrokenPipeError("broken pipe")

    async def _run_kill(self, pid: int) -> None:
        self.kills.append(pid)
        raise asyncssh.ChannelOpenError(2, "SSH connection closed")

    def _close(self) -> None:
        raise OSError("closed")


def test_a_dropped_connection_is_the_process_lost_never_an_exception():
    async def go():
        p = _Dropping(b"* Waiting for client to connect... *\n", b"warming up\n")
        ready = await p.wait_for_line("LISTENING", time.monotonic() + 5)
        res = await p.wait(time.monotonic() + 5)
        await p.kill()  # and a late kill (the ledger's cleanup) does not raise either
        return p, ready, res

    p, ready, res = asyncio.run(go())
    lost = "connection to gpu005 lost (closed by the other end)"
    assert ready is False and p.at_eof and p.lost == lost
    assert res == ProcessResult(
        node="gpu005",
        cmd="ib_write_bw -d mlx5_0",
        rc=None,
        stdout="* Waiting for client to connect... *\n",
        stderr="warming up\n",
        timed_out=False,
        killed=False,  # wait() tried to end it by PID, and does not claim it did
        duration_s=res.duration_s,
        pid=4242,
        tag=p.tag,
        lost=lost,
    )
    assert p.kills == [4242, 4242]  # wait()'s try, then the late kill()'s


def test_a_kill_that_keeps_the_channel_still_collects_the_stderr():
    async def go():
        p = await LocalTransport().spawn(
            "a", (Shell("echo 'mlx5_3: port is down' >&2; exec sleep 30"),), 60
        )
        ready = await p.wait_for_line("listening", time.monotonic() + 0.5)
        await p.kill(hang_up=False)
        return ready, await p.wait(time.monotonic() + 5)

    ready, res = asyncio.run(go())
    assert ready is False and res.killed and res.lost is None
    assert res.stderr == "mlx5_3: port is down\n"


def test_a_process_that_floods_is_killed_at_the_byte_cap_not_held_in_memory(monkeypatch):
    """A node's command printing without end: what is kept stops at the cap, the process is
    killed at once (not at its deadline), and the result says why (the verdict is an ERROR)."""
    monkeypatch.setattr(RemoteProcess, "max_bytes", 1 << 20)

    async def go():
        p = await LocalTransport().spawn("a", ("yes", "flood"), 60)
        return await p.wait()

    t0 = time.monotonic()
    res = asyncio.run(go())
    assert time.monotonic() - t0 < 20  # its own deadline is 60 s
    assert res.overflow == (
        "printed more than 1048576 bytes on stdout: killed (output kept up to the cap)"
    )
    assert (res.killed, res.timed_out, res.rc) == (True, False, None)
    assert len(res.stdout) == 1 << 20 and res.stdout.startswith("flood\nflood\n")


def test_an_endless_line_ends_readiness_and_the_process(monkeypatch):
    monkeypatch.setattr(RemoteProcess, "max_bytes", 1 << 16)

    async def go():
        p = await LocalTransport().spawn("a", (Shell("tr -d '\\n' < /dev/zero"),), 60)
        ready = await p.wait_for_line("listening", time.monotonic() + 30)
        return ready, await p.wait()

    ready, res = asyncio.run(go())
    assert ready is False and res.killed and res.overflow is not None
    assert res.overflow.startswith("printed more than 65536 bytes on stdout")


def test_a_process_killed_in_mid_flood_leaves_no_pipe_open(monkeypatch):
    # Its stdout unread past the cap: hanging up closes the pipes, or the transport outlives
    # the loop and fails when collected ("Event loop is closed").
    monkeypatch.setattr(RemoteProcess, "max_bytes", 1 << 16)

    async def go():
        p = await LocalTransport().spawn("a", (Shell("tr -d '\\n' < /dev/zero"),), 60)
        await p.wait_for_line("listening", time.monotonic() + 30)
        await p.wait()
        return p

    p = asyncio.run(go())
    transport = p.proc._transport
    assert p.killed and transport.get_returncode() is not None
    assert transport.is_closing()  # its pipes were closed, then the transport with them
