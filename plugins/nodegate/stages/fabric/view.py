"""Which reading of a subnet the checks use: the first observer (in the plan's order) whose
reading of that part is usable; when none is, why, for every node of the subnet (ERROR: a
fabric nobody could read is never a pass).

A node's rails are tied to the fabric by their port GUIDs (`FabricFacts.guids`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from nodegate.stages.fabric.commands import DISCOVER
from nodegate.stages.fabric.facts import FabricFacts, FabricPlan, Observation
from nodegate.stages.fabric.profile import FabricProfile, Subnet
from nodegate.stages.hca.profile import Rail

T = TypeVar("T")


@dataclass(frozen=True)
class Reading:
    """A part of one subnet's reading (`value`), who read it and the evidence; or why not."""

    value: object
    observation: Observation | None
    why: str

    @cached_property
    def evidence(self) -> tuple[str, ...]:
        o = self.observation
        return () if o is None else tuple(e for refs in o.evidence.values() for e in refs)


def plan_of(facts: Mapping[str, FabricFacts]) -> FabricPlan:
    """The run's plan (every node's facts carry the same one)."""
    for f in facts.values():
        return f.plan
    return FabricPlan()


def reading(
    facts: Mapping[str, FabricFacts],
    subnet: str,
    part: Callable[[Observation], T | None],
    kinds: tuple[str, ...] = (DISCOVER,),
) -> Reading:
    """The first usable `part` of the subnet's observers' readings, in the plan's order."""
    plan = plan_of(facts)
    observers = plan.observers.get(subnet, ())
    if not observers:
        why = plan.no_observer.get(subnet, "no observer was planned")
        return Reading(None, None, f"subnet {subnet}: {why}")
    reasons: list[str] = []
    for node in observers:
        f = facts.get(node)
        obs = None if f is None else f.observations.get(subnet)
        if obs is None:
            reasons.append(f"{node}: lost (its session did not complete)")
            continue
        value = part(obs)
        if value is not None:
            return Reading(value, obs, "")
        said = [obs.errors[k] for k in kinds if k in obs.errors]
        reasons.append(f"{node}: {'; '.join(said) or 'no reading'}")
    return Reading(None, None, f"subnet {subnet} not read by any observer ({' | '.join(reasons)})")


def rails_on(prof: FabricProfile, subnet: Subnet) -> tuple[Rail, ...]:
    return tuple(r for r in prof.rails if r.rail in subnet.rails)


def rail_label(rail: Rail) -> str:
    """`mlx5_3 (rail 3)`."""
    return f"{rail.device} (rail {rail.rail})"
