"""The simulated node's Open MPI: its mpirun and its remote daemons keep their session
directories in the node's own temporary directory (the nodes share this machine's /tmp and
hostname, where one job's daemons raced on one directory and failed under load)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from nodegate.sim.tools.nccl import MPIRUN, ORTED


def node_bin(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name, text in (("mpirun", MPIRUN), ("orted", ORTED)):
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    return d


def run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "NG_NODE": "/fleet/by-addr/127.9.9.9", **env}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=full)


def test_ranks_and_mpirun_use_the_node_s_own_temporary_directory(tmp_path: Path) -> None:
    mpirun = str(node_bin(tmp_path) / "mpirun")
    got = run([mpirun, "-np", "1", "--host", "localhost:1", "--bind-to", "none",
               "printenv", "TMPDIR"])  # fmt: skip
    assert (got.returncode, got.stdout) == (0, "/tmp/nodegate-sim-127.9.9.9\n"), got.stderr


def test_remote_daemons_start_as_the_node_s_orted(tmp_path: Path) -> None:
    # the launch agent records the command mpirun sends to the other node
    agent, log, hosts = tmp_path / "agent", tmp_path / "agent.log", tmp_path / "hosts"
    agent.write_text('#!/bin/sh\nshift\nprintf "%s\\n" "$*" > "$AGENT_LOG"\nexit 1\n')
    agent.chmod(0o755)
    hosts.write_text("127.0.0.2 slots=1\n")
    mpirun = str(node_bin(tmp_path) / "mpirun")
    run([mpirun, "--hostfile", str(hosts), "-np", "1", "--mca", "plm_rsh_agent", str(agent),
         "true"], AGENT_LOG=str(log))  # fmt: skip
    command = log.read_text().split()
    assert command[0] == "orted"  # by name, from the node's PATH: not /usr/bin/orted
    assert "orte_tmpdir_base" not in command  # no one directory forced on every node
    assert "TMPDIR=/tmp/nodegate-sim-${NG_NODE##*/}" in ORTED.splitlines()
