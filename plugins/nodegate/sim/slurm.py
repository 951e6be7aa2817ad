"""A real Slurm cluster over the simulated fleet: munged, one slurmctld, one slurmd per node.

Everything runs on this machine as root (see the README's simulated-fleet section): munged on
a private key and socket, slurmctld and every slurmd on private ports, all state under
`<fleet>/slurm/`. Every task that `srun` starts runs "on" its node: Slurm's TaskProlog exports
the node's NG_NODE and PATH, as the fleet's sshd dispatcher does for an SSH session. Daemons
are stopped by the PIDs in their pid files, never by name.

Layout of `<fleet>/slurm/`:
  slurm.conf, env.sh         the cluster's configuration; `. env.sh` sets SLURM_CONF
  munge.key, munge.sock*     the private munge key and socket (munged.pid, munged.log)
  task_prolog.sh             exports the node's NG_NODE and PATH into each task
  state/, spool/<node>/      slurmctld's StateSaveLocation, each slurmd's spool (spool links
                             to a short /tmp/ngs-* directory: socket paths hold 108 bytes)
  slurmctld.pid|log, slurmd-<node>.pid|log
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from nodegate.core.errors import ConfigError
from nodegate.sim.nodetools import HOST_PATH
from nodegate.sim.sshd import alive, pid_alive

PARTITION = "sim"
DAEMONS = ("munged", "slurmctld", "slurmd")
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def find_daemon(name: str) -> str:
    for d in SBIN:
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    found = shutil.which(name)
    if found:
        return found
    raise ConfigError(
        f"{name} not found (looked in {', '.join(SBIN)}); install Slurm and munge: "
        "apt-get install slurmctld slurmd slurm-client munge"
    )


# Listening ports come from below the kernel's ephemeral range (ip_local_port_range starts at
# 32768): a port the kernel handed out and we released could be taken as the *source* port of
# any outgoing connection (the fleet's own SSH clients make thousands) before slurmd binds it
# (seen: "Unable to bind listen port ... Address already in use" under a full test run).
PORT_RANGE = (20000, 32000)


def free_ports(n: int) -> list[int]:
    """n TCP ports free on 127.0.0.1 now, drawn at random below the ephemeral range and held
    together while drawn (so they differ); two fleets on one machine draw apart."""
    rng = random.SystemRandom()
    socks: list[socket.socket] = []
    try:
        while len(socks) < n:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", rng.randrange(*PORT_RANGE)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SlurmCluster:
    """The Slurm cluster of the simulated fleet rooted at `fleet_root`."""

    partition = PARTITION

    def __init__(self, fleet_root: str | os.PathLike[str]) -> None:
        self.fleet = Path(fleet_root).resolve()
        self.dir = self.fleet / "slurm"
        self.conf = self.dir / "slurm.conf"

    # -- configuration --------------------------------------------------------------------
    def nodes(self) -> list[str]:
        try:
            model = json.loads((self.fleet / "model.json").read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"no fleet built at {self.fleet} ({e})") from e
        return [str(n["name"]) for n in model["nodes"]]

    def down_nodes(self) -> set[str]:
        """Nodes whose model has the fault `slurmd_down` (no slurmd is started for them)."""
        model = json.loads((self.fleet / "model.json").read_text())
        return {
            str(n["name"])
            for n in model["nodes"]
            if any(str(f).split(":")[0] == "slurmd_down" for f in n.get("faults", []))
        }

    def env(self) -> dict[str, str]:
        """What `srun`, `sinfo` and `scontrol` need to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def write(self) -> None:
        """Write slurm.conf, the munge key and the TaskProlog (ports chosen now)."""
        nodes = self.nodes()
        if self.dir.exists():
            self._remove_spool()
            shutil.rmtree(self.dir)
        for d in ("state", "log"):
            (self.dir / d).mkdir(parents=True)
        # slurmstepd's sockets live in the spool directory, and a Unix socket path holds 108
        # bytes: a fleet under pytest's deep temporary paths gets a short one in /tmp, linked.
        (self.dir / "spool").symlink_to(tempfile.mkdtemp(prefix="ngs-", dir="/tmp"))
        key = self.dir / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o600)
        prolog = self.dir / "task_prolog.sh"
        # TaskProlog: each `export NAME=value` line it prints is set in the task's environment.
        prolog.write_text(
            "#!/bin/sh\n"
            f'echo "export NG_NODE={self.fleet}/nodes/$SLURMD_NODENAME"\n'
            f'echo "export PATH={self.fleet}/nodes/$SLURMD_NODENAME/bin:{self.fleet}/bin:'
            f'{HOST_PATH}"\n'
        )
        prolog.chmod(0o755)
        ctld, *node_ports = free_ports(1 + len(nodes))
        (self.dir / "slurm.conf").write_text(self._conf_text(nodes, ctld, node_ports))
        (self.dir / "env.sh").write_text(f"export SLURM_CONF={self.conf}\n")

    def _conf_text(self, nodes: list[str], ctld_port: int, node_ports: list[int]) -> str:
        d = self.dir
        host = socket.gethostname().split(".")[0]
        lines = [
            "# Written by nodegate's simulated fleet; see nodegate/sim/slurm.py",
            f"ClusterName=ng{abs(hash(str(self.fleet))) % 10**6}",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={d / 'munge.sock'}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={(d / 'spool').readlink()}/%n",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'log'}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            f"TaskProlog={d / 'task_prolog.sh'}",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "SchedulerType=sched/backfill",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=60",
            "SlurmctldParameters=enable_configless",
            "LaunchParameters=use_interactive_step",
            # Every slurmd runs on this one machine: take the node lines as they are written,
            # not the 2 cores slurmd finds (which would make each node INVALID).
            "SlurmdParameters=config_overrides",
        ]
        # CPUs: the tests run many ranks per node (one per GPU) on a 2-core machine; Slurm only
        # counts them, so each node declares 64.
        for name, port in zip(nodes, node_ports, strict=True):
            lines.append(f"NodeName={name} NodeAddr=127.0.0.1 Port={port} CPUs=64 State=UNKNOWN")
        lines.append(
            f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
            "OverSubscribe=YES"
        )
        return "\n".join(lines) + "\n"

    # -- lifecycle ------------------------------------------------------------------------
    def pid_files(self) -> list[Path]:
        if not self.dir.exists():
            return []
        return [
            self.dir / "munged.pid",
            self.dir / "slurmctld.pid",
            *sorted(self.dir.glob("slurmd-*.pid")),
        ]

    def running_pids(self) -> list[int]:
        return [pid for pidf in self.pid_files() if (pid := alive(pidf))]

    def running(self) -> bool:
        return bool(self.running_pids())

    def start(self, timeout_s: float = 60.0) -> None:
        """Write the configuration, start munged, slurmctld and every slurmd; wait until every
        node is idle."""
        if self.running():
            raise ConfigError(f"Slurm of the fleet at {self.fleet} is running; stop it first")
        self.write()
        d = self.dir
        env = {**os.environ, **self.env()}
        self._daemon(
            [
                find_daemon("munged"),
                "--force",
                f"--key-file={d / 'munge.key'}",
                f"--socket={d / 'munge.sock'}",
                f"--pid-file={d / 'munged.pid'}",
                f"--log-file={d / 'log' / 'munged.log'}",
                f"--seed-file={d / 'munge.seed'}",
            ],
            env,
        )
        self._wait(lambda: (d / "munge.sock").exists(), timeout_s, "munged socket")
        self._daemon([find_daemon("slurmctld"), "-f", str(self.conf)], env)
        self._wait(lambda: alive(d / "slurmctld.pid") is not None, timeout_s, "slurmctld")
        slurmd = find_daemon("slurmd")
        down = self.down_nodes()
        for name in self.nodes():
            if name not in down:  # fault slurmd_down: its node never answers the controller
                self._daemon([slurmd, "-f", str(self.conf), "-N", name], env)
        self.wait_idle(timeout_s)

    @staticmethod
    def _daemon(argv: list[str], env: dict[str, str]) -> None:
        """Start a daemon that forks itself into the background and writes its pid file."""
        r = subprocess.run(
            argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
        )
        if r.returncode != 0:
            raise RuntimeError(f"{argv[0]} exited {r.returncode}: {r.stderr.strip()[-500:]}")

    def _wait(self, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"Slurm of the fleet at {self.fleet}: {what} not ready after {timeout_s:g} s; "
                    f"see {self.dir / 'log'}"
                )
            time.sleep(0.2)

    def node_states(self) -> dict[str, str]:
        """Each node's state as sinfo prints it (`idle`, `drained`, `idle*`, ...)."""
        r = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %t"],
            env={**os.environ, **self.env()},
            capture_output=True,
            text=True,
            timeout=30,
        )
        if r.returncode != 0:
            return {}
        return dict(line.split(None, 1) for line in r.stdout.splitlines() if " " in line)

    def wait_idle(self, timeout_s: float = 30.0) -> None:
        """Wait until every node with a slurmd is idle again (after a job: `comp` first)."""
        self._wait(self._all_idle, timeout_s, "every node idle in sinfo")

    def _all_idle(self) -> bool:
        states = self.node_states()
        down = self.down_nodes()
        return len(states) == len(self.nodes()) and all(
            s == "idle" for n, s in states.items() if n not in down
        )

    def _cancel_jobs(self, timeout_s: float) -> None:
        env = {**os.environ, **self.env()}
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                ["scancel", "--partition", PARTITION], env=env, capture_output=True, timeout=15
            )
            while time.monotonic() < deadline:
                q = subprocess.run(
                    ["squeue", "-h", "-o", "%i"],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=15,
                )
                if q.returncode != 0 or not q.stdout.strip():
                    return
                time.sleep(0.3)

    def stop(self, timeout_s: float = 15.0) -> int:
        """Stop every daemon of this cluster by its pid file; returns how many were running."""
        pids = self.running_pids()
        if alive(self.dir / "slurmctld.pid"):  # end running jobs first: their slurmstepd
            self._cancel_jobs(timeout_s)  # processes would outlive slurmd
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in pids:
            if pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for pidf in self.pid_files():
            pidf.unlink(missing_ok=True)
        self._remove_spool()
        return len(pids)

    def _remove_spool(self) -> None:
        """The short spool directory this cluster made in /tmp (and only that one)."""
        link = self.dir / "spool"
        if link.is_symlink():
            target = link.readlink()
            if target.parent == Path("/tmp") and target.name.startswith("ngs-"):
                shutil.rmtree(target, ignore_errors=True)
