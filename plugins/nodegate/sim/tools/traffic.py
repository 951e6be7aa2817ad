"""Simulated fabric under load for the `traffic` stage: the flow model's topology (written once
per fleet to `fabric/traffic/topology.json`, read by every simulated `ib_write_bw -D`), the
flow registry next to it, and the faults that change how congestion is handled.

The model (sim/flowmodel.py) sees leaves and spines from the labels: each rack's `leaf` label
is one leaf per rail (rails are separate planes), with `uplinks` uplinks per leaf and rail
to the spines (default one per host: non-blocking). The NIC counters that follow from the
flows are read through the tools the roce stage reads (`ethtool -S`, `rdma statistic`,
sim/tools/roce_render.py).

Node faults (a rail of the node, ARG default 0): `np_off` — the receiver's notification point
sends no CNPs although its ECN settings read back on; `rp_off` — the sender's reaction point
ignores CNPs (it takes more than its share). Switch faults, in the model's `traffic:` key
(`traffic: {uplinks: 0, faults: [{ecn_not_marked: "leaf02:0"}, ...]}`, ARG `LEAF` or
`LEAF:RAIL`): `ecn_not_marked`, `pfc_off`, `static_route_collision`, `uplink_down`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nodegate.core.errors import ConfigError
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
    "uplink_down": "one uplink of leaf ARG ('LEAF' or 'LEAF:RAIL') is down",
}
SHARED = "traffic"  # under the fleet's fabric/ directory


def _rails(node: SimNode, kind: str) -> list[int]:
    out = []
    for f in node.faults:
        if f.kind == kind:
            arg = f.arg or "0"
            if not arg.isdigit():
                raise ConfigError(f"node {node.name}: fault {kind}: rail {arg!r} is not a number")
            out.append(int(arg))
    return sorted(out)


def topology(model: FleetModel) -> dict[str, Any]:
    """The flow model's topology document (sim/flowmodel.py) for a fleet model."""
    raw = model.traffic
    where = f"{model.source}: traffic"
    if not isinstance(raw, Mapping) or set(raw) - {"uplinks", "faults"}:
        raise ConfigError(f"{where}: a mapping of uplinks, faults; got {raw!r}")
    uplinks = raw.get("uplinks", 0)
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
    return {"nodes": nodes, "leaf_nodes": leaves, "uplinks": uplinks, "switch_faults": switch}


def write_shared(model: FleetModel, root: Path) -> None:
    """`fabric/traffic/`: the topology and an empty flow registry (written once per fleet)."""
    d = root / "fabric" / SHARED
    d.mkdir(parents=True, exist_ok=True)
    (d / "topology.json").write_text(json.dumps(topology(model), indent=1) + "\n")
    (d / "flows.jsonl").write_text("")


def tools(node: SimNode) -> Iterable[SimTool]:
    return ()


PROVIDER = Provider(name="traffic", tools=tools, faults=FAULTS)
