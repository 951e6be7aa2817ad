"""Launching one all_reduce_perf job: Open MPI `mpirun` from the job's first node over SSH, or
Slurm `srun` from the controller. Both under the job's deadline; on timeout, interrupt or
failure every rank is killed (through the launcher first, then by PID) and the stage's stray
check looks for what is left.

Under `--transport slurm` (`Transport.placement`) a job whose nodes are all in the run's
allocation stays inside it: mpirun's hostfile names the nodes as Slurm does and Open MPI starts
its daemons with `srun --overlap` (`plm slurm`), the slots coming from the hostfile (`ras
^slurm`: the allocation's one CPU per node would refuse a second rank); srun runs as a step of
the allocation (`--jobid --overlap --overcommit`). A job with a node the scheduler holds
(drained, reached over SSH) is launched as over SSH, data-plane hostfile and `plm rsh`, even
from a first node inside a Slurm step; srun cannot start ranks there and says so.

mpirun runs through the ledger's spawn on the first node, so it carries NODEGATE_SPAWN and is
killed by PID; `-x NODEGATE_SPAWN` passes the tag to every rank on every node. srun is a local
child of the controller (where SLURM_CONF points at the cluster): SIGINT twice cancels its
step, SIGKILL after a grace, `scancel` of its job name after that; its ranks inherit the tag
from srun's environment (srun exports the caller's environment by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from nodegate.core.values import Part, Shell
from nodegate.framework.active.campaign import Execution, Side, Spawner, spawn_failure
from nodegate.framework.active.ledger import SpawnScope
from nodegate.stages.nccl.plan import NcclJob
from nodegate.stages.nccl.profile import COLLECTIVES, NcclProfile
from nodegate.transport.process import (
    SPAWN_ENV,
    ProcessResult,
    RemoteProcess,
    SpawnError,
    overflow_reason,
)
from nodegate.transport.script import command_line

SRUN_GRACE_S = 5.0  # after srun's second SIGINT, before SIGKILL
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
# NCCL_DEBUG=INFO from every rank of a large job would pass the output cap (8 MiB a stream):
# mpirun's stdout goes through this filter on the launching node, which keeps every line that
# is not NCCL INFO (the table, failures, WARN) and, per host, DEBUG_KEEP lines of each kind the
# transport check reads (parsers/nccl_debug.py) -- GPU Direct RDMA per HCA, channels with and
# without GDRDMA apart -- and drops the other INFO lines: a few KiB per node, whatever its ranks.
DEBUG_KEEP = 3
DEBUG_FILTER = (
    "awk -v keep=" + str(DEBUG_KEEP) + " '"
    "/ NCCL INFO / { if (match($0, /NCCL version|Using network [^ ]+|NET\\/IB : (Using|No device)|"
    "NET\\/Socket : Using|GPU Direct RDMA [A-Za-z]+ for HCA [0-9]+|via NET\\/[A-Za-z]+|"
    "via COLLNET|Connected CollNet|coll channels|NVLS multicast|Connected all rings/)) { "
    'k = substr($1, 1, index($1, ":")) SUBSEP substr($0, RSTART, RLENGTH) '
    'SUBSEP (index($0, "/GDRDMA") > 0); if (n[k]++ < keep) { print; fflush() } } next } '
    "{ print; fflush() }'"
)
SLACK_S = 15.0  # launcher start-up beyond the job's own deadline
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a name placed in the script as written


def perf_argv(prof: NcclProfile, job: NcclJob | None = None) -> list[str]:
    """all_reduce_perf's arguments: the sweep, one GPU per rank, data checked; a matrix job:
    its collective's binary at its scale's one size and iterations."""
    s = prof.sweep
    if job is not None and job.phase == "matrix" and prof.matrix is not None:
        sc = next(x for x in prof.matrix.scales if x.name == job.scale)
        size = str(sc.message_bytes)
        return [
            COLLECTIVES[job.collective], "-b", size, "-e", size, "-f", "2", "-g", "1", "-c", "1",
            "-n", str(sc.iterations), "-w", str(min(prof.warmup_iterations, sc.iterations)),
        ]  # fmt: skip
    return [
        "all_reduce_perf", "-b", str(s.min_bytes), "-e", str(s.max_bytes),
        "-f", str(s.step_factor), "-g", "1", "-c", "1",
        "-n", str(prof.iterations), "-w", str(prof.warmup_iterations),
    ]  # fmt: skip


def job_env(
    prof: NcclProfile, extra: Mapping[str, str], comm_id: str, job: NcclJob | None = None
) -> dict[str, str]:
    """NCCL_*/UCX_* for every rank: the profile's, the RoCE settings, the bootstrap root;
    NCCL_ALGO=Ring for the matrix's two-node scale (NCCL's default there can beat the net);
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET when the profile asserts a transport (the lines
    `nccl.transport` reads: every one of them is INIT or NET, parsers/nccl_debug.py)."""
    env = dict(prof.env)
    env.update(extra)
    if job is not None and job.scale == "two_node_ring":
        env["NCCL_ALGO"] = "Ring"
    if prof.transport is not None:
        env.update(DEBUG_ENV)
    env["NCCL_COMM_ID"] = comm_id
    return dict(sorted(env.items()))


# Open MPI inside a Slurm allocation: daemons through srun steps that may share the CPUs of the
# other steps (the run's stage steps, the other jobs of a round), slots from the hostfile.
# `--nodelist` for those steps: Open MPI names the nodes itself only when it starts daemons
# on fewer nodes than it knows of, and with the hostfile as its allocation it would leave srun
# free to pick any node of the job (a node that names it otherwise, as the first node's own
# when mpirun sees it is local, comes after ours and wins).
IN_ALLOCATION_MCA = (("plm", "slurm"), ("ras", "^slurm"))
# mpirun in a Slurm step for a job with nodes outside the allocation: over SSH, as ever.
OUTSIDE_ALLOCATION_MCA = (("plm", "rsh"), ("ras", "^slurm"))
# A step's SLURM_JOB_NODELIST lists the step's nodes only, and the srun Open MPI runs for its
# daemons would refuse the job's others ("Only allocated 1 nodes asked for 2"); without it srun
# asks the controller for the job's nodes.
STEP_ENV_RESET = "unset SLURM_JOB_NODELIST\n"
MpirunMode = Literal["ssh", "allocation", "step"]


def mpirun_script(
    prof: NcclProfile,
    hosts: Sequence[str],
    env: Mapping[str, str],
    mode: MpirunMode = "ssh",
    job: NcclJob | None = None,
) -> tuple[Part, ...]:
    """The launcher's shell script on the job's first node: the hostfile (one line per node:
    its data-plane address, or its Slurm name in `allocation` mode), the environment, then
    mpirun (`mode`: see the module's docstring)."""
    rpn = prof.ranks_per_node
    argv: list[Part] = ["mpirun", "--hostfile", Shell(' "$hf" '), "-np", str(rpn * len(hosts))]
    argv += ["--map-by", f"ppr:{rpn}:node", "--bind-to", "numa"]
    mca: tuple[tuple[str, str], ...] = {
        "ssh": (), "allocation": IN_ALLOCATION_MCA, "step": OUTSIDE_ALLOCATION_MCA
    }[mode]  # fmt: skip
    if mode == "allocation":
        mca += (("plm_slurm_args", f"--overlap --nodelist={','.join(hosts)}"),)
    for key, value in (*prof.mpirun_mca, *mca):
        argv += ["--mca", key, value]
    for name in [*env, SPAWN_ENV]:
        argv += ["-x", name]
    argv += [*prof.mpirun_args, *perf_argv(prof, job)]
    filtered = prof.transport is not None  # NCCL_DEBUG=INFO: through DEBUG_FILTER, rc kept
    script: list[Part] = [
        Shell(
            'hf=$(mktemp "${TMPDIR:-/tmp}/nodegate-nccl-hosts.XXXXXX") || exit 70\n'
            "trap 'rm -f \"$hf\"' EXIT\n"
            "trap 'exit 143' TERM INT\n"
            "printf '%s\\n' "
        ),
        *(f"{a} slots={rpn}" for a in hosts),
        Shell(' > "$hf"\n'),
    ]
    if mode == "allocation":
        script.append(Shell(STEP_ENV_RESET))
    for k, v in env.items():
        if not _ENV_NAME.fullmatch(k):  # the schema allows (NCCL|UCX)_[A-Z0-9_]+ only
            raise ValueError(f"not an environment variable name: {k!r}")
        script += [Shell(f"{k}="), v, Shell(f"; export {k}\n")]
    if filtered:  # mpirun's status through fd 4, its filtered stdout through fd 3
        tail = Shell(f'; echo $? >&4; }} | {DEBUG_FILTER} >&3; }} 4>&1)\nexit "$rc"\n')
        return (*script, Shell("exec 3>&1\nrc=$({ { "), *argv, tail)
    return (*script, *argv)


async def run_mpirun(
    nodes: Sequence[str], script: Sequence[Part], timeout_s: float, spawn: Spawner
) -> Execution:
    """mpirun on the first node; the other nodes run ranks only (checked for the tag after)."""
    first, cmd = nodes[0], command_line(script)
    try:
        proc = await spawn.spawn(first, script, timeout_s)
    except SpawnError as exc:
        lost = spawn_failure(exc)
        side = Side(first, "launcher", cmd, None, f"not started: {lost}", lost)
        return Execution((side,), f"launcher {first}: {lost}")
    result = await proc.wait()
    return Execution((Side(first, "launcher", cmd, result),))


def srun_argv(
    prof: NcclProfile,
    nodes: Sequence[str],
    timeout_s: float,
    name: str,
    job: str | None = None,
    test: NcclJob | None = None,
) -> list[str]:
    """srun's arguments; `job`: the allocation the ranks run in (a step of it), else their own.

    A step of the allocation may start more ranks than the CPUs the allocation holds on a
    node (`--overcommit`: the run's allocation asks for nodes, one CPU each by default)."""
    minutes = max(1, int(timeout_s // 60) + 1)  # Slurm's own limit, past ours
    inside = [f"--jobid={job}", "--overlap", "--overcommit"] if job is not None else []
    return [
        "srun", *inside, "-N", str(len(nodes)), f"--ntasks-per-node={prof.ranks_per_node}",
        f"--mpi={prof.srun_mpi}", "-w", ",".join(nodes), "-J", name,
        "--kill-on-bad-exit=1", f"--time={minutes}", *prof.srun_args, *perf_argv(prof, test),
    ]  # fmt: skip


async def run_srun(
    prof: NcclProfile,
    nodes: Sequence[str],
    env: Mapping[str, str],
    timeout_s: float,
    spawn: Spawner,
    names: Sequence[str] | None = None,
    job: str | None = None,
    test: NcclJob | None = None,
) -> Execution:
    """srun on the controller, its ranks on `nodes` (`names`: as Slurm knows them), in the
    allocation `job` when given; `test`: a matrix job's collective and scale."""
    tag = f"@@{secrets.token_hex(8)}-srun"
    name = f"nodegate-nccl-{tag[2:18]}"
    argv = srun_argv(prof, names or nodes, timeout_s, name, job, test)
    cmd = command_line(argv)  # what the evidence shows; srun itself runs as an argv
    if isinstance(spawn, SpawnScope):
        spawn.ledger.watch(nodes, [tag])  # the ranks carry the tag: the stray check looks
    t0 = time.monotonic()
    # NCCL_DEBUG=INFO: srun's stdout through DEBUG_FILTER on the controller (as mpirun's on
    # its node), which reads from a pipe srun writes; srun's own status and stderr unchanged.
    flt, wfd = None, None
    try:
        if prof.transport is not None:
            rfd, wfd = os.pipe()
            try:
                flt = await asyncio.create_subprocess_exec(
                    "sh", "-c", DEBUG_FILTER, stdin=rfd, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip
            finally:
                os.close(rfd)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if wfd is None else wfd,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **env, SPAWN_ENV: tag},
            start_new_session=True,
        )
    except OSError as exc:
        why = f"srun could not start on the controller: {exc}"
        if wfd is not None:
            os.close(wfd)
            wfd = None
            if flt is not None:
                await flt.wait()  # at the pipe's end
        return Execution((Side(nodes[0], "srun", cmd, None, why),), why)
    finally:
        if wfd is not None:
            os.close(wfd)  # srun holds its copy: the filter ends when srun does
    timed_out = killed = False
    overflow: list[str] = []  # what the ranks printed is kept up to the cap, like a spawn's
    full = asyncio.Event()
    stdout = proc.stdout if flt is None else flt.stdout
    assert stdout is not None and proc.stderr is not None
    readers = asyncio.gather(
        _drain(stdout, "stdout", overflow, full), _drain(proc.stderr, "stderr", overflow, full)
    )
    stopper = asyncio.ensure_future(full.wait())
    try:
        waiters: set[asyncio.Future[Any]] = {readers, stopper}
        done, _ = await asyncio.wait(
            waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        if readers not in done:  # the deadline, or output past the cap: end the step
            timed_out, killed = not overflow, True
            await stop_srun(proc, name)
        out, err = await asyncio.wait_for(readers, SRUN_GRACE_S * 2)  # EOF once srun is gone
        await proc.wait()
        if flt is not None:
            await flt.wait()
    except BaseException:
        await asyncio.shield(stop_srun(proc, name))
        readers.cancel()
        raise
    finally:
        stopper.cancel()
    result = ProcessResult(
        node=nodes[0], cmd=cmd, rc=None if killed else proc.returncode,
        stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
        timed_out=timed_out, killed=killed, duration_s=round(time.monotonic() - t0, 3),
        pid=proc.pid, tag=tag, overflow=overflow[0] if overflow else None,
    )  # fmt: skip
    detail = "srun ran on the controller"
    return Execution((Side(nodes[0], "srun", cmd, result, detail),))


async def _drain(
    stream: asyncio.StreamReader, name: str, overflow: list[str], full: asyncio.Event
) -> bytes:
    """One of srun's streams to its end, keeping at most the byte cap; past it, the rest is
    read and dropped (srun must not block on a full pipe) and `full` is set."""
    cap = RemoteProcess.max_bytes
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) + len(chunk) > cap and not full.is_set():
            overflow.append(overflow_reason(name, cap))
            full.set()
        kept += chunk[: max(0, cap - len(kept))]
    return bytes(kept)


async def stop_srun(proc: asyncio.subprocess.Process, name: str) -> None:
    """Cancel srun's step: SIGINT twice (srun's own way), SIGKILL after a grace, then scancel
    the job by its name. Its output is read by the caller's readers, not here."""
    for sig in (signal.SIGINT, signal.SIGINT):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        await asyncio.sleep(0.3)
    try:
        await asyncio.wait_for(proc.wait(), SRUN_GRACE_S)
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
    scancel = await asyncio.create_subprocess_exec(
        "scancel", "-n", name,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(scancel.wait(), 10)
