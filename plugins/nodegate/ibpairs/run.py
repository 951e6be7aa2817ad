"""Running one planned ib_write_bw test between two nodes over the transport.

Server first, on node A: `ib_write_bw` in the background, then poll `ss` until *that process*
listens on the rail's port (never a fixed sleep: perftest prints its "Waiting for client"
banner before it binds, and buffered), then the client on node B towards A. Both run under
deadlines; a server still there after the client is done is killed by PID and reported.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodegate.errors import ParseError
from nodegate.ibpairs.plan import PairResult, PairTest
from nodegate.parsers.perftest import PerftestFailure, PerftestResult, parse_ib_write_bw
from nodegate.transport.base import Transport
from nodegate.transport.process import ProcessResult, SpawnError

READY = "NODEGATE-PERFTEST-LISTENING"
SERVER_AFTER_CLIENT_S = 10.0  # a server lingering this long after its client is hung


@dataclass(frozen=True, slots=True)
class Rail:
    rail: int
    device: str
    gpu_index: int | None
    numa_node: int | None


@dataclass(frozen=True, slots=True)
class Method:
    message_bytes: int
    iterations: int
    bidirectional: bool
    qps: int
    gpudirect: bool
    extra_args: tuple[str, ...]
    floor_gbps: float
    port_base: int
    timeout_s: float
    ready_timeout_s: float

    @classmethod
    def from_profile(cls, sec: Mapping[str, Any]) -> Method:
        m = sec["method"]
        return cls(
            message_bytes=int(m["message_bytes"]),
            iterations=int(m["iterations"]),
            bidirectional=bool(m["bidirectional"]),
            qps=int(m["qps"]),
            gpudirect=bool(m["gpudirect"]),
            extra_args=tuple(m.get("extra_args", ())),
            floor_gbps=float(sec["floor_gbps"]),
            port_base=int(sec["port_base"]),
            timeout_s=float(sec["timeout_s"]),
            ready_timeout_s=float(sec["ready_timeout_s"]),
        )

    def describe(self) -> str:
        way = "bidirectional" if self.bidirectional else "unidirectional"
        gd = "GPUDirect" if self.gpudirect else "host memory"
        return (
            f"ib_write_bw {way}, {self.message_bytes} B messages x {self.iterations}, "
            f"{self.qps} QP(s), {gd}; floor {self.floor_gbps:g} Gb/s"
        )


def perftest_argv(rail: Rail, m: Method, server_addr: str | None) -> list[str]:
    argv = []
    if rail.numa_node is not None:
        argv += ["numactl", f"--cpunodebind={rail.numa_node}", f"--membind={rail.numa_node}"]
    argv += ["ib_write_bw", "-d", rail.device, "-i", "1", "-p", str(m.port_base + rail.rail)]
    argv += ["-s", str(m.message_bytes), "-n", str(m.iterations), "-q", str(m.qps)]
    argv += ["-F", "--report_gbits"]
    if m.bidirectional:
        argv.append("-b")
    if m.gpudirect and rail.gpu_index is not None:
        argv.append(f"--use_cuda={rail.gpu_index}")
    argv += list(m.extra_args)
    if server_addr is not None:
        argv.append(server_addr)
    return argv


def server_script(rail: Rail, m: Method) -> str:
    """Start the server, report readiness once its own PID listens on the port, wait for it."""
    cmd = " ".join(shlex.quote(a) for a in perftest_argv(rail, m, None))
    port = m.port_base + rail.rail
    return (
        f"{cmd} & p=$!\n"
        "while :; do\n"
        f'  case "$(ss -Hltnp "sport = :{port}" 2>/dev/null)" in *"pid=$p,"*) break ;; esac\n'
        '  kill -0 "$p" 2>/dev/null || { wait "$p"; exit $?; }\n'
        "  sleep 0.05\n"
        "done\n"
        f"echo {READY}\n"
        'wait "$p"'
    )


def bandwidth_of(res: ProcessResult, side: str) -> tuple[float | None, str | None]:
    """(BW average Gb/s of the largest message, error text) from one side's output."""
    if res.timed_out:
        return None, f"{side} killed at its deadline after {res.duration_s:g} s"
    text = res.stdout + ("\n" + res.stderr if res.stderr else "")
    try:
        parsed = parse_ib_write_bw(text, side)  # type: ignore[arg-type]
    except ParseError as exc:
        return None, f"{side}: unrecognized ib_write_bw output: {exc.reason}"
    if isinstance(parsed, PerftestFailure):
        return None, f"{side}: {parsed.message}"
    assert isinstance(parsed, PerftestResult)
    if res.rc != 0:
        return None, f"{side}: ib_write_bw exited {res.rc}: {res.stderr.strip()[:200]}"
    if not parsed.rows:
        return None, f"{side}: no result row"
    return parsed.rows[-1].bw_average_gbps, None


@dataclass(frozen=True, slots=True)
class TestRun:
    """A test's outcome plus both sides' raw results (evidence)."""

    result: PairResult
    server: ProcessResult | None
    client: ProcessResult | None
    server_cmd: str
    client_cmd: str


async def run_test(
    transport: Transport,
    test: PairTest,
    rail: Rail,
    m: Method,
    server_addr: str,
    round_label: str,
) -> TestRun:
    srv_cmd = server_script(rail, m)
    cli_cmd = " ".join(shlex.quote(a) for a in perftest_argv(rail, m, server_addr))
    deadline_s = m.timeout_s

    def done(
        passed: bool,
        bw: float | None,
        err: str | None,
        s: ProcessResult | None,
        c: ProcessResult | None,
    ) -> TestRun:
        return TestRun(PairResult(test, round_label, passed, bw, err), s, c, srv_cmd, cli_cmd)

    try:
        server = await transport.spawn(test.server, srv_cmd, deadline_s + m.ready_timeout_s)
    except SpawnError as exc:
        return done(False, None, f"server {test.server}: {exc.detail}", None, None)
    ready = await server.wait_for_line(READY, time.monotonic() + m.ready_timeout_s)
    if not ready:
        await server.kill()
        s = await server.wait(time.monotonic() + 10)
        why = (s.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return done(
            False, None, f"server did not listen within {m.ready_timeout_s:g} s: {why}", s, None
        )
    try:
        client = await transport.spawn(test.client, cli_cmd, deadline_s)
    except SpawnError as exc:
        await server.kill()
        s = await server.wait(time.monotonic() + 10)
        return done(False, None, f"client {test.client}: {exc.detail}", s, None)
    c = await client.wait()
    s = await server.wait(time.monotonic() + SERVER_AFTER_CLIENT_S)
    bw, err = bandwidth_of(c, "client")
    s_bw, s_err = bandwidth_of(s, "server")
    if s.killed:
        s_err = (
            f"server on {test.server} still running {SERVER_AFTER_CLIENT_S:g} s after the "
            "client finished: killed"
        )
    err = err or s_err
    if bw is None and s_bw is not None and err is None:
        bw = s_bw
    passed = err is None and bw is not None and bw >= m.floor_gbps
    return done(passed, bw, err, s, c)


async def run_round(
    transport: Transport,
    tests: Sequence[PairTest],
    rails: Mapping[int, Rail],
    m: Method,
    address: Mapping[str, str],
    round_label: str,
    *,
    limit: int,
    rails_concurrent: bool,
) -> list[TestRun]:
    """All tests of a round at once (bounded by `limit`); rails of one pair serially if asked."""
    sem = asyncio.Semaphore(limit)

    async def one(t: PairTest) -> TestRun:
        async with sem:
            return await run_test(transport, t, rails[t.rail], m, address[t.server], round_label)

    if rails_concurrent:
        return list(await asyncio.gather(*(one(t) for t in tests)))
    by_pair: dict[tuple[str, str], list[PairTest]] = {}
    for t in tests:
        by_pair.setdefault((t.server, t.client), []).append(t)

    async def serial(ts: list[PairTest]) -> list[TestRun]:
        return [await one(t) for t in sorted(ts)]

    nested = await asyncio.gather(*(serial(ts) for ts in by_pair.values()))
    return [r for rs in nested for r in rs]
