"""Stage `fabric`: the InfiniBand fabric as the nodes see it, from one observer node per subnet.

Every node reads its rail port GUIDs and partition keys (sysfs); the observers of a subnet
(`fabric.observers.per_subnet` of the nodes that passed the earlier stages, the profile's
named ones first) also run ibnetdiscover, sminfo, saquery SMIR and a switch counter read
before and after the profile's window, from their port on that subnet. All observers of a
subnet read it at once: when one is lost mid-stage the next one's reading is used, and when
none has one every node of the subnet is ERROR for what needed it (never a pass, and never a
FAIL of a healthy node). A profile with `fabric: null` (VMs on a provider-managed fabric,
RoCE) runs nothing: its nodes pass every check as not applicable.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from nodegate.core.values import CommandSpec, NodeOutcome
from nodegate.framework.stage import PassiveStage, StageContext
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.fabric.checks import CHECKS
from nodegate.stages.fabric.commands import (
    COUNTERS,
    COUNTERS_AGAIN,
    DISCOVER,
    FIRMWARE,
    GUIDS,
    GUIDS_ARGV,
    NODE_TIMEOUT_S,
    PKEYS,
    PKEYS_ARGV,
    SAQUERY,
    SLEEP,
    SMINFO,
    counters_argv,
    discover_argv,
    firmware_argv,
    observer_port,
    saquery_argv,
    sminfo_argv,
    subnet_id,
)
from nodegate.stages.fabric.facts import Expected, FabricFacts, FabricPlan, build_facts
from nodegate.stages.fabric.profile import FabricProfile, Subnet, fabric_profile
from nodegate.stages.fabric.snapshot import load_snapshot


class FabricStage(PassiveStage[FabricFacts, FabricProfile]):
    name = "fabric"
    checks = CHECKS
    # `fabric: null`: the nodes cannot query the fabric (no subnet-management access).
    not_applicable = "subnet-management access to the InfiniBand fabric"

    def __init__(self) -> None:
        self._plan = FabricPlan()  # this run's observers and expected cabling (`plan`)

    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]:
        """What every node runs: its port GUIDs and partition keys."""
        return [
            CommandSpec(GUIDS, GUIDS_ARGV, NODE_TIMEOUT_S),
            CommandSpec(PKEYS, PKEYS_ARGV, NODE_TIMEOUT_S),
        ]

    def observer_commands(self, prof: FabricProfile, subnets: list[Subnet]) -> list[CommandSpec]:
        """What an observer adds for the subnets it observes."""
        t, q = prof.discover_timeout_s, prof.query_timeout_s
        out: list[CommandSpec] = []
        for s in subnets:
            ca, port = observer_port(prof, s)
            out += [
                CommandSpec(subnet_id(DISCOVER, s.name), discover_argv(ca, port), t),
                CommandSpec(subnet_id(SMINFO, s.name), sminfo_argv(ca, port), q),
                CommandSpec(subnet_id(SAQUERY, s.name), saquery_argv(ca, port), q),
                CommandSpec(subnet_id(COUNTERS, s.name), counters_argv(ca, port), t + q),
                CommandSpec(subnet_id(FIRMWARE, s.name), firmware_argv(ca, port), t + q),
            ]
        window = prof.counters.window_s
        out.append(CommandSpec(SLEEP, ("sleep", f"{window:g}"), window + NODE_TIMEOUT_S))
        for s in subnets:
            ca, port = observer_port(prof, s)
            out.append(
                CommandSpec(subnet_id(COUNTERS_AGAIN, s.name), counters_argv(ca, port), t + q)
            )
        return out

    def plan(self, ctx: StageContext) -> dict[str, list[CommandSpec]]:
        profs = {n.name: fabric_profile(ctx.profiles[n.name]) for n in ctx.nodes}
        observers, why = choose_observers(ctx, profs)
        path = ctx.options.fabric_snapshot
        snap = None if path is None else load_snapshot(path)
        expected = {
            n.name: MappingProxyType(expected_cabling(n, profs[n.name], snap, path))
            for n in ctx.nodes
        }
        self._plan = FabricPlan(
            MappingProxyType(observers),
            MappingProxyType(expected),
            MappingProxyType(why),
            uplinks=snapshot_uplinks(snap),
            snapshot=path,
        )
        out = {}
        for n in ctx.nodes:
            prof = profs[n.name]
            mine = [s for s in prof.subnets if n.name in observers.get(s.name, ())]
            out[n.name] = self.commands(n, ctx.profiles[n.name])
            if mine:
                out[n.name] += self.observer_commands(prof, mine)
        return out

    def profile_of(self, profile: Profile) -> FabricProfile:
        return fabric_profile(profile)

    def facts(self, outcome: NodeOutcome, profile: FabricProfile) -> FabricFacts:
        return build_facts(outcome, profile, self._plan)


OBSERVER_LABEL = "fabric_observer"  # an inventory label naming a preferred observer
YES = ("yes", "true", "1")


def choose_observers(
    ctx: StageContext, profs: dict[str, FabricProfile]
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Subnet -> its observers in order of preference (nodes the inventory labels
    `fabric_observer: "yes"`, then the profile's named nodes, then nodes in inventory order),
    among the nodes that passed every earlier stage; subnet -> why it has none."""
    cleared = ctx.cleared
    labels = {n.name: n.labels for n in ctx.nodes}
    members: dict[str, list[str]] = {}
    wanted: dict[str, tuple[int, tuple[str, ...]]] = {}
    for n in ctx.nodes:
        prof = profs[n.name]
        for s in prof.subnets:
            members.setdefault(s.name, []).append(n.name)
            wanted.setdefault(s.name, (prof.observers_per_subnet, prof.observer_nodes))
    observers: dict[str, tuple[str, ...]] = {}
    why: dict[str, str] = {}
    for subnet, nodes in members.items():
        count, named = wanted[subnet]
        fit = [n for n in nodes if cleared is None or n in cleared]
        # The inventory's own choice (label `fabric_observer: "yes"`), then the profile's.
        labelled = [n for n in fit if labels.get(n, {}).get(OBSERVER_LABEL) in YES]
        first = labelled + [n for n in named if n in fit and n not in labelled]
        order = first + [n for n in fit if n not in first]
        if order:
            observers[subnet] = tuple(order[:count])
        else:
            why[subnet] = (
                f"no observer: none of its {len(nodes)} nodes passed the earlier stages "
                "(an observer must have passed hca)"
            )
    return observers, why


def expected_cabling(
    node: Node, prof: FabricProfile, snap: Mapping[str, Any] | None = None, path: str | None = None
) -> dict[int, Expected]:
    """Where each rail of the node should land: the inventory's `data_plane.rails.N` switch
    and port, else the golden snapshot's, else the profile's naming rule (switch only)."""
    out: dict[int, Expected] = {}
    for r in prof.rails:
        cable = node.data_plane.cables.get(r.rail)
        if cable is not None and cable.switch:
            out[r.rail] = Expected(cable.switch, cable.port, f"inventory data_plane.rails.{r.rail}")
            continue
        taken = _from_snapshot(snap, prof, node.name, r.device)
        if taken is not None:
            out[r.rail] = Expected(taken[0], taken[1], f"snapshot {path}")
            continue
        named = None if prof.naming is None else prof.naming.switch_for(node.labels, r.rail)
        if named is not None:
            port = None if cable is None else cable.port
            out[r.rail] = Expected(named, port, "profile fabric.cabling.naming")
    return out


def _from_snapshot(
    snap: Mapping[str, Any] | None, prof: FabricProfile, node: str, device: str
) -> tuple[str, int] | None:
    if snap is None:
        return None
    for s in prof.subnets:
        got = snap["subnets"].get(s.name, {}).get("nodes", {}).get(node, {}).get(device)
        if got is not None:
            return str(got["switch"]), int(got["port"])
    return None


def snapshot_uplinks(
    snap: Mapping[str, Any] | None,
) -> Mapping[str, Mapping[str, Mapping[int, str]]]:
    """subnet -> leaf -> port -> far end, from the golden snapshot (empty without one)."""
    if snap is None:
        return MappingProxyType({})
    return MappingProxyType(
        {
            subnet: {
                leaf: {int(p): far for p, far in ports.items()}
                for leaf, ports in doc["uplinks"].items()
            }
            for subnet, doc in snap["subnets"].items()
        }
    )


STAGE = FabricStage()
