"""Build, start, stop and inspect a simulated fleet of real OpenSSH sshd daemons on loopback.

Layout of a fleet directory:
  model.json          resolved model (addresses, hardware, faults): the answer key for tests
  inventory.yaml      nodegate inventory for the fleet (labels rack/leaf, profile)
  ssh_config          one Host block per node: plain `ssh -F`, clush and pdsh use it too
  known_hosts, id_ed25519[.pub], keys/host_<k>   generated keys
  sshd/<k>.conf, sshd/<k>.pid, sshd/<k>.log      one daemon per 16 addresses
  dispatch            sshd ForceCommand: routes a session to the addressed node
  lib.sh, lib-cat.sh, bin/{cat,grep,pgrep}   the nodes' view of host tools (sim/nodetools.py)
  nodes/<name>/bin    the node's tool stubs (first on its PATH), fn/<tool>.sh and fast.sh
                      the same tools as shell functions, root/ its files, climb.sh its
                      climbing counters, fabric -> the fleet's fabric/; by-addr/<ip> ->
                      ../nodes/<name>
  fabric/             the InfiniBand fabric's shared answers and topology.json (sim/fabric.py);
                      fabric/traffic/ the flow model's topology and flow registry
                      (sim/tools/traffic.py, sim/flowmodel.py)
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from nodegate.core.errors import ConfigError
from nodegate.core.names import check_name
from nodegate.sim.fabric import Fabric, build_fabric
from nodegate.sim.files import model_json, sshd_config, write_inventory
from nodegate.sim.fleet_model import TOOL_FAULTS, FleetModel, SimNode, load_model
from nodegate.sim.nodefs import Entry, TreeWriter
from nodegate.sim.nodetools import HOST_PATH, LIBS, MARK, NODE_TOOLS, fast_shim, node_tool_stub
from nodegate.sim.session import DISPATCH, FAST_TIMEOUT
from nodegate.sim.sshd import accepts, alive, find_sshd, pid_alive, supports_no_reexec
from nodegate.sim.tools import (
    SimTool,
    known_faults,
    node_tools,
    providers,
    render_function,
    render_tool,
)
from nodegate.sim.tools import fabric as fabric_tools
from nodegate.sim.tools import traffic as traffic_tools
from nodegate.transport.script import LAUNCHER

ADDRS_PER_SSHD = 16  # OpenSSH's MAX_LISTEN_SOCKS


@dataclass(frozen=True, slots=True)
class FleetStatus:
    root: str
    daemons: int
    running: int
    nodes: int
    listening: int


class Fleet:
    """A simulated fleet rooted at a directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    # -- build ----------------------------------------------------------------------------
    def build(self, model: FleetModel, *, port: int | None = None) -> None:
        """Write every file of the fleet (keys, daemons' configs, per-node tools)."""
        if self.running_pids():
            raise ConfigError(f"fleet at {self.root} is running; stop it first")
        for n in model.nodes:  # each name becomes a directory and ssh_config/known_hosts lines
            check_name(f"{model.source}: nodes", "node", n.name)
        check_name(f"{model.source}: profile", "profile", model.profile)
        if self.root.exists():
            shutil.rmtree(self.root)
        # Not 22: a host sshd listening on 0.0.0.0:22 would collide with the loopback addresses.
        port = port or 2222
        for d in ("keys", "sshd", "nodes", "by-addr", "bin"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        self._keygen(self.root / "id_ed25519", "nodegate-sim-client")
        self._keygen(self.root / "keys" / "imposter", "nodegate-sim-imposter")
        (self.root / "authorized_keys").write_text((self.root / "id_ed25519.pub").read_text())
        (self.root / "dispatch").write_text(
            DISPATCH.format(root=self.root, launcher=shlex.quote(LAUNCHER), host_path=HOST_PATH)
        )
        for name, lib in LIBS.items():
            (self.root / name).write_text(lib)
        for tool in NODE_TOOLS:
            _write_exec(self.root / "bin" / tool, node_tool_stub(self.root, tool))
        writer, trees = TreeWriter(), []
        # The InfiniBand fabric: its shared answers once, each node's observer tools below.
        fab = build_fabric(model)
        fabric_tools.write_shared(fab, self.root, int(time.time()))
        traffic_tools.write_shared(model, fab, self.root)  # the flow model's topology, its registry

        serving = [n for n in model.nodes if n.fault("unreachable") is None]
        groups = [serving[i : i + ADDRS_PER_SSHD] for i in range(0, len(serving), ADDRS_PER_SSHD)]
        host_keys: dict[str, str] = {}
        for k, group in enumerate(groups):
            key = self.root / "keys" / f"host_{k}"
            self._keygen(key, f"nodegate-sim-host-{k}")
            pub = (key.with_suffix(".pub")).read_text().split()[:2]
            for n in group:
                host_keys[n.name] = " ".join(pub)
            (self.root / "sshd" / f"{k}.conf").write_text(
                sshd_config(self.root, k, group, key, port)
            )
        imposter = " ".join((self.root / "keys" / "imposter.pub").read_text().split()[:2])

        kh_lines, cfg_lines = [], []
        for n in model.nodes:
            hk = imposter if n.fault("hostkey_changed") else host_keys.get(n.name, imposter)
            host = n.address if port == 22 else f"[{n.address}]:{port}"
            names = n.name if port == 22 else f"[{n.name}]:{port}"
            if not n.fault("hostkey_unknown"):
                kh_lines.append(f"{names},{host} {hk}")
            cfg_lines += [
                f"Host {n.name}",
                f"  HostName {n.address}",
                f"  Port {port}",
                f"  User {_user()}",
                "",
            ]
            trees.append(self._build_node(n, fab))
            if len(trees) == 64:
                self._write_trees(writer, trees)
        cfg_lines += [
            "Host *",
            f"  IdentityFile {self.root / 'id_ed25519'}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {self.root / 'known_hosts'}",
            "  StrictHostKeyChecking yes",
            "  ConnectTimeout 10",
            "  BatchMode yes",
            "  LogLevel ERROR",
            "",
        ]
        self._write_trees(writer, trees)
        (self.root / "known_hosts").write_text("\n".join(kh_lines) + "\n")
        (self.root / "ssh_config").write_text("\n".join(cfg_lines))
        write_inventory(self.root, model)
        (self.root / "model.json").write_text(json.dumps(model_json(model, port), indent=1) + "\n")

    def _build_node(self, n: SimNode, fab: Fabric) -> tuple[Path, Mapping[str, Entry]]:
        """Write the node's tools; returns its root and the files to write there."""
        d = self.root / "nodes" / n.name
        (d / "bin").mkdir(parents=True)
        fast = [
            "unset BASH_ENV  # loaded once, by the launcher's bash; not by its children",
            FAST_TIMEOUT,
        ]
        tools: list[SimTool] = [*node_tools(n), *fabric_tools.tools(n, fab)]
        # Transport-level faults on tools no provider renders (host tools like cat).
        rendered = {t.name for t in tools}
        processes = {name for p in providers() for name in p.scripts(n)}
        for f in n.faults:
            if f.kind in TOOL_FAULTS and f.kind != "missing" and f.arg in processes:
                raise ConfigError(
                    f"{n.name}: fault {f.kind}: {f.arg} cannot be injected: {f.arg} runs as a "
                    "real simulated process here; only `missing` applies to it"
                )
        tools += [
            SimTool(f.arg, {})
            for f in n.faults
            if f.kind in TOOL_FAULTS and f.arg and f.arg not in rendered
        ]
        (d / "fn").mkdir()
        for tool in tools:
            _write_exec(d / "bin" / tool.name, render_tool(tool, n))
            fn = render_function(tool, n)
            if fn is not None:
                (d / "fn" / f"{tool.name}.sh").write_text(fn)
        for p in providers():
            for name, script in p.scripts(n).items():
                if not n.faulty_tool("missing", name):  # `missing: ib_write_bw` too
                    _write_exec(d / "bin" / name, script)
        # The node's view of host tools runs in-shell unless a fault put a stub of its own first.
        fast += [fast_shim(self.root, t) for t in NODE_TOOLS if not (d / "bin" / t).exists()]
        (d / "fast.sh").write_text("\n".join(fast))
        entries = {path: e for p in providers() for path, e in p.files(n).items()}
        (d / "root").mkdir()
        (d / MARK).symlink_to("root")
        (d / "fabric").symlink_to(Path("..") / ".." / "fabric")  # the fleet's shared answers
        slow = n.fault("slow")
        if slow is not None:
            (d / "slow").write_text(f"{float(slow.arg or 5):g}\n")
        drop = n.fault("drop_after")
        if drop is not None:
            (d / "drop_after").write_text(f"{float(drop.arg or 1):g}\n")
        (self.root / "by-addr" / n.address).symlink_to(Path("..") / "nodes" / n.name)
        return d / "root", entries

    @staticmethod
    def _write_trees(writer: TreeWriter, trees: list[tuple[Path, Mapping[str, Entry]]]) -> None:
        """Nodes' files (hundreds of directories and links each), written by a few threads
        since each mkdir mostly waits on the filesystem (about 3x faster here); `trees` is
        emptied, so a large fleet holds a batch of nodes' entries at a time."""
        with ThreadPoolExecutor(max_workers=4) as pool:
            climbs = list(pool.map(lambda tree: writer.write(*tree), trees))
        for (root, _), climb in zip(trees, climbs, strict=True):
            if climb:
                (root.parent / "climb.sh").write_text(climb)
        trees.clear()

    @staticmethod
    def _keygen(path: Path, comment: str) -> None:
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
            check=True,
            stdin=subprocess.DEVNULL,
        )

    # -- lifecycle ------------------------------------------------------------------------
    def confs(self) -> list[Path]:
        return sorted((self.root / "sshd").glob("*.conf"), key=lambda p: int(p.stem))

    def start(self, timeout_s: float = 30.0) -> None:
        """Start every daemon and wait until each address accepts TCP connections."""
        if not (self.root / "model.json").exists():
            raise ConfigError(f"no fleet built at {self.root}")
        sshd = find_sshd()
        if not self.running_pids():
            busy = [a for a in self.listen_addresses() if accepts(*a)]
            if busy:
                raise ConfigError(
                    f"{len(busy)} of this fleet's addresses already accept connections (first "
                    f"{busy[0][0]}:{busy[0][1]}): another fleet on the same subnet is running; "
                    "stop it or build this one with another --subnet"
                )
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
        for conf in self.confs():
            pidf = conf.with_suffix(".pid")
            if alive(pidf):
                continue
            # -r: fork per connection without re-executing sshd (saves an exec, a config parse
            # and a host-key load per connection on the shared 2 cores; OpenSSH < 9.8).
            subprocess.run(
                [
                    sshd,
                    *(["-r"] if supports_no_reexec(sshd) else []),
                    "-f",
                    str(conf),
                    "-E",
                    str(conf.with_suffix(".log")),
                ],
                check=True,
                stdin=subprocess.DEVNULL,
            )
        self.wait_listening(timeout_s)

    def wait_listening(self, timeout_s: float) -> None:
        addrs = self.listen_addresses()
        deadline = time.monotonic() + timeout_s
        pending = list(addrs)
        while pending:
            pending = [a for a in pending if not accepts(*a)]
            if not pending:
                return
            if time.monotonic() > deadline:
                logs = " ".join(str(p) for p in (self.root / "sshd").glob("*.log"))
                raise RuntimeError(
                    f"{len(pending)} simulated nodes not listening after {timeout_s:g} s "
                    f"(first {pending[0][0]}:{pending[0][1]}); see {logs}"
                )
            time.sleep(0.05)

    def listen_addresses(self) -> list[tuple[str, int]]:
        out = []
        for conf in self.confs():
            for line in conf.read_text().splitlines():
                if line.startswith("ListenAddress "):
                    host, _, port = line.split()[1].rpartition(":")
                    out.append((host, int(port)))
        return out

    def running_pids(self) -> list[int]:
        pids = []
        for pidf in sorted((self.root / "sshd").glob("*.pid")) if self.root.exists() else []:
            pid = alive(pidf)
            if pid:
                pids.append(pid)
        return pids

    def stop(self, timeout_s: float = 10.0) -> int:
        """Stop the daemons this fleet started (by the PIDs in their pid files)."""
        pids = self.running_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pidf in (self.root / "sshd").glob("*.pid"):
            pidf.unlink(missing_ok=True)
        return len(pids)

    def status(self) -> FleetStatus:
        confs = self.confs() if self.root.exists() else []
        addrs = self.listen_addresses() if confs else []
        model = json.loads((self.root / "model.json").read_text()) if confs else {"nodes": []}
        return FleetStatus(
            root=str(self.root),
            daemons=len(confs),
            running=len(self.running_pids()),
            nodes=len(model["nodes"]),
            listening=sum(1 for a in addrs if accepts(*a)),
        )

    def model(self) -> dict[str, object]:
        doc: dict[str, object] = json.loads((self.root / "model.json").read_text())
        return doc


def build_fleet(
    model_path: str | os.PathLike[str],
    root: str | os.PathLike[str],
    *,
    subnet: str = "127.77",
    port: int | None = None,
) -> Fleet:
    model = load_model(model_path, known_faults(), subnet=subnet)
    fleet = Fleet(root)
    fleet.build(model, port=port)
    return fleet


def _user() -> str:
    import getpass

    return getpass.getuser()


def _write_exec(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


__all__ = ["Fleet", "FleetStatus", "build_fleet", "find_sshd"]
