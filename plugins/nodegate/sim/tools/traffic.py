"""Simulated fabric under load for the `traffic` stage: the flow model's topology (written once
per fleet to `fabric/traffic/topology.json`, read by every simulated `ib_write_bw -D`), the
flow registry next to it, and the faults that change how congestion is handled.

The model (sim/flowmodel.py) sees leaves and spines from the labels: each rack's `leaf` label
is one leaf per rail (rails are separate planes), with `uplinks` uplinks per leaf and rail
to the spines (default one per host: non-blocking; the fabric's `uplinks_per_leaf` when the
model's `fabric:` names it). The leaves are the fabric's switches (sim/fabric.py: `leaf-r01-rail3`
is rack r01's leaf on rail 3) and their uplinks the fabric's, in order: uplink k of the model is
the fabric's uplink k, so the fabric's `uplink_down` (its port has no link) is the one the flows
avoid, and XmitWait of the switch ports (perfquery) ticks where the model's queues build. The
NIC counters that follow from the
flows are read through the tools the roce stage reads (`ethtool -S`, `rdma statistic`,
sim/tools/roce_render.py).

Node faults (a rail of the node, ARG default 0): `np_off` — the receiver's notification point
sends no CNPs although its ECN settings read back on; `rp_off` — the sender's reaction point
ignores CNPs (it takes more than its share). Switch faults, in the model's `traffic:` key
(`traffic: {uplinks: 0, faults: [{ecn_not_marked: "leaf02:0"}, ...]}`, ARG `LEAF` or
`LEAF:RAIL`): `ecn_not_marked`, `pfc_off`, `static_route_collision`. An uplink down is the
fabric's fault (`fabric: {faults: [{uplink_down: "leaf-r02-rail1"}]}`, sim/fabric_spec.py): one
definition for the switch side and the flows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.sim.fabric import Fabric
from nodegate.sim.fleet_model import FleetModel, SimNode, parse_faults
from nodegate.sim.tools.base import Provider, SimTool

FAULTS = {
    "np_off": "rail ARG (default 0): the NIC's notification point sends no CNPs (its ECN "
    "settings still read back on)",
    "rp_off": "rail ARG (default 0): the NIC's reaction point ignores CNPs (the sender takes "
    "more than its share)",
}
SWITCH_FAULTS = {
    "ecn_not_marked": "leaf ARG ('LEAF' or 'LEAF:RAIL') does not mark ECN on its congested ports",
    "pfc_off": "leaf ARG ('LEAF' or 'LEAF:RAIL') sends no PFC pauses (drops when congested)",
    "static_route_collision": "leaf ARG ('LEAF' or 'LEAF:RAIL') routes every flow leaving or "
    "entering it over one uplink",
}
SHARED = "traffic"  # under the fleet's fabric/ directory
XMIT_WAIT = "xmit_wait.tsv"  # LID, port, ticks the flows added (sim/tools/fabric.py's perfquery)


def _rails(node: SimNode, kind: str) -> list[int]:
    out = []
    for f in node.faults:
        if f.kind == kind:
            arg = f.arg or "0"
            if not arg.isdigit():
                raise ConfigError(f"node {node.name}: fault {kind}: rail {arg!r} is not a number")
            out.append(int(arg))
    return sorted(out)


def switches(model: FleetModel, fab: Fabric) -> dict[str, Any]:
    """`LEAF|RAIL` -> the fabric's switch of that leaf label and rail: its LID, the ports of the
    hosts on it that are on the InfiniBand fabric (whose XmitWait perfquery shows), and its
    uplinks in order, [leaf port, spine LID, spine port, up]."""
    linked = {(c.node, c.rail) for c in fab.cas if c.link.remote is not None}
    out: dict[str, Any] = {}
    for n in model.nodes:
        for rail, (name, port) in fab.expected.get(n.name, {}).items():
            sw = out.setdefault(f"{n.labels.get('leaf', '')}|{rail}", {
                "lid": fab.switch(name).lid, "hosts": {},
                "uplinks": [[u.port, u.spine_lid, u.spine_port, u.up]
                            for u in fab.uplinks.get(name, ())],
            })  # fmt: skip
            if (n.name, rail) in linked:
                sw["hosts"][n.name] = port
    return out


def topology(model: FleetModel, fab: Fabric | None = None) -> dict[str, Any]:
    """The flow model's topology document (sim/flowmodel.py) for a fleet model (and its
    fabric: the switches, their uplinks and which are down)."""
    raw = model.traffic
    where = f"{model.source}: traffic"
    if not isinstance(raw, Mapping) or set(raw) - {"uplinks", "faults"}:
        raise ConfigError(f"{where}: a mapping of uplinks, faults; got {raw!r}")
    uplinks = raw.get("uplinks", 0)
    if not uplinks and isinstance(model.fabric, Mapping) and "uplinks_per_leaf" in model.fabric:
        uplinks = model.fabric["uplinks_per_leaf"]
    if isinstance(uplinks, bool) or not isinstance(uplinks, int) or not 0 <= uplinks <= 64:
        raise ConfigError(
            f"{where}.uplinks: got {uplinks!r}, expected a whole number 0-64 (0: one per host)"
        )
    leaves: dict[str, int] = {}
    nodes: dict[str, Any] = {}
    for n in model.nodes:
        leaf = n.labels.get("leaf", "")
        leaves[leaf] = leaves.get(leaf, 0) + 1
        hw = n.hw.get("ib_pairs") or {}
        nodes[n.name] = {
            "leaf": leaf,
            "rate_gbps": {"default": float(hw.get("rate_gbps", 400))},
            "np_off": _rails(n, "np_off"),
            "rp_off": _rails(n, "rp_off"),
        }
    switch = []
    for f in parse_faults(raw.get("faults"), f"{where}.faults", SWITCH_FAULTS):
        leaf, _, rail = (f.arg or "").partition(":")
        if leaf not in leaves:
            raise ConfigError(f"{where}.faults: {f.kind}: {f.arg!r} names no leaf")
        if rail and not rail.isdigit():
            raise ConfigError(f"{where}.faults: {f.kind}: rail {rail!r} is not a number")
        switch.append({"kind": f.kind, "leaf": leaf, "rail": int(rail) if rail else None})
    doc = {"nodes": nodes, "leaf_nodes": leaves, "uplinks": uplinks, "switch_faults": switch}
    if fab is not None:
        doc["switches"] = switches(model, fab)
    return doc


def write_shared(model: FleetModel, fab: Fabric, root: Path) -> None:
    """`fabric/traffic/`: the topology, an empty flow registry and no XmitWait yet (written
    once per fleet)."""
    d = root / "fabric" / SHARED
    d.mkdir(parents=True, exist_ok=True)
    (d / "topology.json").write_text(json.dumps(topology(model, fab), indent=1) + "\n")
    (d / "flows.jsonl").write_text("")
    (d / XMIT_WAIT).write_text("")


def tools(node: SimNode) -> Iterable[SimTool]:
    return ()


PROVIDER = Provider(name="traffic", tools=tools, faults=FAULTS)
