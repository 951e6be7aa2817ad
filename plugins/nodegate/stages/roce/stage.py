"""Stage `roce`: RoCE L2/L3/L4 configuration of each RoCE rail and its congestion counters.

One round trip per node: `rdma link`, `ip -j addr/route/rule`, `show_gids`, the kernel files
(ECN, CNP, rdma_cm configfs, ARP/rp_filter sysctls), per rail `ethtool`, `mlnx_qos -i` and
`ibv_devinfo -d`; then the counters (`ethtool -S` per rail, `rdma statistic show`), a sleep of
the profile's window on the node, and the counters again. A profile with `roce: null` has no
RoCE rails: its nodes pass every check with that note and run nothing.
"""

from __future__ import annotations

from nodegate.core.values import CommandSpec, NodeOutcome
from nodegate.framework.stage import PassiveStage
from nodegate.inventory import Node
from nodegate.profiles import Profile
from nodegate.stages.roce.checks import CHECKS
from nodegate.stages.roce.commands import (
    CMD_TIMEOUT_S,
    FILES,
    GIDS,
    IP_ADDR,
    IP_ROUTE,
    IP_RULE,
    RDMA_LINK,
    RDMA_STAT,
    RDMA_STAT_AGAIN,
    SLEEP,
    kernel_files,
    rail_id,
)
from nodegate.stages.roce.facts import RoceFacts, build_facts
from nodegate.stages.roce.profile import RoceProfile, roce_profile


class RoceStage(PassiveStage[RoceFacts, RoceProfile]):
    name = "roce"
    checks = CHECKS
    not_applicable = "RoCE rails"  # `roce: null`: an InfiniBand SKU, every check PASS

    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]:
        t = CMD_TIMEOUT_S
        prof = self.profile_of(profile)
        window = prof.counters.window_s
        out = [
            CommandSpec(RDMA_LINK, ("rdma", "link", "show"), t),
            CommandSpec(IP_ADDR, ("ip", "-j", "addr", "show"), t),
            CommandSpec(IP_ROUTE, ("ip", "-j", "route", "show", "table", "all"), t),
            CommandSpec(IP_RULE, ("ip", "-j", "rule", "show"), t),
            CommandSpec(GIDS, ("show_gids",), t),
            CommandSpec(FILES, ("grep", "-H", ".", *kernel_files(prof)), t),
        ]
        for r in prof.rails:
            out += [
                CommandSpec(rail_id("ethtool", r), ("ethtool", r.netdev), t),
                CommandSpec(rail_id("mlnx_qos", r), ("mlnx_qos", "-i", r.netdev), t),
                CommandSpec(rail_id("devinfo", r), ("ibv_devinfo", "-d", r.device), t),
            ]
        out += [
            CommandSpec(rail_id("stats", r), ("ethtool", "-S", r.netdev), t) for r in prof.rails
        ]
        out += [
            CommandSpec(RDMA_STAT, ("rdma", "statistic", "show"), t),
            CommandSpec(SLEEP, ("sleep", f"{window:g}"), window + t),
        ]
        out += [
            CommandSpec(rail_id("stats_again", r), ("ethtool", "-S", r.netdev), t)
            for r in prof.rails
        ]
        return out + [CommandSpec(RDMA_STAT_AGAIN, ("rdma", "statistic", "show"), t)]

    def profile_of(self, profile: Profile) -> RoceProfile:
        return roce_profile(profile)

    def facts(self, outcome: NodeOutcome, profile: RoceProfile) -> RoceFacts:
        return build_facts(outcome, profile)


STAGE = RoceStage()
