"""The simulated InfiniBand fabric: switches, cables, LIDs and the subnet manager of a fleet.

Derived from the fleet model, deterministically (same model, same fabric, byte for byte):

- Rail-optimized, two levels, one subnet. A leaf per rail and rack (`leaf-r01-rail3`), or per
  rail and group of `nodes_per_leaf` consecutive nodes when the model's `fabric:` says so
  (`leaf-su01-rail3`, a scalable unit). Node j of a leaf's rack or group lands on leaf port
  j + 1; the leaf's uplinks follow (ports nodes_per_leaf + 1 ..), spread round-robin over the
  spines (`spine01` ..); the remaining ports, up to `switch_ports` (64, a Quantum-2 QM9700),
  are unplugged. Uplink u of leaf l goes to spine (l * uplinks_per_leaf + u) mod spines, on
  that spine's next port.
- Every node's rail i is its HCA mlx5_i, port 1; its port GUID is the HCA's node GUID as the
  node's sysfs shows it (sim/tools/hca.py: ConnectX ports carry their function's node GUID).
- LIDs: spines 1.., leaves next, then every rail port in node and rail order (stable under
  faults: the SM keeps the LIDs it assigned). Switch GUIDs b83fd20300xxxxxx (index order).
- The SM: master on spine01 (priority 14) and, with two spines or more, a standby on spine02
  (priority 12), both on the switches' embedded SM.
- Counters: every switch port counts from a base at rates (per second); a read at t seconds
  after the fleet was built sees base + rate * t (sim/tools/fabric.py renders them).

The model's `fabric:` key (all optional): nodes_per_leaf, spines, uplinks_per_leaf (=
spines; without `spines`: 2 uplinks and as many spines as they need), switch_ports (64),
spine_ports (= switch_ports), firmware ("31.2012.1068"), faults
(switch-level, `name:arg` as node faults are written). Both fault tables and the keys are
read in sim/fabric_spec.py (SWITCH_FAULTS, FAULTS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from nodegate.core.errors import ConfigError
from nodegate.sim.fabric_spec import (
    DATA_WORDS_PER_S,
    FAULTS,
    MASTER_PRIORITY,
    OLD_SWITCH_FW,
    PKTS_PER_S,
    STANDBY_PRIORITY,
    SWITCH_FAULTS,
    SWITCH_PSID,
    SYMBOL_ERRORS_PER_S,
    XMIT_WAIT_PER_S,
    XMIT_WAIT_STARVED_PER_S,
    groups,
    node_faults,
    spec_of,
    uplink_faults,
)
from nodegate.sim.fleet_model import FleetModel, SimNode
from nodegate.sim.tools.hca import RAILS, node_hcas


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch: name (its node description), role, GUID, LID, port count, firmware."""

    name: str
    role: str  # "leaf" | "spine"
    guid: str  # '0x' + 16 hex digits
    lid: int
    ports: int
    firmware: str


@dataclass(frozen=True, slots=True)
class End:
    """One end of a cable as ibnetdiscover shows it."""

    kind: str  # "CA" | "SW"
    lid: int
    port: int
    guid: str
    description: str


@dataclass(frozen=True, slots=True)
class Link:
    """What one port sees: its partner (None: no link) and its active width and speed."""

    remote: End | None
    width: str = "4x"
    speed: str | None = "NDR"


@dataclass(frozen=True, slots=True)
class CaPort:
    """A node's rail port in the fabric."""

    node: str
    device: str
    rail: int
    guid: str
    lid: int
    link: Link  # remote None: not discovered (down, unplugged or gone)
    present: bool = True  # False: the HCA is gone from the node (hca_missing)


@dataclass(frozen=True, slots=True)
class SmRecord:
    """A subnet manager as SMInfo shows it."""

    lid: int
    guid: str
    activity: int
    priority: int
    state: int  # 3 MASTER, 2 STANDBY (sminfo.c statestr)


@dataclass(frozen=True, slots=True)
class PortRates:
    """One switch port's counters: base values and rates per second (absent: 0)."""

    base: Mapping[str, int]
    rate: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Uplink:
    """One leaf uplink: the leaf's port, the spine's LID and port, whether it has a link."""

    port: int
    spine_lid: int
    spine_port: int
    up: bool


@dataclass(frozen=True, slots=True)
class Fabric:
    """The whole fabric; `ports[(lid, port)]` is what each switch port sees."""

    switches: tuple[Switch, ...]
    cas: tuple[CaPort, ...]
    ports: Mapping[tuple[int, int], Link]
    sms: tuple[SmRecord, ...]
    sm_running: bool
    # The cabling a healthy fleet has: node -> rail -> (switch, port); the inventory's truth.
    expected: Mapping[str, Mapping[int, tuple[str, int]]]
    symbol_error_ports: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    starved_ports: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    # The CA ports of each node, in rail order (built by build_fabric from `cas`).
    by_node: Mapping[str, tuple[CaPort, ...]] = field(default_factory=dict)
    # leaf -> its uplinks in order: (leaf port, spine LID, spine port, up), `uplink_down`'s
    # with up False (the flow model reads the same list: sim/tools/traffic.py)
    uplinks: Mapping[str, tuple[Uplink, ...]] = field(default_factory=dict)

    def switch(self, name: str) -> Switch:
        for s in self.switches:
            if s.name == name:
                return s
        raise KeyError(name)

    def by_lid(self, lid: int) -> Switch | None:
        for s in self.switches:
            if s.lid == lid:
                return s
        return None

    def rates(self, lid: int, port: int) -> PortRates:
        """Counters of one switch port: traffic where a link is, faults' error counters."""
        link = self.ports.get((lid, port))
        base: dict[str, int] = {}
        rate: dict[str, int] = {}
        if link is not None and link.remote is not None:
            seed = lid * 1000 + port
            base = {name: seed * factor for name, factor in BASE_FACTORS.items()}
            rate = dict(LINK_RATES)
        if (lid, port) in self.starved_ports:
            rate["PortXmitWait"] = XMIT_WAIT_STARVED_PER_S
        if (lid, port) in self.symbol_error_ports:
            rate["SymbolErrorCounter"] = SYMBOL_ERRORS_PER_S
        return PortRates(base, rate)


# A linked port's counters start at seed * factor (seed = LID * 1000 + port) and climb at these
# rates; sim/tools/fabric.py's awk program computes the same from these two tables.
BASE_FACTORS = {
    "PortXmitData": 7_919_113,
    "PortRcvData": 6_700_417,
    "PortXmitPkts": 27_449,
    "PortRcvPkts": 23_209,
    "PortXmitWait": 97,
}
LINK_RATES = {
    "PortXmitData": DATA_WORDS_PER_S,
    "PortRcvData": DATA_WORDS_PER_S,
    "PortXmitPkts": PKTS_PER_S,
    "PortRcvPkts": PKTS_PER_S,
    "PortXmitWait": XMIT_WAIT_PER_S,
}


def _guid(index: int) -> str:
    return f"0xb83fd20300{0x6A0000 + index:06x}"


def build_fabric(model: FleetModel) -> Fabric:
    """The fleet's fabric after its faults; ConfigError on a fabric the switches cannot hold."""
    spec = spec_of(model)
    leaf_groups = groups(model, spec)
    per_leaf = max(len(nodes) for _, nodes in leaf_groups)
    if spec.nodes_per_leaf is not None:
        per_leaf = spec.nodes_per_leaf
    where = f"{model.source}: fabric"
    if per_leaf + spec.uplinks > spec.switch_ports:
        raise ConfigError(
            f"{where}: {per_leaf} node ports + {spec.uplinks} uplinks exceed {spec.switch_ports}"
        )
    n_leaves = len(leaf_groups) * RAILS
    if not spec.spines:  # enough spines for every uplink, a multiple of the uplinks, >= 2
        need = -(-n_leaves * spec.uplinks // spec.spine_ports)
        spec = replace(spec, spines=max(2, -(-need // spec.uplinks) * spec.uplinks))
    if spec.uplinks % spec.spines and spec.spines % spec.uplinks:
        raise ConfigError(
            f"{where}: uplinks_per_leaf {spec.uplinks} and {spec.spines} spines: "
            "one must divide the other"
        )
    per_spine = -(-n_leaves * spec.uplinks // spec.spines)
    if per_spine > spec.spine_ports:
        raise ConfigError(f"{where}: each spine needs {per_spine} ports > {spec.spine_ports}")

    fw_old = {f.arg for f in spec.faults if f.kind == "switch_old_firmware"}
    switches: list[Switch] = []
    for s in range(spec.spines):
        name = f"spine{s + 1:02d}"
        switches.append(Switch(name, "spine", _guid(s), s + 1, spec.spine_ports, spec.firmware))
    leaf_of: dict[tuple[str, int], Switch] = {}
    for stem, _ in leaf_groups:
        for rail in range(RAILS):
            i = len(switches)
            name = f"leaf-{stem}-rail{rail}"
            sw = Switch(name, "leaf", _guid(i), i + 1, spec.switch_ports, spec.firmware)
            switches.append(sw)
            leaf_of[(stem, rail)] = sw
    names = {s.name for s in switches}
    for arg in fw_old:
        if arg not in names:
            raise ConfigError(f"{where}: switch_old_firmware: no switch {arg!r}")
    switches = [
        Switch(s.name, s.role, s.guid, s.lid, s.ports, OLD_SWITCH_FW) if s.name in fw_old else s
        for s in switches
    ]
    by_name = {s.name: s for s in switches}
    leaf_of = {k: by_name[v.name] for k, v in leaf_of.items()}

    ports: dict[tuple[int, int], Link] = {}
    cas: list[CaPort] = []
    expected: dict[str, dict[int, tuple[str, int]]] = {}
    symbol_ports: set[tuple[int, int]] = set()
    next_lid = len(switches) + 1
    for stem, nodes in leaf_groups:
        for j, n in enumerate(nodes):
            faults = list(node_faults(n))
            devs = {d.name: d for d in node_hcas(n)}
            target = {r: (leaf_of[(stem, r)], j + 1) for r in range(RAILS)}
            expected[n.name] = {r: (sw.name, p) for r, (sw, p) in target.items()}
            for kind, a, b in faults:
                if kind == "fabric_rails_swapped":
                    target[a], target[b] = target[b], target[a]
                elif kind == "fabric_rail_wrong_leaf":
                    spare = per_leaf + spec.uplinks + j + 1
                    if spare > spec.switch_ports:
                        raise ConfigError(f"node {n.name}: no spare port for {kind}")
                    target[a] = (leaf_of[(stem, (a + 1) % RAILS)], spare)
            for rail in range(RAILS):
                lid = next_lid
                next_lid += 1
                dev = devs.get(f"mlx5_{rail}")
                guid = "0x" + (dev.guid if dev else _absent_guid(n, rail)).replace(":", "")
                desc = f"{n.name} mlx5_{rail}"
                sw, sp = target[rail]
                unplugged = any(k == "fabric_rail_unplugged" and a == rail for k, a, _ in faults)
                if dev is not None and dev.link_layer != "InfiniBand":
                    continue  # a RoCE rail: on an Ethernet fabric, not this one
                up = dev is not None and dev.state == "4: ACTIVE" and not unplugged
                if dev is None or not up:
                    ca = CaPort(
                        n.name, f"mlx5_{rail}", rail, guid, lid, Link(None), dev is not None
                    )
                    cas.append(ca)
                    continue
                width, speed = _host_link(dev.rate)
                sw_width, sw_speed = width, speed
                if any(k == "fabric_switch_port_2x" and a == rail for k, a, _ in faults):
                    sw_width = "2x"
                if any(k == "fabric_switch_port_hdr" and a == rail for k, a, _ in faults):
                    sw_speed = "HDR"
                if any(k == "fabric_symbol_errors" and a == rail for k, a, _ in faults):
                    symbol_ports.add((sw.lid, sp))
                ca_end = End("CA", lid, 1, guid, desc)
                sw_end = End("SW", sw.lid, sp, sw.guid, sw.name)
                cas.append(
                    CaPort(n.name, f"mlx5_{rail}", rail, guid, lid, Link(sw_end, width, speed))
                )
                ports[(sw.lid, sp)] = Link(ca_end, sw_width, sw_speed)

    leaf_lids = {s.name: s.lid for s in switches if s.role == "leaf"}
    down_or_starved = uplink_faults(spec, leaf_lids, per_leaf, where)
    spines = [s for s in switches if s.role == "spine"]
    leaves = [s for s in switches if s.role == "leaf"]
    used = [0] * spec.spines  # ports taken on each spine, in leaf and uplink order
    uplinks: dict[str, list[Uplink]] = {}
    for li, leaf in enumerate(leaves):
        for u in range(spec.uplinks):
            k = (li * spec.uplinks + u) % spec.spines
            spine = spines[k]
            used[k] += 1
            lp, sp = per_leaf + u + 1, used[k]
            down = ("uplink_down", leaf.lid, lp) in down_or_starved
            uplinks.setdefault(leaf.name, []).append(Uplink(lp, spine.lid, sp, not down))
            if down:
                continue
            ports[(leaf.lid, lp)] = Link(End("SW", spine.lid, sp, spine.guid, spine.name))
            ports[(spine.lid, sp)] = Link(End("SW", leaf.lid, lp, leaf.guid, leaf.name))
    starved = {(lid, p) for k, lid, p in down_or_starved if k == "uplink_xmit_wait"}

    kinds = {f.kind for f in spec.faults}
    sms = [SmRecord(spines[0].lid, spines[0].guid, 52_731, MASTER_PRIORITY, 3)]
    if len(spines) > 1:
        state = 3 if "sm_two_masters" in kinds else 2
        sms.append(SmRecord(spines[1].lid, spines[1].guid, 52_704, STANDBY_PRIORITY, state))
    elif "sm_two_masters" in kinds:
        raise ConfigError(f"{where}: sm_two_masters needs a second spine for the standby SM")
    return Fabric(
        switches=tuple(switches),
        cas=tuple(cas),
        ports=ports,
        sms=tuple(sms),
        sm_running="sm_none" not in kinds,
        expected=expected,
        by_node=_by_node(cas),
        symbol_error_ports=frozenset(symbol_ports),
        starved_ports=frozenset(starved),
        uplinks={k: tuple(v) for k, v in uplinks.items()},
    )


def _by_node(cas: list[CaPort]) -> dict[str, tuple[CaPort, ...]]:
    out: dict[str, list[CaPort]] = {}
    for c in cas:
        out.setdefault(c.node, []).append(c)
    return {k: tuple(v) for k, v in out.items()}


def _absent_guid(n: SimNode, rail: int) -> str:
    """The GUID a removed HCA had (hca_missing): the same formula as the node's sysfs."""
    from nodegate.sim.tools.hca import _guid

    return _guid(n, rail)


def _host_link(rate: str) -> tuple[str, str]:
    """'400 Gb/sec (4X NDR)' -> ('4x', 'NDR'), the host port's own view of its link."""
    inner = rate.rpartition("(")[2].rstrip(")").split()
    return inner[0].lower(), inner[1]


__all__ = [
    "BASE_FACTORS",
    "SYMBOL_ERRORS_PER_S",
    "XMIT_WAIT_STARVED_PER_S",
    "FAULTS",
    "LINK_RATES",
    "OLD_SWITCH_FW",
    "SWITCH_PSID",
    "SWITCH_FAULTS",
    "CaPort",
    "End",
    "Fabric",
    "Link",
    "PortRates",
    "SmRecord",
    "Switch",
    "Uplink",
    "build_fabric",
]
