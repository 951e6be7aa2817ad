"""The Slurm side of `--transport slurm`: the run's allocation, node states, stopping a step.

The allocation: inside one (SLURM_JOB_ID set: `salloc` without a command, an `sbatch` job)
the run uses it; otherwise it takes one with `salloc --no-shell` (no process of ours holds it:
`salloc` returns once it is granted, so nothing has to be kept alive, and `scancel` releases it
at close or interrupt) with `--no-kill`, so a node that fails does not end the run's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodegate.core.errors import ConfigError
from nodegate.transport.scontrol import Scontrol, SlurmError, SlurmNode

PROGRAMS = ("srun", "salloc", "scontrol", "scancel")
# A node in any of these states does not run a step: it gets an unreachable outcome.
OUT_OF_SERVICE = frozenset(
    {"DOWN", "DRAIN", "NOT_RESPONDING", "FAIL", "FUTURE", "UNKNOWN", "POWERED_DOWN"}
    | {"POWERING_DOWN", "POWER_DOWN", "REBOOT_ISSUED", "INVALID_REG"}
)
SALLOC_WAIT_S = 60  # `salloc --immediate`: the nodes are busy if not granted by then
STOP_GRACE_S = 5.0  # after srun's second SIGINT, before SIGKILL
_GRANTED = re.compile(r"Granted job allocation (\d+)")


def require_programs(env: Mapping[str, str]) -> dict[str, str]:
    """Each Slurm client program's path; ConfigError naming the missing ones."""
    found = {p: shutil.which(p, path=env.get("PATH")) for p in PROGRAMS}
    missing = [p for p, path in found.items() if path is None]
    if missing:
        raise ConfigError(
            f"--transport slurm: {', '.join(missing)} not found on PATH "
            "(install the Slurm client: apt-get install slurm-client)"
        )
    return {p: str(path) for p, path in found.items()}


def out_of_service(name: str, node: SlurmNode | None) -> str | None:
    """Why Slurm will not run a step on `name`, or None when it will."""
    if node is None:
        return f"Slurm has no node {name} (inventory label slurm_node?)"
    flags = node.flags | ({"NOT_RESPONDING"} if "*" in node.state else set())
    if not flags & OUT_OF_SERVICE:
        return None
    reason = f" ({node.reason})" if node.reason else ""
    return f"Slurm reports {name} {node.state}{reason}"


def held(node: SlurmNode | None) -> bool:
    """Slurm holds the node out of service on purpose: drained or draining, or set DOWN by
    someone (not for not responding). The node itself may be fine, and requalifying it is
    the point: the Slurm transport reaches it over SSH instead."""
    if node is None:
        return False
    if node.drained:
        return True
    return "DOWN" in node.flags and "NOT_RESPONDING" not in node.flags and "*" not in node.state


def held_why(node: SlurmNode) -> str:
    """`drained by <who>: <reason>`; who is nodegate for its own reasons, else the user
    scontrol names, else "someone"."""
    reason = node.reason or "no reason given"
    who = "nodegate" if reason.startswith("nodegate ") else node.by or "someone"
    return f"{'drained' if node.drained else 'set down'} by {who}: {reason}"


@dataclass(frozen=True, slots=True)
class Allocation:
    """The job whose nodes the run's steps use; `owned`: taken by this run (released at close)."""

    job: str
    nodes: frozenset[str]  # Slurm names
    owned: bool


async def run_program(
    argv: Sequence[str], env: Mapping[str, str], timeout_s: float
) -> tuple[int, str, str]:
    """(rc, stdout, stderr) of a short Slurm command; rc -1 when it could not run in time."""
    try:
        p = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
        )
    except OSError as exc:
        return -1, "", f"{argv[0]}: {exc}"
    try:
        out, err = await asyncio.wait_for(p.communicate(), timeout_s)
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
        await p.wait()
        return -1, "", f"{os.path.basename(argv[0])} did not answer in {timeout_s:g} s"
    return p.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def first_line(text: str) -> str:
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else "no message"


async def node_states(scontrol: Scontrol) -> dict[str, SlurmNode]:
    """Every node Slurm knows, with its state and reason (SlurmError when scontrol fails)."""
    return await asyncio.to_thread(scontrol.nodes)


async def existing_allocation(
    job: str, nodelist: str, programs: Mapping[str, str], env: Mapping[str, str]
) -> Allocation:
    """The allocation this run was started in (SLURM_JOB_ID / SLURM_JOB_NODELIST)."""
    rc, out, err = await run_program([programs["scontrol"], "show", "hostnames", nodelist], env, 30)
    if rc != 0:
        raise SlurmError(f"scontrol show hostnames {nodelist}: {first_line(err)}")
    return Allocation(job, frozenset(out.split()), owned=False)


async def take_allocation(
    names: Iterable[str], job_name: str, programs: Mapping[str, str], env: Mapping[str, str]
) -> Allocation:
    """`salloc --no-shell` on exactly `names`; SlurmError with salloc's reason if not granted."""
    wanted = sorted(names)
    argv = [
        programs["salloc"], "--no-shell", "--no-kill", f"--immediate={SALLOC_WAIT_S}",
        "-N", str(len(wanted)), "-w", ",".join(wanted), "-J", job_name,
    ]  # fmt: skip
    rc, out, err = await run_program(argv, env, SALLOC_WAIT_S + 30)
    m = _GRANTED.search(err + out)
    if rc != 0 or m is None:
        raise SlurmError(f"salloc of {len(wanted)} nodes not granted: {first_line(err or out)}")
    return Allocation(m.group(1), frozenset(wanted), owned=True)


async def release(alloc: Allocation, programs: Mapping[str, str], env: Mapping[str, str]) -> None:
    """End an allocation this run took (never one it was started in)."""
    if alloc.owned:
        await run_program([programs["scancel"], alloc.job], env, 30)


async def stop_srun(
    proc: asyncio.subprocess.Process,
    step: str,
    alloc: Allocation,
    programs: Mapping[str, str],
    env: Mapping[str, str],
) -> None:
    """Cancel srun's step: SIGINT twice (srun's own way), SIGKILL after a grace, then scancel
    the step by its name if Slurm still lists it."""
    if proc.returncode is None:
        for sig in (signal.SIGINT, signal.SIGINT):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            await asyncio.sleep(0.3)
        try:
            await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    squeue = shutil.which("squeue", path=env.get("PATH"))
    if squeue is None:
        return
    rc, out, _ = await run_program([squeue, "-h", "-s", "-j", alloc.job, "-o", "%i %j"], env, 15)
    steps = [f.split()[0] for f in out.splitlines() if rc == 0 and f.split()[1:] == [step]]
    if steps:
        await run_program([programs["scancel"], *steps], env, 15)
