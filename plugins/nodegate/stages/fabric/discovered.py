"""What later stages use of the fabric this run discovered: where each node's rails land
(from the fabric stage's raw evidence in the run directory: the observer's ibnetdiscover and
each node's port GUIDs), so that ib_pairs pairs by the discovered leaves rather than only by
labels, and nccl names the leaves a failing group crosses.

Empty when the fabric stage did not run (or its discovery was not usable): callers fall back
to the inventory's `leaf` labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.inventory.nodes import natural_key
from nodegate.stages.fabric.snapshot import run_topologies, snapshot_of_run

Cabling = Mapping[str, Mapping[str, str]]  # node -> RDMA device -> the switch it lands on


def _subnets(run_dir: Path) -> list[Mapping[str, Any]]:
    """Every subnet the run's fabric stage discovered (none when it did not run)."""
    try:
        return list(snapshot_of_run(run_dir)["subnets"].values())
    except ConfigError:
        return []


def discovered_cabling(run_dir: Path) -> dict[str, dict[str, str]]:
    """node -> device -> switch name, over every subnet the run's fabric stage discovered."""
    out: dict[str, dict[str, str]] = {}
    for sub in _subnets(run_dir):
        for node, devs in sub["nodes"].items():
            for dev, end in devs.items():
                out.setdefault(node, {})[dev] = str(end["switch"])
    return out


def discovered_ports(run_dir: Path) -> dict[str, dict[str, tuple[int, int]]]:
    """node -> device -> (LID, port) of the switch port it lands on, over every subnet the
    run's fabric stage discovered (what perfquery reads that port's counters by)."""
    try:
        topologies, guids = run_topologies(run_dir)
    except ConfigError:
        return {}
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for topo in topologies.values():
        for guid, port in topo.ca_ports.items():
            if guid in guids:
                node, device = guids[guid].split(" ", 1)
                out.setdefault(node, {})[device] = (port.switch.lid, port.port)
    return out


def discovered_uplink_ends(run_dir: Path) -> dict[str, list[tuple[int, int, str, int, int]]]:
    """leaf -> its linked uplinks by port: (leaf LID, leaf port, far switch, its LID, its port),
    over every subnet the run's fabric stage discovered (what perfquery reads a cable's two
    ends by)."""
    try:
        topologies, _ = run_topologies(run_dir)
    except ConfigError:
        return {}
    out: dict[str, list[tuple[int, int, str, int, int]]] = {}
    for topo in topologies.values():
        for leaf in topo.leaves():
            out.setdefault(leaf.name, []).extend(
                (leaf.lid, u.local.port, u.remote.switch.name, u.remote.switch.lid, u.remote.port)
                for u in topo.uplinks(leaf)
                if u.remote is not None
            )
    return out


def discovered_uplinks(run_dir: Path) -> dict[str, list[str]]:
    """leaf -> its uplinks, `P17 -> spine01 P3` (its port, the far end), over every subnet
    the run's fabric stage discovered."""
    out: dict[str, list[str]] = {}
    for sub in _subnets(run_dir):
        for leaf, ports in (sub.get("uplinks") or {}).items():
            out.setdefault(leaf, []).extend(
                f"P{p} -> {ports[p]}" for p in sorted(ports, key=natural_key)
            )
    return out


def node_leaf(cabling: Cabling, node: str, devices: Iterable[str]) -> str | None:
    """The leaf of the node's first rail that landed somewhere (in a rail-optimized fabric two
    nodes share a leaf on one rail exactly when they do on every rail)."""
    mine = cabling.get(node, {})
    return next((mine[d] for d in devices if d in mine), None)


def leaves_crossed(cabling: Cabling, nodes: Iterable[str]) -> list[str]:
    """The leaves the nodes' rails land on, sorted: what a job of these nodes crosses."""
    return sorted({sw for n in nodes for sw in cabling.get(n, {}).values()})
