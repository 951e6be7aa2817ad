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

from nodegate.core.errors import ConfigError
from nodegate.stages.fabric.snapshot import snapshot_of_run

Cabling = Mapping[str, Mapping[str, str]]  # node -> RDMA device -> the switch it lands on


def discovered_cabling(run_dir: Path) -> dict[str, dict[str, str]]:
    """node -> device -> switch name, over every subnet the run's fabric stage discovered."""
    try:
        doc = snapshot_of_run(run_dir)
    except ConfigError:
        return {}
    out: dict[str, dict[str, str]] = {}
    for sub in doc["subnets"].values():
        for node, devs in sub["nodes"].items():
            for dev, end in devs.items():
                out.setdefault(node, {})[dev] = str(end["switch"])
    return out


def node_leaf(cabling: Cabling, node: str, devices: Iterable[str]) -> str | None:
    """The leaf of the node's first rail that landed somewhere (in a rail-optimized fabric two
    nodes share a leaf on one rail exactly when they do on every rail)."""
    mine = cabling.get(node, {})
    return next((mine[d] for d in devices if d in mine), None)


def leaves_crossed(cabling: Cabling, nodes: Iterable[str]) -> list[str]:
    """The leaves the nodes' rails land on, sorted: what a job of these nodes crosses."""
    return sorted({sw for n in nodes for sw in cabling.get(n, {}).values()})
