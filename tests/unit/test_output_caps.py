"""A spawned process that floods is judged an ERROR for it, never read as a measurement: the
ib_pairs and nccl readers, and srun's capped streams on the controller."""

from __future__ import annotations

import asyncio

from nodegate.framework.active.campaign import Execution, Side
from nodegate.stages.ib_pairs.perftest import bandwidth_of
from nodegate.stages.nccl.launch import _drain
from nodegate.stages.nccl.results import read_job
from nodegate.transport.process import ProcessResult, overflow_reason

FLOOD = overflow_reason("stdout", 8388608)


def flooded(stdout: str) -> ProcessResult:
    return ProcessResult("gpu001", "x", None, stdout, "", False, True, 1.0, overflow=FLOOD)


def test_ib_write_bw_that_flooded_is_an_error_whatever_it_printed() -> None:
    good = " 8388608    5000     390.11     389.87     0.005811\n"
    assert bandwidth_of(flooded(good), "client") == (None, f"client {FLOOD}")


def test_an_nccl_launcher_that_flooded_is_an_error() -> None:
    run = Execution((Side("gpu001", "mpirun", "mpirun ...", flooded("# Avg bus bandwidth"), ""),))
    reading = read_job(run, 8589934592, 16, 60)
    assert reading.error == f"launcher {FLOOD}"
    assert reading.busbw is None


def test_srun_streams_keep_at_most_the_cap_and_drain_the_rest(monkeypatch) -> None:
    from nodegate.transport.process import RemoteProcess

    monkeypatch.setattr(RemoteProcess, "max_bytes", 1000)

    async def go() -> tuple[bytes, list[str], bool]:
        stream = asyncio.StreamReader()
        stream.feed_data(b"y\n" * 5000)
        stream.feed_eof()
        over: list[str] = []
        full = asyncio.Event()
        return await _drain(stream, "stdout", over, full), over, full.is_set()

    kept, over, full = asyncio.run(go())
    assert (len(kept), over, full) == (1000, [overflow_reason("stdout", 1000)], True)
