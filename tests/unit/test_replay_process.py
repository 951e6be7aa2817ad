"""The replay transport answers an active stage's spawns from the processes a bundle recorded:
by exact command, in order, ended as captured, with the captured spawn tag and address."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from nodegate.framework.active.ledger import ProcessLedger, stray_script
from nodegate.transport.evidence import EvidenceWriter, ProcessRecord
from nodegate.transport.local import LocalTransport, ReplayTransport
from nodegate.transport.process import ProcessResult, SpawnError

SERVER = "ib_write_bw -d mlx5_0 -p 18515"
SERVER_ARGV = ("ib_write_bw", "-d", "mlx5_0", "-p", "18515")  # renders as SERVER


def record(cid: str, stdout: str, **kw: object) -> ProcessRecord:
    fields: dict = dict(
        id=cid, cmd=SERVER, rc=0, stdout=stdout, stderr="", duration_s=1.5, timed_out=False,
        killed=False, pid=4242, role="server", round={"number": 1, "sub": 0, "label": "1"},
        tag=f"@@{cid}-pid",
    )  # fmt: skip
    fields.update(kw)
    return ProcessRecord(**fields)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    w = EvidenceWriter(tmp_path, "ssh")
    first = record("r1-a", "READY\nfirst run\n")
    second = record("r2-a", "", rc=None, timed_out=True, killed=True, stderr="hung", pid=77)
    never = record("r3-a", "", cmd="ib_write_bw -d mlx5_1", started=False, pid=None, tag="",
                   detail="not started: server n1: connection lost")  # fmt: skip
    w.record_processes("ib_pairs", "n1", [first, second, never], "10.0.0.1")
    return tmp_path


def test_spawns_are_answered_in_order_as_they_ended(bundle: Path) -> None:
    t = ReplayTransport(bundle)

    async def go() -> tuple[bool, ProcessResult, ProcessResult]:
        a = await t.spawn("n1", SERVER_ARGV, 60)
        ready = await a.wait_for_line("READY", time.monotonic() + 1)
        b = await t.spawn("n1", SERVER_ARGV, 60)
        await b.kill()  # nothing runs: only the record says how it ended
        return ready, await a.wait(), await b.wait()

    ready, a, b = asyncio.run(go())
    assert ready
    assert a == ProcessResult("n1", SERVER, 0, "READY\nfirst run\n", "", False, False, 1.5, 4242,
                              "@@r1-a-pid")  # fmt: skip
    assert b == ProcessResult("n1", SERVER, None, "", "hung", True, True, 1.5, 77, "@@r2-a-pid")
    assert t.address("n1") == "10.0.0.1" and t.address("n2") == "n2"


def test_what_the_capture_lacks_or_never_started_is_not_started(bundle: Path) -> None:
    t = ReplayTransport(bundle)

    async def spawn(node: str, cmd: tuple[str, ...]) -> str:
        with pytest.raises(SpawnError) as e:
            await t.spawn(node, cmd, 60)
        return e.value.detail

    assert asyncio.run(spawn("n1", ("ib_write_bw", "-d", "mlx5_1"))) == (
        "not started in the captured run: not started: server n1: connection lost"
    )
    assert asyncio.run(spawn("n2", SERVER_ARGV)) == f"not in the capture {bundle}: {SERVER}"

    async def third() -> str:
        await t.spawn("n1", SERVER_ARGV, 60)
        await t.spawn("n1", SERVER_ARGV, 60)
        return await spawn("n1", SERVER_ARGV)  # the capture ran it twice only

    assert asyncio.run(third()) == f"not in the capture {bundle}: {SERVER}"


def test_the_stray_check_of_a_replay_is_the_captured_one(bundle: Path) -> None:
    ledger = ProcessLedger(ReplayTransport(bundle))

    async def go() -> None:
        for _ in range(2):
            await (await ledger.spawn("n1", SERVER_ARGV, 60)).wait()

    asyncio.run(go())
    assert ledger.stray_command("n1").argv == stray_script(["@@r1-a-pid", "@@r2-a-pid"])


def test_a_live_process_result_carries_its_spawn_tag() -> None:
    async def go() -> tuple[str, ProcessResult]:
        p = await LocalTransport().spawn("n1", ("echo", "hi"), 10)
        return p.tag, await p.wait()

    tag, res = asyncio.run(go())
    assert (res.tag, res.stdout, res.rc) == (tag, "hi\n", 0)
