"""Facts of the `fabric` stage for one node: its rail port GUIDs and partition keys, what the
run expects of its cabling, and, on an observer, its reading of each subnet it observed.

Pure data plus the reader that fills it; only parsers parse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from nodegate.core.errors import ParseError
from nodegate.core.values import NodeOutcome
from nodegate.framework.stage import OutcomeReader
from nodegate.parsers.flint import SwitchFirmware, parse_switch_firmware_loop
from nodegate.parsers.ib_pkeys import PkeyEntry, parse_pkeys
from nodegate.parsers.ib_sysfs import IbSysfs, parse_ib_sysfs
from nodegate.parsers.ibnetdiscover import parse_ibnetdiscover_ports
from nodegate.parsers.perfquery import PerfqueryCounters, parse_perfquery
from nodegate.parsers.saquery import parse_saquery_smir
from nodegate.parsers.sminfo import SmInfo, parse_sminfo
from nodegate.stages.fabric.commands import (
    COUNTERS,
    COUNTERS_AGAIN,
    DISCOVER,
    FIRMWARE,
    GREP_OK_RCS,
    GUIDS,
    PKEYS,
    SAQUERY,
    SLEEP,
    SMINFO,
    subnet_id,
)
from nodegate.stages.fabric.profile import FabricProfile
from nodegate.stages.fabric.topology import Topology

OBSERVER_KINDS = (DISCOVER, SMINFO, SAQUERY, COUNTERS, COUNTERS_AGAIN, FIRMWARE)
T = TypeVar("T")

PortKey = tuple[int, int]  # (switch LID, port)


@dataclass(frozen=True, slots=True)
class Expected:
    """Where a rail's cable should land: switch name and port (None: not said), and what
    said so (`inventory data_plane.rails.3`, `profile fabric.cabling.naming`, a snapshot)."""

    switch: str | None
    port: int | None
    source: str

    @property
    def label(self) -> str:
        return f"{self.switch} P{self.port}" if self.port is not None else f"{self.switch}"


@dataclass(frozen=True)
class FabricPlan:
    """What the stage decided before it ran: which node observes which subnet (in the order
    their readings are preferred), what each node's rails should be cabled to, and why a
    subnet has no observer."""

    observers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # subnet -> nodes
    expected: Mapping[str, Mapping[int, Expected]] = field(default_factory=dict)  # node -> rail
    no_observer: Mapping[str, str] = field(default_factory=dict)  # subnet -> why
    # The golden snapshot's leaf uplinks: subnet -> leaf -> its port -> far end (`spine01 P3`)
    uplinks: Mapping[str, Mapping[str, Mapping[int, str]]] = field(default_factory=dict)
    snapshot: str | None = None  # its file


@dataclass(frozen=True)
class Observation:
    """One observer's reading of one subnet; a None part has its reason in `errors`."""

    subnet: str
    observer: str
    topology: Topology | None
    sminfo: SmInfo | None
    sms: tuple[SmInfo, ...] | None
    counters: Mapping[PortKey, Mapping[str, int]] | None
    counters_again: Mapping[PortKey, Mapping[str, int]] | None
    firmware: Mapping[int, SwitchFirmware] | None = None  # switch LID -> its firmware
    errors: Mapping[str, str] = field(default_factory=dict)  # command kind -> reason
    evidence: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kind -> refs
    # The fabric was discovered, yet sminfo and saquery both failed as infiniband-diags fail
    # when no SM answers (exit 255): the subnet has no SM, not a broken observer.
    sm_silent: bool = False
    # Seconds between a switch's two counter reads: the window's sleep plus one read loop
    # (each switch is read at the same offset in both loops); None: not measured.
    elapsed_s: float | None = None

    def usable(self) -> bool:
        """Its topology was read: the per-node checks can use it."""
        return self.topology is not None


@dataclass(frozen=True)
class FabricFacts:
    node: str
    guids: Mapping[str, str] | None  # rail device -> port GUID ("0x" + 16 hex)
    pkeys: tuple[PkeyEntry, ...] | None
    expected: Mapping[int, Expected]  # rail -> where its cable should land
    plan: FabricPlan
    observations: Mapping[str, Observation] = field(default_factory=dict)  # subnet -> reading
    errors: Mapping[str, str] = field(default_factory=dict)
    evidence: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def ev(self, *cmd_ids: str) -> tuple[str, ...]:
        return tuple(e for c in cmd_ids for e in self.evidence.get(c, ()))


def _listing(f: OutcomeReader, cmd_id: str) -> str | None:
    """A grep listing's text: rc 1 and 2 still carry lines (a glob without a match)."""
    r = f.result(cmd_id)
    if r is not None and not r.timed_out and not r.truncated and r.rc in GREP_OK_RCS:
        if not r.stdout.strip():
            f.errors[cmd_id] = f"`{r.cmd}` printed nothing (no RDMA device?), rc {r.rc}"
            return None
        return r.stdout
    f.parse(cmd_id, str)  # records the reason
    return None


def _guids(sysfs: IbSysfs) -> dict[str, str]:
    return {d.name: "0x" + d.node_guid for d in sysfs.devices if d.node_guid is not None}


def _counters(parsed: PerfqueryCounters) -> Mapping[PortKey, Mapping[str, int]]:
    return MappingProxyType(
        {(p.lid, p.port): p.counters for p in parsed.ports if p.lid is not None}
    )


def _observe(f: OutcomeReader, subnet: str, node: str) -> Observation:
    cid = {k: subnet_id(k, subnet) for k in OBSERVER_KINDS}
    ports = f.parse(cid[DISCOVER], parse_ibnetdiscover_ports)
    first = f.parse(cid[COUNTERS], parse_perfquery)
    again = f.parse(cid[COUNTERS_AGAIN], parse_perfquery)
    fw = f.parse(cid[FIRMWARE], parse_switch_firmware_loop)
    return Observation(
        subnet=subnet,
        observer=node,
        topology=None if ports is None else Topology.of(ports),
        sminfo=f.parse(cid[SMINFO], parse_sminfo),
        sms=f.parse(cid[SAQUERY], parse_saquery_smir),
        counters=None if first is None else _counters(first),
        counters_again=None if again is None else _counters(again),
        firmware=None if fw is None else MappingProxyType({x.lid: x for x in fw}),
        errors={k: f.errors[c] for k, c in cid.items() if c in f.errors},
        evidence={k: f.evidence(c) for k, c in cid.items()},
        sm_silent=ports is not None and _no_sm(f, cid[SMINFO], cid[SAQUERY]),
        elapsed_s=_elapsed(f, cid[COUNTERS]),
    )


def _elapsed(f: OutcomeReader, first_read: str) -> float | None:
    sleep, read = f.result(SLEEP), f.result(first_read)
    if sleep is None or read is None or sleep.duration_s is None or read.duration_s is None:
        return None
    return sleep.duration_s + read.duration_s


def _no_sm(f: OutcomeReader, sminfo: str, saquery: str) -> bool:
    """No SM answers: sminfo fails as infiniband-diags fail (IBEXIT, exit 255) and saquery SMIR
    gets no SA (exit 255, or the query's errno: 110 ETIMEDOUT) while the fabric was
    discovered; a tool missing (126, 127) or cut at its deadline is not that."""
    a, b = f.result(sminfo), f.result(saquery)
    if a is None or b is None or a.timed_out or b.timed_out or a.truncated or b.truncated:
        return False
    return a.rc == 255 and b.rc not in (None, 0, 126, 127)


def build_facts(
    out: NodeOutcome, profile: FabricProfile, plan: FabricPlan | None = None
) -> FabricFacts:
    """Parse one node's session into FabricFacts (failures recorded, never raised)."""
    plan = plan or FabricPlan()
    f = OutcomeReader("fabric", out)
    text = _listing(f, GUIDS)
    sysfs = None if text is None else _parse_part(f, GUIDS, text, parse_ib_sysfs)
    ptext = _listing(f, PKEYS)
    pkeys = None if ptext is None else _parse_part(f, PKEYS, ptext, parse_pkeys)
    observed = {
        s.name: _observe(f, s.name, out.node)
        for s in profile.subnets
        if out.node in plan.observers.get(s.name, ())
    }
    return FabricFacts(
        node=out.node,
        guids=None if sysfs is None else MappingProxyType(_guids(sysfs)),
        pkeys=pkeys,
        expected=plan.expected.get(out.node, MappingProxyType({})),
        plan=plan,
        observations=MappingProxyType(observed),
        errors=dict(f.errors),
        evidence={c: f.evidence(c) for c in out.results},
    )


def _parse_part(f: OutcomeReader, cmd_id: str, text: str, parser: Callable[[str], T]) -> T | None:
    try:
        return parser(text)
    except ParseError as exc:
        f.errors[cmd_id] = f"unrecognized output of `{cmd_id}`: {exc.reason}"
        return None
