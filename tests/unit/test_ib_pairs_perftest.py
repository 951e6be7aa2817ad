"""One ib_write_bw test (`run_pair`) over the local transport, with scripted sides: a server
that ends or stalls before listening keeps its rc and stderr; a side whose node cannot run it
is that node's error (`lost`), not the test's."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

from nodegate.core.values import Part, Shell
from nodegate.framework.active.campaign import Execution
from nodegate.framework.active.rounds import Sanity
from nodegate.profiles import ProfileLibrary
from nodegate.stages.ib_pairs.perftest import READY, pair_sanity, run_pair
from nodegate.stages.ib_pairs.plan import PairTest
from nodegate.stages.ib_pairs.profile import IbPairsProfile, Rail, ib_pairs_profile, profile_rails
from nodegate.transport.local import LocalTransport
from nodegate.transport.process import RemoteProcess, SpawnError
from nodegate.transport.script import command_line

REPO = Path(__file__).resolve().parents[2]
TEST = PairTest(3, "gpu002", "gpu001")


class _Scripted:
    """Runs `server` for the server's command and `client` for the client's; a client of
    None is refused the way an unreachable node refuses a session."""

    def __init__(self, server: str, client: str | None) -> None:
        self.local = LocalTransport()
        self.server = server
        self.client = client

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        if READY in command_line(command):
            return await self.local.spawn(node, (Shell(self.server),), timeout_s)
        if self.client is None:
            raise SpawnError(node, "auth_failed", "authentication refused by root@10.1.0.1:22")
        return await self.local.spawn(node, (Shell(self.client),), timeout_s)


def _setup(ready_timeout_s: float = 15.0) -> tuple[IbPairsProfile, Rail]:
    prof = ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100")
    (rail,) = [r for r in profile_rails(prof) if r.rail == 3]
    return dataclasses.replace(ib_pairs_profile(prof), ready_timeout_s=ready_timeout_s), rail


def _run(spawner: _Scripted, prof: IbPairsProfile, rail: Rail) -> tuple[Execution, float]:
    t0 = time.monotonic()
    run = asyncio.run(run_pair(TEST, rail, prof, "10.1.0.2", spawner))
    return run, time.monotonic() - t0


def test_a_server_that_exits_before_listening_keeps_its_rc_and_stderr() -> None:
    prof, rail = _setup()
    server = (
        "echo 'Couldn'\"'\"'t get device attributes' >&2; "
        "echo ' Unable to open file descriptor for socket connection Unable to init the "
        "socket connection' >&2; exit 127"
    )
    run, took = _run(_Scripted(server, "echo never"), prof, rail)
    why = (
        "server exited 127 before listening: Couldn't get device attributes ... Unable to "
        "open file descriptor for socket connection Unable to init the socket connection"
    )
    assert took < 10  # at once, not at the 15 s readiness deadline
    assert run.error == why and run.lost() == ()
    srv, cli = run.sides
    assert srv.result is not None and srv.result.rc == 127 and not srv.result.killed
    assert srv.result.stderr == (  # the evidence: all of it
        "Couldn't get device attributes\n Unable to open file descriptor for socket connection "
        "Unable to init the socket connection\n"
    )
    assert cli.result is None and cli.detail == f"not started: {why}"
    assert pair_sanity(TEST, run) == Sanity(None, why)


def test_a_server_still_starting_at_the_deadline_is_killed_with_its_stderr() -> None:
    prof, rail = _setup(ready_timeout_s=0.5)
    run, _ = _run(
        _Scripted("echo 'mlx5_3: waiting for the port' >&2; exec sleep 30", None), prof, rail
    )
    assert run.error == "server did not listen within 0.5 s: mlx5_3: waiting for the port"
    srv, _cli = run.sides
    assert srv.result is not None and srv.result.killed
    assert srv.result.stderr == "mlx5_3: waiting for the port\n"


def test_a_node_that_cannot_run_its_side_is_lost_not_the_test() -> None:
    prof, rail = _setup()
    run, _ = _run(_Scripted(f"echo {READY}; sleep 0.2", None), prof, rail)
    why = "unreachable: authentication refused by root@10.1.0.1:22"
    assert run.lost() == (("gpu001", why),)
    srv, cli = run.sides
    assert srv.lost_why is None and srv.result is not None  # the server was started, then ended
    assert cli.lost == why and cli.detail == f"not started: client gpu001: {why}"
