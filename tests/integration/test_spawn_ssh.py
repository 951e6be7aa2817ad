"""Active-stage plumbing over real SSH: a server waits for readiness, a client talks to it over
loopback between two simulated nodes, a hung server is killed by PID and leaves no process."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from nodegate.core.values import Shell
from nodegate.inventory import load_inventory
from nodegate.transport.ssh import SSHTransport

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

SERVER = """python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 18515)); s.listen(1); print("listening", flush=True)
c, _ = s.accept(); c.sendall(c.recv(64).upper()); c.close()
' {addr}"""
CLIENT = """python3 -c '
import socket, sys
c = socket.create_connection((sys.argv[1], 18515), timeout=5); c.sendall(b"ping")
print(c.recv(64).decode())
' {addr}"""


def test_server_client_and_kill_over_ssh(sim_fleet):
    fleet = sim_fleet(base_model(2))
    addr = {n["name"]: n["address"] for n in fleet.model()["nodes"]}
    nodes = list(load_inventory(fleet.inventory).nodes)
    naps = f"300.{os.getpid()}"  # a duration only this test's process uses: no other run's sleep

    async def go():
        t = SSHTransport(nodes)
        try:
            server = await t.spawn("gpu001", (Shell(SERVER.format(addr=addr["gpu001"])),), 20)
            assert await server.wait_for_line("listening", time.monotonic() + 10)
            client = await t.spawn("gpu002", (Shell(CLIENT.format(addr=addr["gpu001"])),), 20)
            s, c = await asyncio.gather(server.wait(), client.wait())
            hung = await t.spawn("gpu001", (Shell(f"echo started; exec sleep {naps}"),), 600)
            assert await hung.wait_for_line("started", time.monotonic() + 10)
            await hung.kill()
            h = await hung.wait(time.monotonic() + 10)
            look = f"pgrep -f '[s]leep {naps}' || true"
            left = await t.run_node("gpu001", "check", [_spec(look)])
            return s, c, h, left, t.connections_opened
        finally:
            await t.close()

    s, c, h, left, conns = asyncio.run(go())
    assert s.rc == 0 and c.rc == 0 and c.stdout.strip() == "PING"
    assert h.killed and h.pid is not None
    assert left.results["x"].stdout.strip() == ""  # no stray process on the node
    assert conns == 2  # everything went over the two nodes' persistent connections


def _spec(cmd: str):
    from nodegate.core.values import CommandSpec

    return CommandSpec("x", (Shell(cmd),), 10)
