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

from types import MappingProxyType

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
        expected = {n.name: MappingProxyType(expected_cabling(n, profs[n.name])) for n in ctx.nodes}
        self._plan = FabricPlan(
            MappingProxyType(observers), MappingProxyType(expected), MappingProxyType(why)
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


def choose_observers(
    ctx: StageContext, profs: dict[str, FabricProfile]
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Subnet -> its observers in order of preference (the profile's named nodes first, then
    nodes in inventory order), among the nodes that passed every earlier stage; subnet -> why
    it has none."""
    cleared = ctx.cleared
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
        order = [n for n in named if n in fit] + [n for n in fit if n not in named]
        if order:
            observers[subnet] = tuple(order[:count])
        else:
            why[subnet] = (
                f"no observer: none of its {len(nodes)} nodes passed the earlier stages "
                "(an observer must have passed hca)"
            )
    return observers, why


def expected_cabling(node: Node, prof: FabricProfile) -> dict[int, Expected]:
    """Where each rail of the node should land: the inventory's `data_plane.rails.N` switch
    and port, else the profile's naming rule (switch only)."""
    out: dict[int, Expected] = {}
    for r in prof.rails:
        cable = node.data_plane.cables.get(r.rail)
        named = None if prof.naming is None else prof.naming.switch_for(node.labels, r.rail)
        switch = cable.switch if cable is not None and cable.switch else named
        port = None if cable is None else cable.port
        if switch is None:
            continue
        src = (
            "profile fabric.cabling.naming"
            if cable is None or not cable.switch
            else (f"inventory data_plane.rails.{r.rail}")
        )
        out[r.rail] = Expected(switch, port, src)
    return out


STAGE = FabricStage()
