"""The simulated fleet's model: per-node hardware and injected faults, loaded from YAML."""

from __future__ import annotations

import copy
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ClusterShell.NodeSet import RESOLVER_NOGROUP

from nodegate.core.errors import ConfigError
from nodegate.core.names import check_name
from nodegate.inventory.select import parse_nodeset
from nodegate.inventory.yamlio import load_yaml

# Faults the transport layer and dispatcher implement; tool providers add their own kinds.
TRANSPORT_FAULTS = {
    "unreachable": "no sshd listens on the node's address (connection refused)",
    "auth_refused": "sshd refuses the client key for this node",
    "hostkey_changed": "known_hosts holds a different host key for this node (re-imaged node)",
    "hostkey_unknown": "known_hosts has no entry for this node (never seen)",
    "slow": "every session waits ARG seconds before it runs anything",
    "drop_after": (
        "the node's SSH connection drops (its sshd session is killed) ARG seconds after its "
        "first command that is not a stage script: an active stage's first process"
    ),
    "hang": "tool ARG never returns (killed at its deadline)",
    "garbage": "tool ARG prints garbage and exits 0",
    "missing": "tool ARG is not installed (rc 127)",
    "slurmd_down": (
        "with the fleet's Slurm (`nodegate sim up --slurm`): no slurmd runs for this node, so "
        "Slurm sees it not responding (idle*, then DOWN)"
    ),
    "flood": "tool ARG prints without end (a runaway tool: ~300 MB unless the node caps it)",
    "forge": (
        "tool ARG tries to forge the session: reads its shell's stdin for the stage script's "
        "nonce and prints frames claiming a healthy node"
    ),
    "hijack": (
        "tool ARG (as `cat /etc/os-release`) takes over its session: learns the nonce, writes a "
        "healthy node's reach frames and DONE into its shell's stdout (/proc/<pid>/fd/1), then "
        "kills the shell (SIGKILL)"
    ),
    "hijack_end": (
        "how `hijack` ends the session instead: term (SIGTERM), more (the shell goes on, its "
        "frames after the forged DONE), drop (the shell's parent killed: no exit status)"
    ),
}
# A simulated fleet's own run settings, unless its model says otherwise: its ib_write_bw sides,
# sshd sessions and shells all run on this machine's cores, so 64 at once (32 ib_pairs tests)
# is what two cores carry without servers missing their readiness deadline (bench_ib_pairs).
SIM_SETTINGS: Mapping[str, Any] = {"max_active": 64}
# Faults on a named tool; all of them work on the tools rendered as stubs, only `missing` on
# the tools that run as real processes (ib_write_bw, numactl).
TOOL_FAULTS = ("missing", "hang", "garbage", "flood", "forge", "hijack")


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    arg: str | None = None

    def __str__(self) -> str:
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"


@dataclass(frozen=True, slots=True)
class SimNode:
    name: str
    index: int
    address: str
    labels: Mapping[str, str]
    hw: Mapping[str, Any]
    faults: tuple[Fault, ...] = ()

    def fault(self, kind: str) -> Fault | None:
        return next((f for f in self.faults if f.kind == kind), None)

    def faulty_tool(self, kind: str, tool: str) -> bool:
        return any(f.kind == kind and f.arg == tool for f in self.faults)


@dataclass(frozen=True, slots=True)
class FleetModel:
    name: str
    profile: str
    source: str
    nodes: tuple[SimNode, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The InfiniBand fabric's shape and switch-level faults (sim/fabric.py checks it).
    fabric: Mapping[str, Any] = field(default_factory=dict)
    # The fabric under load: uplinks per leaf and switch faults (sim/tools/traffic.py).
    traffic: Mapping[str, Any] = field(default_factory=dict)
    # Run settings its inventory carries (`settings:` of the inventory schema): by default a
    # lower channel limit than the product's, as every node's processes share this machine.
    settings: Mapping[str, Any] = field(default_factory=lambda: dict(SIM_SETTINGS))

    def node(self, name: str) -> SimNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _nodeset(expr: Any, where: str) -> list[str]:
    """Node names of a hostlist expression, each a valid node name (it names a directory, an
    ssh_config Host and a known_hosts entry), bounded before it is expanded."""
    names = parse_nodeset(str(expr), RESOLVER_NOGROUP, where)
    for name in names:
        check_name(where, "node", name)
    return names


def address_for(subnet: str, index: int) -> str:
    """Node `index` -> an address in 127.0.0.0/8 (`subnet` like '127.77'), skipping .0/.255."""
    try:
        net = ipaddress.IPv4Network(f"{subnet}.0.0/16")
    except ValueError:
        raise ConfigError(f"simulated fleet subnet {subnet!r} is not like '127.77'") from None
    if not net.subnet_of(ipaddress.IPv4Network("127.0.0.0/8")):
        raise ConfigError(f"simulated fleet subnet {subnet} is outside 127.0.0.0/8")
    hi, lo = divmod(index, 250)
    if hi > 255:
        raise ConfigError("simulated fleet larger than 64,000 nodes")
    return f"{subnet}.{hi}.{lo + 1}"


def parse_faults(raw: Any, where: str, known: Mapping[str, str]) -> tuple[Fault, ...]:
    """`[unreachable, {hang: uname}, "slow:3"]` -> Faults, each kind checked against `known`."""
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    out: list[Fault] = []
    for item in items:
        if isinstance(item, str):
            kind, _, arg = item.partition(":")
            f = Fault(kind.strip(), arg.strip() or None)
        elif isinstance(item, Mapping) and len(item) == 1:
            ((k, v),) = item.items()
            f = Fault(str(k), None if v is None else str(v))
        else:
            raise ConfigError(
                f"{where}: a fault is a name, 'name:arg' or {{name: arg}}, got {item!r}"
            )
        if f.kind not in known:
            raise ConfigError(
                f"{where}: unknown fault {f.kind!r}; known: {', '.join(sorted(known))}"
            )
        out.append(f)
    return tuple(out)


def load_model(
    path: str | os.PathLike[str], known_faults: Mapping[str, str], subnet: str = "127.77"
) -> FleetModel:
    """Read a fleet model YAML (see inventories/sim/*.yaml)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read fleet model: {exc}") from None
    doc = load_yaml(str(p), text)
    if not isinstance(doc, dict):
        raise ConfigError(f"{p}: a fleet model is a mapping")
    allowed = {
        *("name", "profile", "nodes", "hardware", "racks", "overrides", "faults", "extra"),
        *("settings", "fabric", "traffic"),
    }
    unknown = set(doc) - allowed
    if unknown:
        raise ConfigError(f"{p}: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    for key in ("name", "profile", "nodes"):
        if key not in doc:
            raise ConfigError(f"{p}: missing key {key!r}")
    profile = check_name(f"{p}: profile", "profile", doc["profile"])  # a file name, a label
    names = _nodeset(doc["nodes"], f"{p}: nodes")
    hw_default = doc.get("hardware") or {}
    if not isinstance(hw_default, dict):
        raise ConfigError(f"{p}: hardware must be a mapping")
    racks = doc.get("racks") or {}
    per_rack = int(racks.get("nodes_per_rack", 8)) if isinstance(racks, dict) else 8
    if per_rack < 1:
        raise ConfigError(f"{p}: racks.nodes_per_rack must be >= 1")

    overrides: dict[str, dict[str, Any]] = {n: {} for n in names}
    for expr, over in (doc.get("overrides") or {}).items():
        where = f"{p}: overrides.{expr}"
        if not isinstance(over, dict):
            raise ConfigError(f"{where}: must be a mapping of hardware keys")
        for n in _nodeset(expr, where):
            if n not in overrides:
                raise ConfigError(f"{where}: node {n} is not in nodes {doc['nodes']}")
            overrides[n] = _deep_merge(overrides[n], over)
    faults: dict[str, tuple[Fault, ...]] = {n: () for n in names}
    for expr, raw in (doc.get("faults") or {}).items():
        where = f"{p}: faults.{expr}"
        parsed = parse_faults(raw, where, known_faults)
        for n in _nodeset(expr, where):
            if n not in faults:
                raise ConfigError(f"{where}: node {n} is not in nodes {doc['nodes']}")
            faults[n] = faults[n] + parsed

    nodes = []
    for i, n in enumerate(names):
        rack = i // per_rack + 1
        labels = {"rack": f"r{rack:02d}", "leaf": f"leaf{rack:02d}"}
        nodes.append(
            SimNode(
                name=n,
                index=i,
                address=address_for(subnet, i),
                labels=labels,
                hw=_deep_merge(hw_default, overrides[n]),
                faults=faults[n],
            )
        )
    return FleetModel(
        name=str(doc["name"]),
        profile=profile,
        source=str(p),
        nodes=tuple(nodes),
        extra=doc.get("extra") or {},
        fabric=doc.get("fabric") or {},
        traffic=doc.get("traffic") or {},
        settings=_settings(doc.get("settings"), f"{p}: settings"),
    )


def _settings(raw: Any, where: str) -> dict[str, Any]:
    """The fleet's run settings over SIM_SETTINGS (checked again with the inventory's schema
    when the run reads the inventory)."""
    if raw is None:
        return dict(SIM_SETTINGS)
    if not isinstance(raw, Mapping) or set(raw) - set(SIM_SETTINGS):
        raise ConfigError(f"{where}: a mapping of {', '.join(sorted(SIM_SETTINGS))}, got {raw!r}")
    limit = raw.get("max_active", SIM_SETTINGS["max_active"])
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"{where}.max_active: got {limit!r}, expected a whole number >= 1")
    return {**SIM_SETTINGS, **raw}
