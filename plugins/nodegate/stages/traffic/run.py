"""Running one traffic pattern: counters before, the victim flow alone, every server of the
pattern listening (several per receiver, on distinct ports), every client at once in duration
mode (`ib_write_bw -D`), counters after. Every process through the ledger, under deadlines;
the controller records when each client ran, so that flows that did not overlap are an ERROR.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from nodegate.core.values import Part, Shell
from nodegate.framework.active.campaign import Execution, Side, Spawner, spawn_failure
from nodegate.stages.ib_pairs.perftest import READY, not_listening
from nodegate.stages.ib_pairs.profile import Rail
from nodegate.stages.traffic.plan import TrafficTest
from nodegate.stages.traffic.profile import TrafficProfile
from nodegate.transport.process import ProcessResult, RemoteProcess, SpawnError
from nodegate.transport.script import command_line

COUNTERS_SPLIT = "NODEGATE-TRAFFIC-RDMA-STATISTIC"
COUNTERS_TIMEOUT_S = 20.0
AFTER_CLIENT_S = 10.0  # a server lingering this long after its client is hung
KILLED_WAIT_S = 10.0
SLOTS = 64  # server ports per rail: port_base + 64 * rail + slot


@dataclass(frozen=True, slots=True)
class RailPath:
    """One rail as the test drives it: its HCA, its netdev on RoCE (counters), the extra
    ib_write_bw arguments (GID index, traffic class on RoCE)."""

    rail: Rail
    netdev: str | None
    extra_args: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Timing:
    """When one client ran, on the controller's clock (spawned, ended)."""

    flow: str
    start: float
    end: float


def perftest_argv(path: RailPath, prof: TrafficProfile, port: int, server: str | None) -> list[str]:
    r = path.rail
    argv: list[str] = []
    if r.numa_node is not None:
        argv += ["numactl", f"--cpunodebind={r.numa_node}", f"--membind={r.numa_node}"]
    argv += ["ib_write_bw", "-d", r.device, "-i", "1", "-p", str(port)]
    argv += ["-s", str(prof.message_bytes), "-D", str(prof.duration_s), "-F", "--report_gbits"]
    argv += list(path.extra_args)
    if server is not None:
        argv.append(server)
    return argv


def server_script(path: RailPath, prof: TrafficProfile, port: int) -> tuple[Part, ...]:
    """Start a server, report readiness once its own PID listens on the port, wait for it."""
    p = int(port)  # a number in the shell text, never a string
    return (
        *perftest_argv(path, prof, p, None),
        Shell(
            " & p=$!\n"
            "while :; do\n"
            f'  case "$(ss -Hltnp "sport = :{p}" 2>/dev/null)" in *"pid=$p,"*) break ;; esac\n'
            '  kill -0 "$p" 2>/dev/null || { wait "$p"; exit $?; }\n'
            "  sleep 0.05\n"
            "done\n"
            f"echo {READY}\n"
            'wait "$p"'
        ),
    )


def counters_command(path: RailPath) -> tuple[Part, ...]:
    """ethtool -S of the rail's netdev, then `rdma statistic show` (the roce stage's reads)."""
    assert path.netdev is not None
    return (
        "ethtool", "-S", path.netdev, Shell(f" && echo {COUNTERS_SPLIT} && "),
        "rdma", "statistic", "show",
    )  # fmt: skip


XMIT_WAIT = "xmit_wait"  # the role of the perfquery reads: `xmit_wait before`, `... after`


def xmit_wait_command(path: RailPath, lid: int) -> tuple[Part, ...]:
    """perfquery -x of one switch (every port), asked through the rail's own HCA port (the
    fabric stage's read, commands.COUNTERS_LOOP, for one LID)."""
    return ("perfquery", "-x", "-l", "-C", path.rail.device, "-P", "1", str(int(lid)))


class Runner:
    """Runs one test; what it left is an Execution plus the clients' timings. `switches`: an
    observer node of the test and the switch LIDs whose XmitWait it reads before and after
    (InfiniBand, where the fabric stage discovered them: an incast's receiver's leaf, a
    bisection's leaves and spines)."""

    def __init__(
        self, test: TrafficTest, path: RailPath, prof: TrafficProfile, addr: dict[str, str],
        spawn: Spawner, switches: tuple[str, tuple[int, ...]] | None = None,
    ) -> None:  # fmt: skip
        self.test, self.path, self.prof, self.addr, self.spawn = test, path, prof, addr, spawn
        self.switches = switches
        self.sides: list[Side] = []
        self.timings: list[Timing] = []
        self.error: str | None = None
        self.base = prof.port_base + SLOTS * path.rail.rail

    async def counters(self, phase: str) -> None:
        reads: list[tuple[str, str, tuple[Part, ...]]] = []
        if self.path.netdev is not None:
            cmd = counters_command(self.path)
            reads += [(n, "counters", cmd) for n in self.test.nodes()]
        if self.switches is not None:  # through the observer's own port on the rail
            node, lids = self.switches
            reads += [(node, f"{XMIT_WAIT}", xmit_wait_command(self.path, lid)) for lid in lids]

        async def one(node: str, role: str, cmd: tuple[Part, ...]) -> Side:
            shown = command_line(cmd)
            name = f"{role} {phase}" + (f" {cmd[-1]}" if role == XMIT_WAIT else "")
            try:
                p = await self.spawn.spawn(node, cmd, COUNTERS_TIMEOUT_S)
            except SpawnError as exc:
                why = spawn_failure(exc)
                return Side(node, name, shown, None, f"not started: {why}", why)
            return Side(node, name, shown, await p.wait())

        self.sides += await asyncio.gather(*(one(*r) for r in reads))

    async def servers(self, pairs: Sequence[tuple[str, str, int]]) -> list[RemoteProcess] | None:
        """Start a server per (flow, receiver, slot); None (and the sides say why) unless
        every one listens."""
        started: list[tuple[str, str, RemoteProcess]] = []
        ok = True
        for flow, node, slot in pairs:
            cmd = server_script(self.path, self.prof, self.base + slot)
            try:
                proc = await self.spawn.spawn(
                    node, cmd, self.prof.timeout_s + self.prof.ready_timeout_s
                )
            except SpawnError as exc:
                why = spawn_failure(exc)
                self.sides.append(Side(node, f"server {flow}", command_line(cmd), None,
                                       f"not started: {why}", why))  # fmt: skip
                self.error = self.error or f"server {node}: {why}"
                ok = False
                break
            started.append((flow, command_line(cmd), proc))
        deadline = time.monotonic() + self.prof.ready_timeout_s
        ready = await asyncio.gather(*(p.wait_for_line(READY, deadline) for _, _, p in started))
        if ok and all(ready):
            self._pending = started
            return [p for _, _, p in started]
        for (flow, shown, p), up in zip(started, ready, strict=True):
            if not p.at_eof:
                await p.kill(hang_up=False)
            s = await p.wait(time.monotonic() + KILLED_WAIT_S)
            self.sides.append(Side(p.node, f"server {flow}", shown, s))
            if not up and self.error is None:
                why = s.lost or not_listening(s, self.prof.ready_timeout_s)
                self.error = f"server {p.node}: {why}"
        self.error = self.error or "a server did not start"
        return None

    async def flows(self, flows: Sequence[tuple[str, str, str, int]], phase: str) -> None:
        """Servers for every flow, then every client at once; all collected."""
        if await self.servers([(f, dst, slot) for f, _src, dst, slot in flows]) is None:
            return
        servers = list(self._pending)

        async def client(flow: str, src: str, dst: str, slot: int) -> None:
            cmd = perftest_argv(self.path, self.prof, self.base + slot, self.addr[dst])
            t0 = time.monotonic()
            try:
                p = await self.spawn.spawn(src, cmd, self.prof.timeout_s)
            except SpawnError as exc:
                why = spawn_failure(exc)
                self.sides.append(Side(src, f"client {flow}", command_line(cmd), None,
                                       f"not started: {why}", why))  # fmt: skip
                self.error = self.error or f"client {src}: {why}"
                return
            res = await p.wait()
            # Its end by its own duration (what a replay answers with, as captured), else now.
            end = t0 + res.duration_s if res.duration_s > 0 else time.monotonic()
            self.timings.append(Timing(flow, t0, end))
            self.sides.append(Side(src, f"client {flow}", command_line(cmd), res))

        await asyncio.gather(*(client(*f) for f in flows))
        for flow, shown, p in servers:
            s = await p.wait(time.monotonic() + AFTER_CLIENT_S)
            self.sides.append(Side(p.node, f"server {flow}", shown, s))
        _ = phase

    async def run(self) -> tuple[Execution, list[Timing]]:
        t = self.test
        await self.counters("before")
        if t.kind == "incast":
            if t.victim is not None:
                v, w = t.victim
                await self.flows([(f"alone {v}->{w}", v, w, 0)], "alone")
            if self.error is None:
                flows = [(f, s, d, i + 1) for i, (f, s, d) in enumerate(t.flows())]
                await self.flows(flows, "load")
        else:
            await self.flows([(f, s, d, 0) for f, s, d in t.flows()], "load")
        await self.counters("after")
        return Execution(tuple(self.sides), self.error), self.timings


def channels(test: TrafficTest, counters: bool, switches: int = 0) -> int:
    """Processes a test starts: counter reads before and after (and the XmitWait reads of
    `switches` switches), a server and a client per flow, and the victim's alone pair."""
    reads = (2 * len(test.nodes()) if counters else 0) + 2 * switches
    flows = len(test.flows()) + (1 if test.victim is not None else 0)
    return reads + 2 * flows


def client_result(run: Execution, flow: str) -> ProcessResult | None:
    for s in run.sides:
        if s.role == f"client {flow}":
            return s.result
    return None
