"""Chaos for active stages over the simulated fleet: cut a node's SSH connections as a round
begins (their sshd session processes killed, as a crashed sshd or a cut network would end them),
and end what such a node still runs afterwards (a test helper, not part of the product).

A round begins when its plan is written (`<run>/<stage>/plan-<campaign>.json`, before the
round runs); `Chaos` watches that file and, for each new round, asks `pick(round)` which nodes
to cut, then cuts every connection to their addresses for a short window (the controller's,
and those a launcher opens there: mpirun's remote starts).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.integration.conftest import SimFleet

SSH_PORT = 2222  # the simulated fleet's sshd port
CUT_WINDOW_S = 2.0  # how long connections to the node keep being cut once its round begins

Pick = Callable[[dict[str, Any]], Sequence[str]]  # a round of the plan file -> nodes to cut


def address_of(fleet: SimFleet, node: str) -> str:
    (addr,) = [n["address"] for n in fleet.model()["nodes"] if n["name"] == node]
    return str(addr)


def _hex_endpoint(address: str, port: int) -> str:
    """An IPv4 endpoint as /proc/net/tcp writes it (address little-endian, port big)."""
    (packed,) = struct.unpack("<I", socket.inet_aton(address))
    return f"{packed:08X}:{port:04X}"


def _server_sockets(addresses: Sequence[str], port: int) -> set[str]:
    """Inodes of established TCP sockets whose local end is one of `addresses`:port (sshd's
    side)."""
    want = {_hex_endpoint(a, port) for a in addresses}
    out = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            f = line.split()
            if len(f) > 9 and f[1] in want and f[3] == "01":  # 01: ESTABLISHED
                out.add(f[9])
    return out


def _fleet_daemons(root: Path) -> set[int]:
    """The PIDs of the fleet's own sshd daemons (`sshd/<k>.pid`)."""
    out = set()
    for pidf in root.glob("sshd/*.pid"):
        with contextlib.suppress(OSError, ValueError):
            out.add(int(pidf.read_text().strip()))
    return out


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _descends(pid: int, daemons: set[int]) -> bool:
    """Whether `pid` is a child (any depth) of one of `daemons`."""
    seen = 0
    while pid > 1 and seen < 64:
        pid, seen = _parent(pid), seen + 1
        if pid in daemons:
            return True
    return False


def cut_connections(root: Path, addresses: Sequence[str], port: int = SSH_PORT) -> list[int]:
    """Kill (SIGKILL, by PID) every sshd session process of the fleet at `root` (a child of its
    own daemons, never another sshd of the machine) holding an established connection to one
    of `addresses`:port; the PIDs killed."""
    inodes = _server_sockets(addresses, port)
    if not inodes:
        return []
    daemons = _fleet_daemons(root)
    links = {f"socket:[{i}]" for i in inodes}
    killed = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if not (proc / "comm").read_text().startswith("sshd"):
                continue
            if not _descends(int(proc.name), daemons):
                continue
            if any(os.readlink(fd) in links for fd in (proc / "fd").iterdir()):
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
    return killed


def kill_orphans(fleet: SimFleet, node: str) -> None:
    """End what a simulated node still runs (a cut connection's orphans), by PID: the
    processes whose NG_NODE is that node of this fleet."""
    mark = f"NG_NODE={fleet.fleet.root}/by-addr/{address_of(fleet, node)}".encode()
    for env in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if mark in env.read_bytes().split(b"\0"):
                os.kill(int(env.parent.name), signal.SIGKILL)


class Chaos:
    """Watches a campaign's plan file; as each round begins, cuts the nodes `pick` names."""

    def __init__(self, fleet: SimFleet, plan: Path, pick: Pick) -> None:
        self.fleet, self.plan, self.pick = fleet, plan, pick
        self.cut: dict[str, list[str]] = {}  # round label -> nodes cut
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Chaos:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for node in self.nodes():
            kill_orphans(self.fleet, node)

    def nodes(self) -> list[str]:
        """Every node cut, sorted."""
        return sorted(n for nodes in self.cut.values() for n in nodes)

    def _rounds(self) -> list[dict[str, Any]]:
        try:
            got: list[dict[str, Any]] = json.loads(self.plan.read_text())["rounds"]
        except (OSError, ValueError, KeyError):
            return []  # not written yet, or caught mid-write
        return got

    def _watch(self) -> None:
        seen: set[str] = set()
        cutting: list[tuple[float, str]] = []  # (until, address)
        while not self._stop.is_set():
            for rnd in self._rounds():
                if rnd["round"] in seen:
                    continue
                seen.add(rnd["round"])
                nodes = [n for n in self.pick(rnd) if n not in self.nodes()]
                if nodes:
                    self.cut[rnd["round"]] = nodes
                until = time.monotonic() + CUT_WINDOW_S
                cutting += [(until, address_of(self.fleet, n)) for n in nodes]
            now = time.monotonic()
            cutting = [(t, a) for t, a in cutting if t > now]
            if cutting:
                cut_connections(Path(self.fleet.fleet.root), [a for _, a in cutting])
            time.sleep(0.05)
