"""Spawned processes for active stages: readiness by output, deadlines, kill by PID."""

from __future__ import annotations

import asyncio
import os
import time

from nodegate.transport.local import LocalTransport


def test_server_ready_then_client_then_both_collected(tmp_path):
    port_file = tmp_path / "ready"

    async def go():
        t = LocalTransport()
        server = await t.spawn(
            "a", f"sleep 0.3; touch {port_file}; echo listening; sleep 0.3; echo done", 10
        )
        assert await server.wait_for_line("listening", time.monotonic() + 5)
        client = await t.spawn("b", f"test -e {port_file} && echo connected", 10)
        return await asyncio.gather(server.wait(), client.wait())

    s, c = asyncio.run(go())
    assert s.rc == 0 and s.stdout == "listening\ndone\n" and not s.timed_out
    assert c.rc == 0 and c.stdout == "connected\n"
    assert "@@" not in s.stderr  # the PID line is not output


def test_readiness_never_comes_and_the_process_is_killed(tmp_path):
    pid_file = tmp_path / "pid"

    async def go():
        t = LocalTransport()
        p = await t.spawn("a", f"echo $$ > {pid_file}; exec sleep 30", 60)
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
        p = await LocalTransport().spawn("a", "sleep 30", 0.5)
        return await p.wait()

    res = asyncio.run(go())
    assert res.timed_out and res.rc == 124 and res.duration_s < 10
