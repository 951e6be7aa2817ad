"""The simulated fabric's model keys and faults (sim/fabric.py builds the fabric from them)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.sim.fleet_model import Fault, FleetModel, SimNode, parse_faults
from nodegate.sim.tools.hca import RAILS

SWITCH_FW = "31.2012.1068"
OLD_SWITCH_FW = "31.2010.4100"
SWITCH_PSID = "MT_0000000693"
# Rates per second on a port carrying traffic; XmitWait ticks on a healthy and a starved port.
DATA_WORDS_PER_S = 250_000_000  # PortXmitData/PortRcvData count 4-octet words (1 GB/s)
PKTS_PER_S = 240_000
XMIT_WAIT_PER_S = 120
XMIT_WAIT_STARVED_PER_S = 45_000_000
SYMBOL_ERRORS_PER_S = 30
MASTER_PRIORITY, STANDBY_PRIORITY = 14, 12

FAULTS = {
    "fabric_rails_swapped": (
        "rails A and B of the node (ARG 'A,B', default '2,3') have swapped cables: each HCA "
        "lands on the other rail's leaf and port"
    ),
    "fabric_rail_wrong_leaf": (
        "rail ARG (default 4) is cabled to the next rail's leaf of its rack (a spare port "
        "there); its own leaf port has no partner"
    ),
    "fabric_rail_unplugged": (
        "rail ARG (default 4) has no cable: the leaf port has no partner and the host port "
        "is DOWN / Polling"
    ),
    "fabric_switch_port_2x": "the leaf port facing rail ARG (default 4) is active at 2X width",
    "fabric_switch_port_hdr": "the leaf port facing rail ARG (default 4) is active at HDR",
    "fabric_symbol_errors": (
        f"SymbolErrorCounter of the leaf port facing rail ARG (default 4) climbs "
        f"({SYMBOL_ERRORS_PER_S}/s)"
    ),
    "fabric_pkey_missing": (
        "port 1 of rail ARG's HCA (default 4) lacks the compute partition 0x8001 (pkey "
        "index 1 reads 0x0000)"
    ),
}
SWITCH_FAULTS = {
    "uplink_xmit_wait": (
        f"PortXmitWait of uplink ARG ('LEAF' or 'LEAF:PORT'; default the leaf's first uplink) "
        f"climbs at {XMIT_WAIT_STARVED_PER_S}/s (credit starvation)"
    ),
    "uplink_down": (
        "uplink ARG ('LEAF' or 'LEAF:PORT') has no link: both ends have no partner (the "
        "traffic flow model routes around it: sim/flowmodel.py)"
    ),
    "sm_none": "no subnet manager runs: sminfo and saquery SMIR fail (the SMs' LID stays set)",
    "sm_two_masters": "the standby SM on spine02 also reports MASTER (two masters)",
    "switch_old_firmware": f"switch ARG runs firmware {OLD_SWITCH_FW} (the rest {SWITCH_FW})",
}


@dataclass(frozen=True, slots=True)
class Spec:
    nodes_per_leaf: int | None
    spines: int  # 0: as many as needed
    uplinks: int
    switch_ports: int
    spine_ports: int
    firmware: str
    faults: tuple[Fault, ...]


def _int(raw: Mapping[str, Any], key: str, default: int, where: str, top: int = 10**6) -> int:
    v = raw.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
        raise ConfigError(f"{where}.{key}: got {v!r}, expected a whole number 1-{top}")
    return v


def spec_of(model: FleetModel) -> Spec:
    raw = model.fabric
    where = f"{model.source}: fabric"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a mapping, got {raw!r}")
    allowed = {
        *("nodes_per_leaf", "spines", "uplinks_per_leaf", "switch_ports", "spine_ports"),
        *("firmware", "faults"),
    }
    if set(raw) - allowed:
        raise ConfigError(f"{where}: unknown keys {sorted(set(raw) - allowed)}")
    # No `spines`: as many as the leaves' uplinks need (0 here, counted by build_fabric), two
    # uplinks per leaf; with `spines`, every leaf reaches every spine unless told otherwise.
    spines = 0 if raw.get("spines") is None else _int(raw, "spines", 2, where)
    # An IB port number is 8 bits, 255 reserved: a switch (one ASIC) has at most 254 ports.
    switch_ports = _int(raw, "switch_ports", 64, where, 254)
    npl = raw.get("nodes_per_leaf")
    return Spec(
        nodes_per_leaf=None if npl is None else _int(raw, "nodes_per_leaf", 1, where),
        spines=spines,
        uplinks=_int(raw, "uplinks_per_leaf", spines or 2, where),
        switch_ports=switch_ports,
        spine_ports=_int(raw, "spine_ports", switch_ports, where, 254),
        firmware=str(raw.get("firmware", SWITCH_FW)),
        faults=parse_faults(raw.get("faults"), f"{where}.faults", SWITCH_FAULTS),
    )


def groups(model: FleetModel, spec: Spec) -> list[tuple[str, list[SimNode]]]:
    """(leaf name stem, nodes in port order) per rack, or per group of nodes_per_leaf."""
    out: dict[str, list[SimNode]] = {}
    for n in model.nodes:
        if spec.nodes_per_leaf is None:
            key = n.labels["rack"]
        else:
            key = f"su{n.index // spec.nodes_per_leaf + 1:02d}"
        out.setdefault(key, []).append(n)
    return list(out.items())


def _rail_arg(f: Fault, default: int, where: str) -> int:
    arg = f.arg if f.arg is not None else str(default)
    if not arg.isdigit() or int(arg) >= RAILS:
        raise ConfigError(f"{where}: fault {f.kind}: rail {arg!r} is not 0-{RAILS - 1}")
    return int(arg)


def node_faults(n: SimNode) -> Iterator[tuple[str, int, int]]:
    """(kind, rail, other rail) of the node's fabric faults."""
    where = f"node {n.name}"
    for f in n.faults:
        if f.kind == "fabric_rails_swapped":
            a, _, b = (f.arg or "2,3").partition(",")
            if not (a.isdigit() and b.isdigit()) or int(a) == int(b) or max(int(a), int(b)) >= 8:
                raise ConfigError(f"{where}: fault {f.kind}: {f.arg!r} is not 'A,B' (two rails)")
            yield f.kind, int(a), int(b)
        elif f.kind in FAULTS:
            yield f.kind, _rail_arg(f, 4, where), -1


def uplink_faults(
    spec: Spec, leaves: Mapping[str, int], per_leaf: int, where: str
) -> set[tuple[str, int, int]]:
    out: set[tuple[str, int, int]] = set()
    for f in spec.faults:
        if f.kind not in ("uplink_xmit_wait", "uplink_down"):
            continue
        name, _, port = (f.arg or "").partition(":")
        lid = leaves.get(name)
        if lid is None:
            raise ConfigError(f"{where}: {f.kind}: {f.arg!r} names no leaf")
        lp = int(port) if port.isdigit() else per_leaf + 1
        if not per_leaf < lp <= per_leaf + spec.uplinks:
            raise ConfigError(f"{where}: {f.kind}: port {lp} of {name} is not an uplink")
        out.add((f.kind, lid, lp))
    return out
