"""Facts of the `roce` stage for one node, read from its session through nodegate.parsers.

Pure data plus the reader that fills it (`build_facts(outcome, profile)`); a fact that could not be
read is None with its reason in `errors[command id]`, which checks turn into ERROR verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial

from nodegate.core.errors import ParseError
from nodegate.core.values import NodeOutcome, Reach
from nodegate.framework.stage import OutcomeReader
from nodegate.parsers.ethtool import EthtoolSettings, parse_ethtool, parse_ethtool_stats
from nodegate.parsers.file_values import parse_file_values
from nodegate.parsers.ibv_devinfo import IbvPort, parse_ibv_devinfo
from nodegate.parsers.iproute_json import (
    IpLink,
    IpRoute,
    IpRule,
    parse_ip_addr,
    parse_ip_routes,
    parse_ip_rules,
)
from nodegate.parsers.mlnx_qos import MlnxQos, parse_mlnx_qos
from nodegate.parsers.rdma_stat import parse_rdma_statistic
from nodegate.parsers.rdma_tool import RdmaLinkReport, parse_rdma_link
from nodegate.parsers.show_gids import GidTable, parse_show_gids
from nodegate.stages.roce.commands import (
    FILES,
    GIDS,
    GREP_OK_RCS,
    IP_ADDR,
    IP_ROUTE,
    IP_RULE,
    PORT,
    RDMA_LINK,
    RDMA_STAT,
    RDMA_STAT_AGAIN,
    rail_id,
)
from nodegate.stages.roce.profile import RoceProfile, RoceRail

Counters = Mapping[str, int]


@dataclass(frozen=True)
class RailFacts:
    """One rail's own commands: link settings, QoS, RDMA port, counters at both reads."""

    ethtool: EthtoolSettings | None
    qos: MlnxQos | None
    port: IbvPort | None
    counters: tuple[Counters | None, Counters | None]  # ethtool -S and rdma statistic merged


@dataclass(frozen=True)
class RoceFacts:
    node: str
    rdma_links: RdmaLinkReport | None
    links: tuple[IpLink, ...] | None
    routes: tuple[IpRoute, ...] | None
    rules: tuple[IpRule, ...] | None
    gids: GidTable | None
    files: Mapping[str, str] | None
    rails: Mapping[int, RailFacts]
    errors: Mapping[str, str] = field(default_factory=dict)
    evidence: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def ev(self, *cmd_ids: str) -> tuple[str, ...]:
        return tuple(e for c in cmd_ids for e in self.evidence.get(c, ()))

    def why(self, *cmd_ids: str) -> str:
        """The reason the first of `cmd_ids` that failed gives (for an ERROR verdict)."""
        return next((self.errors[c] for c in cmd_ids if c in self.errors), "no output")

    def link(self, netdev: str) -> IpLink | None:
        return next((lk for lk in self.links or () if lk.ifname == netdev), None)


def _device_port(rail: RoceRail, text: str) -> IbvPort:
    """Port 1 of the rail's device in `ibv_devinfo -d <dev>` output."""
    report = parse_ibv_devinfo(text)
    dev = next((d for d in report.devices if d.hca_id == rail.device), None)
    port = None if dev is None else next((p for p in dev.ports if p.port == PORT), None)
    if port is None:
        raise ParseError("ibv_devinfo", f"no port {PORT} of {rail.device} in the output")
    return port


def _counters(f: OutcomeReader, rail: RoceRail, stats_id: str, rdma_id: str) -> Counters | None:
    """ethtool -S of the rail's netdev plus `rdma statistic` of its port (names do not meet)."""
    stats = f.parse(stats_id, parse_ethtool_stats)
    rdma = f.parse(rdma_id, parse_rdma_statistic)
    if stats is None or rdma is None:
        return None
    port = rdma.get((rail.device, PORT))
    if port is None:
        f.errors[rdma_id + ":" + rail.device] = f"`rdma statistic` printed no {rail.device}/{PORT}"
        return None
    return {**port, **stats}


def _files(f: OutcomeReader) -> Mapping[str, str] | None:
    """grep -H over the kernel files: rc 1/2 still carry the lines of the files it read."""
    r = f.result(FILES)
    if r is not None and not r.timed_out and not r.truncated and r.rc in GREP_OK_RCS:
        only = NodeOutcome(f.outcome.node, Reach.OK, {FILES: replace(r, rc=0)})
        probe = OutcomeReader(f.stage, only)
        got = probe.parse(FILES, parse_file_values)
        f.errors.update(probe.errors)
        return got
    return f.parse(FILES, parse_file_values)  # records why it is unusable


def build_facts(out: NodeOutcome, prof: RoceProfile) -> RoceFacts:
    """Parse one node's session into RoceFacts (failures recorded, never raised)."""
    f = OutcomeReader("roce", out)
    rails = {}
    for r in prof.rails:
        first = _counters(f, r, rail_id("stats", r), RDMA_STAT)
        again = _counters(f, r, rail_id("stats_again", r), RDMA_STAT_AGAIN)
        rails[r.rail] = RailFacts(
            ethtool=f.parse(rail_id("ethtool", r), parse_ethtool),
            qos=f.parse(rail_id("mlnx_qos", r), parse_mlnx_qos),
            port=f.parse(rail_id("devinfo", r), partial(_device_port, r)),
            counters=(first, again),
        )
    return RoceFacts(
        node=out.node,
        rdma_links=f.parse(RDMA_LINK, parse_rdma_link),
        links=f.parse(IP_ADDR, parse_ip_addr),
        routes=f.parse(IP_ROUTE, parse_ip_routes),
        rules=f.parse(IP_RULE, parse_ip_rules),
        gids=f.parse(GIDS, parse_show_gids),
        files=_files(f),
        rails=rails,
        errors=dict(f.errors),
        evidence={c: f.evidence(c) for c in out.results},
    )
