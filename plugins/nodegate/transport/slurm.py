"""`--transport slurm`: a stage's script runs on all its nodes through one `srun` step.

Slurm does the fan-out (its own tree launch and I/O forwarding, no SSH): every node of a group
whose command lists are identical runs the same framed script (`script.py`, read on stdin
through `--input=all`), and `--label` says which task, hence which node, wrote each line
(`srun_output.py`). Each node's bytes then become its NodeOutcome exactly as an SSH session's
do (`Transport.outcome`). Nodes are Slurm nodes by their inventory label `slurm_node`, else by
their own name (the mapping `--act slurm` uses). Allocation and node states: `slurm_jobs.py`.

A node Slurm holds out of service on purpose (drained, or set DOWN by someone:
`slurm_jobs.held`) is what requalification after maintenance is about, and Slurm will not run
a step there: such nodes go to the `fallback` transport (SSH: the factory's, built when a
held node is first met, so a run without one never reads SSH settings), stage scripts
and spawns alike; a held node SSH cannot reach either is `Reach.HELD` ("drained by <who>:
<reason>; not tested"), not a dead node.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence

from nodegate.core.errors import ConfigError
from nodegate.core.settings import DEFAULT_FANOUT
from nodegate.core.values import CommandSpec, NodeOutcome, Part, Reach
from nodegate.inventory import Node
from nodegate.transport.base import Placement, Session, Transport, session_limit_reason
from nodegate.transport.evidence import EvidenceWriter
from nodegate.transport.local import LocalProcess
from nodegate.transport.process import RemoteProcess, SpawnError, kill_script, wrap
from nodegate.transport.scontrol import SLURM_NAME_LABEL, Scontrol, SlurmError
from nodegate.transport.script import LAUNCHER, StageScript, build_script, command_line
from nodegate.transport.slurm_jobs import (
    STOP_GRACE_S,
    Allocation,
    existing_allocation,
    held,
    held_why,
    node_states,
    out_of_service,
    release,
    require_programs,
    run_program,
    stop_srun,
    take_allocation,
)
from nodegate.transport.srun_output import LabelledStream

# srun's messages that say a node could not take its task (the step is then aborted for all)
_LAUNCH_FAILED = re.compile(r"(?:failed on node|Node failure on) ([^\s:]+)")
# A fallback session that never got in: for a held node, not tested rather than dead (a site
# whose nodes take no SSH from here refuses, or does not know, the key). A changed host key
# stays what it is (someone in the path?), and so does a session that got in and failed.
_NEVER_IN = frozenset({Reach.UNREACHABLE, Reach.AUTH_FAILED, Reach.HOSTKEY_UNKNOWN})


class SlurmTransport(Transport):
    """Stage scripts through srun steps in one allocation; spawns through `srun --overlap`."""

    name = "slurm"

    def __init__(
        self,
        nodes: Sequence[Node],
        *,
        fanout: int = DEFAULT_FANOUT,
        evidence: EvidenceWriter | None = None,
        env: Mapping[str, str] | None = None,
        job_name: str = "nodegate",
        fallback: Callable[[], Transport] | None = None,
    ) -> None:
        super().__init__(fanout=fanout, evidence=evidence)
        self.env = dict(env if env is not None else os.environ)
        self.programs = require_programs(self.env)
        self.nodes = list(nodes)
        self.slurm_names = {n.name: n.labels.get(SLURM_NAME_LABEL) or n.name for n in nodes}
        self.scontrol = Scontrol(self.env, self.programs["scontrol"])
        self.job_name = job_name
        self.alloc: Allocation | None = None
        self.steps_started = 0
        self._alloc_error: str | None = None
        self._lock: asyncio.Lock | None = None
        self._blocked: dict[str, Session] = {}  # node -> why it runs nothing (last check)
        self._addresses: dict[str, str] | None = None
        self.make_fallback = fallback
        self.fallback: Transport | None = None  # built on first use
        self._fallback_error: str | None = None  # why it could not be built
        self.held: dict[str, str] = {}  # node -> why Slurm holds it (run through `fallback`)
        self._states_read = False

    # -- allocation and node states -------------------------------------------------------
    async def _allocation(self, nodes: Sequence[str]) -> Allocation:
        """The run's allocation, taken on first use for `nodes` (inventory names)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.alloc is not None:
                return self.alloc
            if self._alloc_error is not None:
                raise SlurmError(self._alloc_error)
            job = self.env.get("SLURM_JOB_ID")
            try:
                if job:
                    nodelist = self.env.get("SLURM_JOB_NODELIST") or self.env.get("SLURM_NODELIST")
                    if not nodelist:
                        raise SlurmError(f"SLURM_JOB_ID={job} but no SLURM_JOB_NODELIST")
                    self.alloc = await existing_allocation(job, nodelist, self.programs, self.env)
                else:
                    names = [self.slurm_names[n] for n in nodes]
                    self.alloc = await take_allocation(
                        names, self.job_name, self.programs, self.env
                    )
            except SlurmError as exc:
                self._alloc_error = str(exc)
                raise
            return self.alloc

    async def _prepare(self, nodes: Sequence[str]) -> dict[str, Session]:
        """Check Slurm's node states and the allocation: the nodes that run nothing, and why."""
        try:
            states = await node_states(self.scontrol)
        except SlurmError as exc:
            return {n: Session(Reach.ERROR, detail=f"slurm: {exc}") for n in nodes}
        self._states_read = True
        bad: dict[str, Session] = {}
        for n in nodes:
            self.held.pop(n, None)
            now = states.get(self.slurm_names[n])
            if self.make_fallback is not None and now is not None and held(now):
                self.held[n] = held_why(now)
                continue
            why = out_of_service(self.slurm_names[n], now)
            if why is not None:
                bad[n] = Session(Reach.UNREACHABLE, detail=why)
        good = [n for n in nodes if n not in bad and n not in self.held]
        if good:
            # Taken once, on every node of the run Slurm will run a step on (not only these)
            serviceable = [
                m.name for m in self.nodes
                if out_of_service(self.slurm_names[m.name], states.get(self.slurm_names[m.name]))
                is None
            ]  # fmt: skip
            try:
                alloc = await self._allocation(serviceable or good)
            except SlurmError as exc:
                return {**bad, **{n: Session(Reach.ERROR, detail=f"slurm: {exc}") for n in good}}
            for n in good:
                if self.slurm_names[n] not in alloc.nodes:
                    why = f"{self.slurm_names[n]} is not in the run's Slurm allocation {alloc.job}"
                    bad[n] = Session(Reach.UNREACHABLE, detail=why)
        for n in nodes:
            self._blocked.pop(n, None)
        self._blocked.update(bad)
        return bad

    # -- stage scripts --------------------------------------------------------------------
    async def stream_stage(
        self,
        stage: str,
        plan: Mapping[str, Sequence[CommandSpec]],
        on_outcome: Callable[[NodeOutcome], None],
    ) -> None:
        """One srun step per group of nodes with identical commands, all groups at once."""
        t0 = time.monotonic()
        names = list(plan)
        scripts: dict[tuple[CommandSpec, ...], StageScript] = {}
        for n in names:
            key = tuple(plan[n])
            if key not in scripts:
                scripts[key] = build_script(key, max_bytes=self.max_output_bytes)
        sessions = await self._prepare(names)
        by_ssh = {n: plan[n] for n in names if n in self.held}
        groups: dict[tuple[CommandSpec, ...], list[str]] = {}
        for n in names:
            if n not in sessions and n not in by_ssh:
                groups.setdefault(tuple(plan[n]), []).append(n)

        async def one(n: str) -> None:
            on_outcome(await self.outcome(n, stage, scripts[tuple(plan[n])], sessions.pop(n), t0))

        async def over_slurm() -> None:
            steps = (self._step(g, scripts[k]) for k, g in groups.items())
            for got in await asyncio.gather(*steps):
                sessions.update(got)
            await asyncio.gather(*(one(n) for n in names if n not in by_ssh))

        async def over_fallback() -> None:
            if not by_ssh:
                return
            ssh = self._over_ssh()
            if ssh is not None:
                await ssh.stream_stage(stage, by_ssh, lambda o: on_outcome(self._held_outcome(o)))
                return
            for n in by_ssh:
                s = Session(Reach.UNREACHABLE, detail=self._fallback_error or "no SSH transport")
                o = await self.outcome(n, stage, scripts[tuple(plan[n])], s, t0)
                on_outcome(self._held_outcome(o))

        await asyncio.gather(over_slurm(), over_fallback())

    def _over_ssh(self) -> Transport | None:
        """The fallback transport, built once; None (and why) when it cannot be."""
        if self.fallback is None and self.make_fallback is not None and not self._fallback_error:
            try:
                self.fallback = self.make_fallback()
            except ConfigError as exc:  # an inventory's SSH settings nodegate cannot use
                self._fallback_error = str(exc)
        return self.fallback

    def _held_outcome(self, o: NodeOutcome) -> NodeOutcome:
        """A held node's outcome over the fallback; one it never got into is HELD: the node
        is not tested (nothing says it is dead: Slurm holds it, and SSH does not reach it)."""
        if o.reach in _NEVER_IN and not o.results and o.node in self.held:
            why = f"{self.held[o.node]}; not tested (over SSH: {o.reach.value}: {o.detail})"
            return dataclasses.replace(o, reach=Reach.HELD, detail=why)
        return o

    async def _session(self, node: str, script: StageScript) -> Session:
        bad = await self._prepare([node])
        if node in bad:
            return bad[node]
        if node in self.held:
            ssh = self._over_ssh()
            s = (
                Session(Reach.UNREACHABLE, detail=self._fallback_error or "no SSH transport")
                if ssh is None
                else await ssh._session(node, script)
            )
            if s.reach in _NEVER_IN and not s.stdout:  # as _held_outcome, one node's session
                why = f"{self.held[node]}; not tested (over SSH: {s.reach.value}: {s.detail})"
                return Session(Reach.HELD, detail=why)
            return s
        return (await self._step([node], script))[node]

    async def _step(self, nodes: list[str], script: StageScript) -> dict[str, Session]:
        """The script on `nodes` in one srun; once more for the nodes whose step was aborted
        because another node could not launch (Slurm ends the whole step then)."""
        try:
            sessions, again = await self._srun(nodes, script)
            if again:
                retried, _ = await self._srun(again, script)
                sessions.update(retried)
        except Exception as exc:  # noqa: BLE001 - a transport bug must not lose the fleet
            why = f"{type(exc).__name__}: {exc}"
            return {n: Session(Reach.ERROR, detail=why) for n in nodes}
        return sessions

    def _srun_argv(self, names: Sequence[str], step: str, *args: str) -> list[str]:
        assert self.alloc is not None
        k = str(len(names))
        return [
            self.programs["srun"], f"--jobid={self.alloc.job}", "--overlap", "-N", k, "-n", k,
            # arbitrary: task i runs on names[i], which is how a label names its node
            "-m", "arbitrary", "-w", ",".join(names), "--mpi=none", "-J", step, *args,
        ]  # fmt: skip

    async def _srun(
        self, nodes: list[str], script: StageScript
    ) -> tuple[dict[str, Session], list[str]]:
        """One step: each node's Session, and the nodes to run again (see `_step`)."""
        assert self.alloc is not None
        step = f"nodegate-{secrets.token_hex(4)}"
        names = [self.slurm_names[n] for n in nodes]
        # stdout through base64 on the node: srun --label cannot be undone exactly for long or
        # partial lines (transport/srun_output.py); base64 lines can. pipefail: the task's
        # exit status is the stage shell's (srun reports each task that did not exit 0).
        launch = f"set -o pipefail; {LAUNCHER} | base64 -w 76"
        argv = self._srun_argv(names, step, "--input=all", "--label", "bash", "-c", launch)
        limit = script.max_session_bytes
        out, err = LabelledStream(len(nodes), limit, b64=True), LabelledStream(len(nodes), limit)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                start_new_session=True,  # a Ctrl-C of the run reaches srun through us only
            )
        except OSError as exc:
            why = f"srun could not start: {exc}"
            return {n: Session(Reach.ERROR, detail=why) for n in nodes}, []
        self.steps_started += 1
        timed_out = await self._collect(proc, script, out, err, step)
        return self._sessions(nodes, script, out, err, timed_out)

    async def _collect(
        self,
        proc: asyncio.subprocess.Process,
        script: StageScript,
        out: LabelledStream,
        err: LabelledStream,
        step: str,
    ) -> bool:
        """Feed the script, route srun's output until it ends or the deadline; True: timed out
        (the step was stopped)."""
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        assert self.alloc is not None

        async def feed(w: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):  # srun gone: its output says why
                w.write(script.text.encode())
                await w.drain()
                w.close()

        async def pump(r: asyncio.StreamReader, dest: LabelledStream) -> None:
            while chunk := await r.read(65536):
                dest.feed(chunk)
            dest.close()

        readers = asyncio.ensure_future(
            asyncio.gather(feed(proc.stdin), pump(proc.stdout, out), pump(proc.stderr, err))
        )
        try:
            done, _ = await asyncio.wait({readers}, timeout=script.deadline_s)
            timed_out = readers not in done
            if timed_out:
                await stop_srun(proc, step, self.alloc, self.programs, self.env)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(readers), STOP_GRACE_S * 2)
            await asyncio.wait_for(proc.wait(), STOP_GRACE_S * 2)
        except BaseException:
            await asyncio.shield(stop_srun(proc, step, self.alloc, self.programs, self.env))
            readers.cancel()
            raise
        finally:
            if not readers.done():
                readers.cancel()
        return timed_out

    def _sessions(
        self,
        nodes: list[str],
        script: StageScript,
        out: LabelledStream,
        err: LabelledStream,
        timed_out: bool,
    ) -> tuple[dict[str, Session], list[str]]:
        """Each node's Session from its routed bytes; the aborted ones to run again."""
        done = f"@@{script.nonce} DONE\n".encode()
        limit = script.max_session_bytes
        failed = {m.group(1): line for line in err.stray if (m := _LAUNCH_FAILED.search(line))}
        sessions: dict[str, Session] = {}
        again: list[str] = []
        for i, n in enumerate(nodes):
            o, e = out.of(i), err.of(i)
            name = self.slurm_names[n]
            if out.flooded(i) or err.flooded(i):
                too_much = session_limit_reason(limit, limit + 1) or "output caps exceeded"
                sessions[n] = Session(Reach.ERROR, o, e, too_much)
            elif o.endswith(done):
                sessions[n] = Session(Reach.OK, o, e, ended=self._ended(i, err))
            elif timed_out:
                why = f"session exceeded its {script.deadline_s:g} s deadline"
                sessions[n] = Session(Reach.TIMEOUT, o, e, why)
            elif name in failed:
                why = f"Slurm could not start the stage on {name}: {failed[name]}"
                sessions[n] = Session(Reach.UNREACHABLE, o, e, why)
            elif failed and not o:
                again.append(n)
            else:
                said = [x for x in err.stray if re.search(rf"\b{re.escape(name)}\b", x)]
                e += "".join(f"{x}\n" for x in said).encode()
                sessions[n] = Session(Reach.OK, o, e, ended=self._ended(i, err))
        return sessions, again

    @staticmethod
    def _ended(task: int, err: LabelledStream) -> str | None:
        """How task `task`'s shell ended, as srun reports it: only tasks that did not exit 0
        are named (per task, from slurmstepd); a task it names nothing for exited 0."""
        how = err.exits.get(task)
        if how is None:
            return None
        m = re.fullmatch(r"Exited with exit code (\d+)", how)
        return f"exited {m.group(1)}" if m else f"killed by a signal ({how})"

    @property
    def connections_opened(self) -> int:
        """SSH connections the fallback opened (to held nodes); Slurm's steps open none."""
        return int(getattr(self.fallback, "connections_opened", 0))

    # -- active stages --------------------------------------------------------------------
    def address(self, node: str) -> str:
        """The node's SSH host name from the inventory, as the SSH transport gives it."""
        if self._addresses is None:
            from nodegate.transport.targets import resolve_targets

            self._addresses = {k: t.hostname for k, t in resolve_targets(self.nodes, None).items()}
        return self._addresses.get(node, node)

    def lost_why(self, node: str) -> str | None:
        if node in self.held and self.fallback is not None:
            return self.fallback.lost_why(node)
        return None

    async def placement(self, nodes: Sequence[str]) -> Placement:
        """In the allocation when every node is (Slurm's names); else, the nodes held."""
        if not self._states_read:
            await self._prepare(list(nodes))
        outside = {n: self.held[n] for n in nodes if n in self.held}
        alloc = self.alloc
        if (
            not outside
            and alloc is not None
            and all(n not in self._blocked and self.slurm_names[n] in alloc.nodes for n in nodes)
        ):
            return Placement(alloc.job, {n: self.slurm_names[n] for n in nodes}, in_step=True)
        return Placement(in_step=bool(nodes) and nodes[0] not in self.held, outside=outside)

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        cmd = command_line(command)
        if node not in self.slurm_names:
            raise SpawnError(node, Reach.ERROR.value, "not a node of this run")
        if not self._states_read:
            await self._prepare([node])
        if node in self.held:
            ssh = self._over_ssh()
            if ssh is None:
                why = f"{self.held[node]}; not tested (over SSH: {self._fallback_error})"
                raise SpawnError(node, Reach.HELD.value, why)
            return await ssh.spawn(node, command, timeout_s)
        if node in self._blocked:
            s = self._blocked[node]
            raise SpawnError(node, s.reach.value, s.detail)
        if self.alloc is None:  # scontrol or salloc failed: the stage's sessions said why
            why = self._alloc_error or "no Slurm allocation (scontrol did not answer)"
            raise SpawnError(node, Reach.ERROR.value, f"slurm: {why}")
        p = SrunProcess(node, cmd, timeout_s, self)
        step = f"nodegate-spawn-{secrets.token_hex(4)}"
        argv = self._srun_argv([self.slurm_names[node]], step, "--input=none")
        try:
            p.proc = await asyncio.create_subprocess_exec(
                *argv, "sh", "-c", wrap(cmd, timeout_s, p.tag),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.env, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise SpawnError(node, Reach.ERROR.value, f"srun could not start: {exc}") from None
        return p

    async def run_on(self, node: str, cmd: str, timeout_s: float) -> tuple[int, str, str]:
        """A short command on `node` in its own step (kill a spawned process)."""
        step = f"nodegate-kill-{secrets.token_hex(4)}"
        argv = self._srun_argv([self.slurm_names[node]], step, "--input=none")
        return await run_program([*argv, "sh", "-c", cmd], self.env, timeout_s)

    async def close(self) -> None:
        """Release the allocation this run took (one it was started in is left as it is)."""
        alloc, self.alloc = self.alloc, None
        try:
            if alloc is not None:
                await release(alloc, self.programs, self.env)
        finally:
            if self.fallback is not None:
                await self.fallback.close()


class SrunProcess(LocalProcess):
    """A spawned command in its own `srun --overlap` step, srun a child of the controller (its
    streams and exit read as the local transport's); killed on its node through Slurm."""

    def __init__(self, node: str, cmd: str, timeout_s: float, transport: SlurmTransport) -> None:
        super().__init__(node, cmd, timeout_s)
        self.transport = transport

    async def _run_kill(self, pid: int) -> None:
        # On failure the command's own `timeout` still ends it.
        await self.transport.run_on(self.node, kill_script(pid), 15)
