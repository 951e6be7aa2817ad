"""Running one planned ib_write_bw test between two nodes, and reading what it left.

Server first, on node A: `ib_write_bw` in the background, then poll `ss` until *that process*
listens on the rail's port (never a fixed sleep: perftest prints its "Waiting for client"
banner before it binds, and buffered), then the client on node B towards A's data-plane
address. Both run under deadlines; a server still there after the client is done is killed by
PID and reported; one that exits before it listens is reported with its rc and stderr. A node
that cannot run its side (unreachable, connection lost) is that side's `lost`: its error, not
the test's. Sanity reads both sides through the perftest parser.
"""

from __future__ import annotations

import time

from nodegate.core.errors import ParseError
from nodegate.core.values import Part, Shell
from nodegate.framework.active.campaign import Execution, Side, Spawner, spawn_failure
from nodegate.framework.active.rounds import Sanity
from nodegate.parsers.perftest import PerftestResult, parse_ib_write_bw
from nodegate.parsers.perftest_failure import PerftestFailure
from nodegate.stages.ib_pairs.plan import PairTest
from nodegate.stages.ib_pairs.profile import IbPairsProfile, Method, Rail
from nodegate.transport.process import ProcessResult, SpawnError
from nodegate.transport.script import command_line

READY = "NODEGATE-PERFTEST-LISTENING"
SERVER_AFTER_CLIENT_S = 10.0  # a server lingering this long after its client is hung
KILLED_WAIT_S = 10.0  # collecting a side that was just killed


def perftest_argv(rail: Rail, m: Method, port_base: int, server_addr: str | None) -> list[str]:
    argv = []
    if rail.numa_node is not None:
        argv += ["numactl", f"--cpunodebind={rail.numa_node}", f"--membind={rail.numa_node}"]
    argv += ["ib_write_bw", "-d", rail.device, "-i", "1", "-p", str(port_base + rail.rail)]
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


def server_script(rail: Rail, prof: IbPairsProfile) -> tuple[Part, ...]:
    """Start the server, report readiness once its own PID listens on the port, wait for it."""
    port = int(prof.port_base + rail.rail)  # a number in the shell text, never a string
    return (
        *perftest_argv(rail, prof.method, prof.port_base, None),
        Shell(
            " & p=$!\n"
            "while :; do\n"
            f'  case "$(ss -Hltnp "sport = :{port}" 2>/dev/null)" in *"pid=$p,"*) break ;; esac\n'
            '  kill -0 "$p" 2>/dev/null || { wait "$p"; exit $?; }\n'
            "  sleep 0.05\n"
            "done\n"
            f"echo {READY}\n"
            'wait "$p"'
        ),
    )


def client_command(rail: Rail, prof: IbPairsProfile, server_addr: str) -> tuple[Part, ...]:
    return tuple(perftest_argv(rail, prof.method, prof.port_base, server_addr))


async def run_pair(
    test: PairTest, rail: Rail, prof: IbPairsProfile, server_addr: str, spawn: Spawner
) -> Execution:
    """Server, readiness, client, both collected under deadlines; nothing judged here. A node
    that cannot run its side (unreachable, connection lost) is named in the sides' `lost`."""
    srv, cli = server_script(rail, prof), client_command(rail, prof, server_addr)
    srv_cmd, cli_cmd = command_line(srv), command_line(cli)  # what the evidence shows

    def sides(s: ProcessResult | None, why: str, lost: str | None = None) -> tuple[Side, ...]:
        """The server (as far as it got) and a client that never started, and why."""
        return (
            Side(test.server, "server", srv_cmd, s, "" if s else why, None if s else lost),
            Side(test.client, "client", cli_cmd, None, why, lost if s else None),
        )

    try:
        server = await spawn.spawn(test.server, srv, prof.timeout_s + prof.ready_timeout_s)
    except SpawnError as exc:
        lost = spawn_failure(exc)
        why = f"server {test.server}: {lost}"
        return Execution(sides(None, f"not started: {why}", lost), why)
    ready = await server.wait_for_line(READY, time.monotonic() + prof.ready_timeout_s)
    if not ready:
        if not server.at_eof:  # still running at the deadline (an ended one keeps its rc)
            await server.kill(hang_up=False)
        s = await server.wait(time.monotonic() + KILLED_WAIT_S)
        why = (
            f"server {test.server}: {s.lost}" if s.lost else not_listening(s, prof.ready_timeout_s)
        )
        return Execution(sides(s, f"not started: {why}"), why)
    try:
        client = await spawn.spawn(test.client, cli, prof.timeout_s)
    except SpawnError as exc:
        await server.kill(hang_up=False)
        s = await server.wait(time.monotonic() + KILLED_WAIT_S)
        lost = spawn_failure(exc)
        why = f"client {test.client}: {lost}"
        return Execution(sides(s, f"not started: {why}", lost), why)
    c = await client.wait()
    s = await server.wait(time.monotonic() + SERVER_AFTER_CLIENT_S)
    return Execution(
        (Side(test.server, "server", srv_cmd, s), Side(test.client, "client", cli_cmd, c))
    )


def not_listening(server: ProcessResult, ready_timeout_s: float) -> str:
    """Why a server never listened: it exited (with its rc) or was still starting at the
    deadline; with its stderr's first and last lines."""
    gist = stderr_gist(server.stderr)
    if server.killed or server.rc is None:
        return f"server did not listen within {ready_timeout_s:g} s: {gist}"
    return f"server exited {server.rc} before listening: {gist}"


def stderr_gist(stderr: str) -> str:
    """The first and last non-empty lines of `stderr` (200 characters each), or "no output".

    >>> stderr_gist("numactl: warning\\nsh: 1: ib_write_bw: not found\\n")
    'numactl: warning ... sh: 1: ib_write_bw: not found'
    """
    lines = [line.strip()[:200] for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "no output"
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


def bandwidth_of(res: ProcessResult, side: str) -> tuple[float | None, str | None]:
    """(BW average Gb/s of the largest message, error text) from one side's output."""
    if res.overflow is not None:
        return None, f"{side} {res.overflow}"
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


def pair_sanity(test: PairTest, run: Execution) -> Sanity:
    """The client's bandwidth (the server's if the client has none), or why it cannot count."""
    if run.error is not None:
        return Sanity(None, run.error)
    server, client = run.sides
    assert server.result is not None and client.result is not None
    bw, err = bandwidth_of(client.result, "client")
    s_bw, s_err = bandwidth_of(server.result, "server")
    if server.result.killed:
        s_err = (
            f"server on {test.server} still running {SERVER_AFTER_CLIENT_S:g} s after the "
            "client finished: killed"
        )
    err = err or s_err
    if bw is None and s_bw is not None and err is None:
        bw = s_bw
    return Sanity(bw, err)
