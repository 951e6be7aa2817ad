"""Bounds on what one run may do to the fleet: the blast-radius limit of actions (`max_drain`)
and systemic errors.

- **max_drain**: `--act` takes at most this many nodes out of service in one run; past it,
  none (the actions refuse, exit 8). From `--max-drain` (or its ini twin), else the
  inventory's `settings.max_drain`, else the strictest of the run's profiles
  (`admission.guard.max_drain`), else 10 % or 8 nodes, whichever is larger. admission.json
  carries the bound (`guard`), so that every action, a site's too, reads the same one.
- **systemic**: a check that is an ERROR on more than `error_share` of the nodes of a
  profile that ran it (a verdict other than skip), and on at least `min_nodes` of them, is a
  tool, launcher or controller problem, not the nodes' (nodes whose session failed are left
  out): those errors become `systemic` reasons, and a node with nothing else against it
  (only the skips that followed them) is `not_qualified`: not admitted, not drained. FAILs
  are never systemic by count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodegate.admission.gate import SYSTEMIC, NodeDecision
from nodegate.core.drainlimit import DEFAULT, DrainLimit
from nodegate.core.results import RunResult
from nodegate.core.values import Status
from nodegate.profiles import Profile


def _guard_section(profile: Profile) -> Mapping[str, Any]:
    adm = profile.data.get("admission")
    guard = adm.get("guard") if isinstance(adm, Mapping) else None
    return guard if isinstance(guard, Mapping) else {}


def drain_bound(
    given: DrainLimit | None,
    inventory: DrainLimit | None,
    profiles: Mapping[str, Profile],
    fleet: int,
) -> dict[str, Any]:
    """admission.json's `guard`: the run's max_drain, its rule and where it came from."""
    if given is not None:
        limit, source = given, "--max-drain"
    elif inventory is not None:
        limit, source = inventory, "inventory settings.max_drain"
    else:
        by_profile = {
            p.name: DrainLimit.of_data(_guard_section(p)["max_drain"])
            for p in profiles.values()
            if "max_drain" in _guard_section(p)
        }
        if by_profile:  # several profiles in one run: the strictest bounds the run
            name = min(by_profile, key=lambda n: (by_profile[n].of(fleet), n))
            limit, source = by_profile[name], f"profile {name} admission.guard.max_drain"
        else:
            limit, source = DEFAULT, "default"
    return {"max_drain": limit.of(fleet), "rule": limit.describe(), "from": source, "nodes": fleet}


@dataclass(frozen=True, slots=True)
class SystemicRule:
    error_share: float
    min_nodes: int

    @classmethod
    def of(cls, profile: Profile) -> SystemicRule | None:
        rule = _guard_section(profile).get("systemic")
        if not isinstance(rule, Mapping):
            return None
        return cls(float(rule["error_share"]), int(rule["min_nodes"]))


@dataclass(frozen=True, slots=True)
class Systemic:
    """A check ERROR on too many of one profile's nodes to be theirs."""

    check: str
    profile: str
    nodes: tuple[str, ...]  # the nodes it errored on
    judged: int  # the nodes that ran it (a verdict other than skip)
    rule: SystemicRule
    message: str  # the first erroring node's message

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "profile": self.profile,
            "nodes": list(self.nodes),
            "errors": len(self.nodes),
            "judged": self.judged,
            "error_share": self.rule.error_share,
            "min_nodes": self.rule.min_nodes,
            "message": self.message,
        }


def find_systemic(
    decisions: Mapping[str, NodeDecision],
    result: RunResult,
    profiles: Mapping[str, Profile],
    session_check: str,
) -> list[Systemic]:
    """The systemic checks of this run, per profile, by the profile's `admission.guard.systemic`.
    Only ERRORs that block admission count (a waived one does not), on nodes whose session
    ran (`session_check`, reach.ssh, passed: an unreachable node's other checks are ERRORs
    that repeat its own session FAIL)."""
    cut = {
        node
        for (check, node), vs in result.verdicts.items()
        if check == session_check and any(v.status is not Status.PASS for v in vs)
    }
    judged: dict[tuple[str, str], set[str]] = {}
    for (check, node), vs in result.verdicts.items():
        prof = profiles.get(node)
        if node in cut:
            continue
        if prof is not None and any(v.status is not Status.SKIP for v in vs):
            judged.setdefault((prof.name, check), set()).add(node)
    erring: dict[tuple[str, str], list[str]] = {}
    first: dict[tuple[str, str], str] = {}
    for node, d in decisions.items():
        prof = profiles.get(node)
        if prof is None or node in cut:
            continue
        for r in d.reasons:
            if r.status == Status.ERROR.value:
                key = (prof.name, r.check)
                if node not in erring.setdefault(key, []):
                    erring[key].append(node)
                first.setdefault(key, r.message)
    rules = {p.name: SystemicRule.of(p) for p in profiles.values()}
    found = []
    for (pname, check), nodes in sorted(erring.items()):
        rule = rules.get(pname)
        total = len(judged.get((pname, check), ()))
        if rule is None or total == 0:
            continue
        if len(nodes) >= rule.min_nodes and len(nodes) > rule.error_share * total:
            found.append(Systemic(check, pname, tuple(nodes), total, rule, first[(pname, check)]))
    return found


def mark_systemic(decisions: Mapping[str, NodeDecision], found: list[Systemic]) -> None:
    """Each systemic check's ERRORs become `systemic` reasons of their nodes."""
    for s in found:
        for node in s.nodes:
            d = decisions[node]
            d.reasons = [
                dataclasses.replace(r, status=SYSTEMIC)
                if r.check == s.check and r.status == Status.ERROR.value
                else r
                for r in d.reasons
            ]
