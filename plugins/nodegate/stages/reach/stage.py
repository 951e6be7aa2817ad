"""The `reach` stage: four reads per node in one session, judged by the reach check table."""

from __future__ import annotations

from nodegate.core.values import CommandSpec, NodeOutcome, Verdict
from nodegate.framework.stage import PassiveStage, unreachable_verdicts
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.reach.checks import CHECKS
from nodegate.stages.reach.commands import COMMANDS, commands
from nodegate.stages.reach.facts import ReachFacts, build_facts
from nodegate.stages.reach.profile import ReachProfile, reach_profile


class ReachStage(PassiveStage[ReachFacts, ReachProfile]):
    name = "reach"
    checks = CHECKS

    def commands(self, node: Node, profile: Profile | None) -> list[CommandSpec]:
        # Without a profile (a bench timing the bare script): the default deadline.
        if profile is None:
            return list(COMMANDS)
        return list(commands(reach_profile(profile).command_timeout_s))

    def profile_of(self, profile: Profile) -> ReachProfile:
        return reach_profile(profile)

    def facts(self, outcome: NodeOutcome, profile: ReachProfile) -> ReachFacts:
        return build_facts(outcome, commands_total=len(COMMANDS))

    def unreachable(self, outcome: NodeOutcome) -> list[Verdict]:
        """An unreachable node fails reach.ssh itself; the other reach checks are ERROR."""
        return unreachable_verdicts(self, outcome, first_check_fails=True)


STAGE = ReachStage()
