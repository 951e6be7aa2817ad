"""Running the load on one node: its topology, then the telemetry sampler, then each load in
turn while it samples, one more full sample after the load, then the kernel log of the load's
window.

    topology     nvidia-smi topo -m (each GPU's NUMA node, the NICs on its PCIe switch)
    sampler      nvidia-smi --query-gpu=... --format=csv -lms N (started first; the load starts
                 once its header and first sample are read: the samples cover the load)
    nvbandwidth  the level's testcases, one run
    dcgmi        diag -r <3|4> -p <burn> -j, when the level asks for DCGM stress
    after        one more sample per GPU after the last load ended (waited for up to three
                 intervals), then the sampler is killed by PID: its `killed` is expected, and a
                 sampler that ended on its own did not cover the load (its checks ERROR)
    kernel_log   journalctl -k --since <first sample's timestamp>: Xids logged under load

Every process goes through the ledger's spawn under its deadline; the sampler is read while
the load runs (so its channel never fills). A node that cannot run its side is `lost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

from nodegate.core.values import Part
from nodegate.framework.active.campaign import Execution, Side, Spawner, spawn_failure
from nodegate.stages.gpu_load.commands import (
    DCGM,
    KERNEL_LOG,
    NVBANDWIDTH,
    SAMPLER,
    TOPOLOGY,
    dcgm_argv,
    kernel_log_argv,
    nvbandwidth_argv,
    sampler_argv,
    topology_argv,
)
from nodegate.stages.gpu_load.profile import GpuLoadProfile
from nodegate.transport.process import RemoteProcess, SpawnError
from nodegate.transport.script import command_line

FIRST_SAMPLE_S = 30.0  # the sampler's header and first row
KILLED_WAIT_S = 10.0
KERNEL_LOG_TIMEOUT_S = 60.0
TOPOLOGY_TIMEOUT_S = 60.0
READ_SLICE_S = 0.5
UNCOVERED = "the samples do not cover the load"  # a sampler that stopped before it ended
# A timestamp cell of the CSV, read back only to name the window: digits and separators.
_STAMP = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) (\d{2}:\d{2}:\d{2})")


class Sampler:
    """Reads the sampler's lines as they come; counts data rows."""

    def __init__(self, proc: RemoteProcess) -> None:
        self.proc = proc
        self.rows = 0
        self.first_stamp: str | None = None
        self.gpus: set[str] = set()
        self._stop = False

    async def read(self, until_rows: int, deadline: float) -> bool:
        """Read until `until_rows` data rows were seen (True) or EOF/deadline (False)."""
        while self.rows < until_rows:
            line = await self.proc.read_line(min(deadline, time.monotonic() + READ_SLICE_S))
            if line is None:
                if self.proc.at_eof or self.proc.overflow or time.monotonic() >= deadline:
                    return False
                continue
            self._count(line)
        return True

    async def follow(self) -> None:
        """Keep reading while the load runs (stopped by `stop`)."""
        while not self._stop:
            line = await self.proc.read_line(time.monotonic() + READ_SLICE_S)
            if line is None:
                if self.proc.at_eof or self.proc.overflow:
                    return
                continue
            self._count(line)

    def stop(self) -> None:
        self._stop = True

    def _count(self, line: str) -> None:
        cells = [c.strip() for c in line.split(",")]
        if not cells or cells[0] == "timestamp" or not _STAMP.match(cells[0]):
            return
        self.rows += 1
        if len(cells) > 1:
            self.gpus.add(cells[1])
        if self.first_stamp is None:
            m = _STAMP.match(cells[0])
            assert m is not None
            self.first_stamp = f"{m[1]}-{m[2]}-{m[3]} {m[4]}"


async def _one(
    spawn: Spawner, node: str, role: str, argv: tuple[Part, ...], timeout_s: float
) -> Side:
    cmd = command_line(argv)
    try:
        proc = await spawn.spawn(node, argv, timeout_s)
    except SpawnError as exc:
        why = spawn_failure(exc)
        return Side(node, role, cmd, None, f"not started: {why}", why)
    return Side(node, role, cmd, await proc.wait())


async def run_load(node: str, p: GpuLoadProfile, spawn: Spawner) -> Execution:
    """Topology, sampler, loads, last sample, kernel log; nothing judged here."""
    topo = await _one(spawn, node, TOPOLOGY, topology_argv(), TOPOLOGY_TIMEOUT_S)
    if topo.lost_why is not None:
        return Execution((topo,), topo.lost_why)
    s_argv = sampler_argv(p)
    s_cmd = command_line(s_argv)
    try:
        proc = await spawn.spawn(node, s_argv, p.timeout_s)
    except SpawnError as exc:
        why = spawn_failure(exc)
        side = Side(node, SAMPLER, s_cmd, None, f"not started: {why}", why)
        return Execution((topo, side), why)
    sampler = Sampler(proc)
    if not await sampler.read(1, time.monotonic() + FIRST_SAMPLE_S):
        await proc.kill(hang_up=False)
        res = await proc.wait(time.monotonic() + KILLED_WAIT_S)
        why = res.lost or f"telemetry sampler gave no sample within {FIRST_SAMPLE_S:g} s"
        return Execution((topo, Side(node, SAMPLER, s_cmd, res)), why)
    follower = asyncio.ensure_future(sampler.follow())
    sides: list[Side] = []
    try:
        if p.run.testcases:
            sides.append(
                await _one(spawn, node, NVBANDWIDTH, nvbandwidth_argv(p), p.nvbandwidth_timeout_s)
            )
        if p.run.dcgm_level is not None:
            sides.append(await _one(spawn, node, DCGM, dcgm_argv(p), p.dcgm_timeout_s))
    finally:
        sampler.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    # One more sample of every GPU after the load: the samples span all of it.
    after = sampler.rows + max(1, len(sampler.gpus))
    wait_s = 3 * p.telemetry.interval_ms / 1000 + 10
    await sampler.read(after, time.monotonic() + wait_s)
    if not proc.at_eof:
        await proc.kill(hang_up=False)
    res = await proc.wait(time.monotonic() + KILLED_WAIT_S)
    # nvidia-smi -lms runs until killed: one that ended on its own (a crash, a lost driver)
    # stopped sampling before the load ended. Read from the result, so a replay of the
    # capture (its kill as recorded) judges the same.
    gap = (
        "" if res.killed else f"{UNCOVERED}: the sampler exited {res.rc} before the stage ended it"
    )
    out = [topo, Side(node, SAMPLER, s_cmd, res, gap), *sides]
    if sampler.first_stamp is not None and not any(s.lost_why for s in out):
        argv = kernel_log_argv(sampler.first_stamp)
        out.append(await _one(spawn, node, KERNEL_LOG, argv, KERNEL_LOG_TIMEOUT_S))
    return Execution(tuple(out))
