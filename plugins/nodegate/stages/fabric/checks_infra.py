"""The fabric's own parts, judged once per subnet: its subnet manager and each leaf's uplinks
to the spines (present, at the profile's width and speed, error counters and XmitWait on
both ends). A fault here is the infrastructure's, not a node's: the nodes behind it PASS,
marked with it (`core.verdicts.marked`), and it goes onto the repair list; a subnet nobody
could read is an ERROR for its nodes (fail closed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged, marked
from nodegate.parsers.flint import SwitchFirmware
from nodegate.parsers.sminfo import SmInfo
from nodegate.stages.fabric.checks_node import (
    XMIT_WAIT,
    Facts,
    Profiles,
    _deltas,
    _topology,
    seconds,
)
from nodegate.stages.fabric.commands import FIRMWARE, SAQUERY
from nodegate.stages.fabric.facts import FabricFacts, Observation
from nodegate.stages.fabric.profile import FabricProfile, Subnet
from nodegate.stages.fabric.topology import Switch, Topology, Uplink
from nodegate.stages.fabric.view import Reading, plan_of, rails_on, reading


@dataclass(frozen=True, slots=True)
class Finding:
    """One infrastructure fault: the part (a switch, a port, a cable by both ends)."""

    component: str
    observed: object
    expected: object
    message: str
    remediation: str
    unit: str | None = None


def _subnet_nodes(facts: Facts, profiles: Profiles, subnet: str) -> list[str]:
    return [n for n in facts if any(s.name == subnet for s in profiles[n].subnets)]


def _subnets(profiles: Profiles) -> dict[str, Subnet]:
    out: dict[str, Subnet] = {}
    for p in profiles.values():
        for s in p.subnets:
            out.setdefault(s.name, s)
    return out


def _sms(o: Observation) -> tuple[SmInfo, ...] | None:
    """Every SM's record; none when the fabric answers but no SM does (`sm_silent`)."""
    return o.sms if o.sms is not None else (() if o.sm_silent else None)


def subnet_manager(c: AnyCheck, facts: Facts, profiles: Profiles) -> list[Verdict]:
    """fabric.sm: exactly one MASTER SM on each subnet (saquery SMIR: every SM), at the
    profile's priority, on the profile's GUID where it names one; the SM the observer's port
    follows (sminfo) is that master."""
    out: list[Verdict] = []
    for name, subnet in sorted(_subnets(profiles).items()):
        got = reading(facts, name, _sms, (SAQUERY,))
        nodes = _subnet_nodes(facts, profiles, name)
        if not isinstance(got.value, tuple):
            out += [error(c, n, f"subnet {name} SM", got.why, evidence=got.evidence) for n in nodes]
            continue
        found = _sm_findings(subnet, got)
        comp = f"subnet {name} SM"
        for n in nodes:
            if not found:
                m = next(s for s in got.value if s.state == "MASTER")
                seen = f"MASTER {m.guid} (lid {m.lid}) priority {m.priority}"
                out.append(judged(c, n, True, comp, seen, _sm_want(subnet), evidence=got.evidence))
            for fd in found:
                out.append(_mark(c, n, fd, got))
    return out


def _sm_want(subnet: Subnet) -> str:
    on = f" on {subnet.sm.guid}" if subnet.sm.guid else ""
    return f"one MASTER, priority {subnet.sm.priority.expected()}{on}"


def _sm_findings(subnet: Subnet, got: Reading) -> list[Finding]:
    sms: tuple[SmInfo, ...] = got.value  # type: ignore[assignment]
    want = _sm_want(subnet)
    masters = [s for s in sms if s.state == "MASTER"]
    comp = f"subnet {subnet.name} SM"
    if not masters:
        seen = ", ".join(f"{s.guid} {s.state}" for s in sms) or (
            "sminfo and saquery SMIR get no answer from an SM"
        )
        return [
            Finding(
                comp,
                "no MASTER",
                want,
                f"subnet {subnet.name} has no MASTER SM ({seen})",
                f"start the subnet manager of subnet {subnet.name} (opensm/UFM) and "
                "check why no SM became master",
            )
        ]
    if len(masters) > 1:
        seen = ", ".join(f"{s.guid} (lid {s.lid})" for s in masters)
        return [
            Finding(
                comp,
                f"{len(masters)} MASTERs: {seen}",
                want,
                f"subnet {subnet.name} has {len(masters)} MASTER SMs: {seen}",
                f"stop all but one subnet manager on subnet {subnet.name} (the others "
                "must be STANDBY); check the SM priorities and the fabric split",
            )
        ]
    m = masters[0]
    out: list[Finding] = []
    where = f"SM {m.guid} (lid {m.lid})"
    if not subnet.sm.priority.holds(m.priority):
        out.append(
            Finding(
                where,
                f"priority {m.priority}",
                want,
                f"the MASTER SM of subnet {subnet.name} runs at priority {m.priority}",
                f"set the intended SM's priority ({subnet.sm.priority.expected()}) "
                "so that it, not a fallback, is master",
            )
        )
    if subnet.sm.guid is not None and m.guid != subnet.sm.guid:
        out.append(
            Finding(
                where,
                m.guid,
                subnet.sm.guid,
                f"the MASTER SM of subnet {subnet.name} is {m.guid}, not {subnet.sm.guid}",
                f"make {subnet.sm.guid} the master SM of subnet {subnet.name}",
            )
        )
    return out


def _mark(c: AnyCheck, node: str, fd: Finding, got: Reading) -> Verdict:
    return marked(
        c,
        node,
        fd.component,
        fd.observed,
        fd.expected,
        f"infrastructure: {fd.message}",
        remediation=fd.remediation,
        unit=fd.unit,
        evidence=got.evidence,
    )


def uplinks(c: AnyCheck, facts: Facts, profiles: Profiles) -> list[Verdict]:
    """fabric.uplinks: each leaf a node's rails land on has its uplinks to the spines: as many
    as the profile says (else as most leaves of the subnet have, on the same port numbers), at
    the profile's width and speed, no error counter rising and XmitWait under the limit on
    either end. Nodes behind a degraded leaf are marked with it."""
    out: list[Verdict] = []
    for name in sorted(_subnets(profiles)):
        got = reading(facts, name, _topology)
        nodes = _subnet_nodes(facts, profiles, name)
        topo = got.value
        if not isinstance(topo, Topology):
            out += [
                error(c, n, f"subnet {name} leaves", got.why, evidence=got.evidence) for n in nodes
            ]
            continue
        prof = profiles[nodes[0]] if nodes else None
        if prof is None:
            continue
        found = _leaf_findings(topo, prof, got, plan_of(facts).uplinks.get(name))
        for n in nodes:
            f = facts[n]
            leaves: dict[str, Switch] = {}
            for r in rails_on(profiles[n], next(s for s in profiles[n].subnets if s.name == name)):
                guid = None if f.guids is None else f.guids.get(r.device)
                port = None if guid is None else topo.ca_ports.get(guid)
                if port is not None:
                    leaves[port.switch.guid] = port.switch
            if not leaves:
                out.append(
                    error(
                        c,
                        n,
                        f"subnet {name} leaves",
                        "none of the node's rails is in the discovered fabric",
                        evidence=got.evidence,
                    )
                )
                continue
            for leaf in sorted(leaves.values(), key=lambda s: s.name):
                marks = found.get(leaf.guid, [])
                for fd in marks:
                    out.append(_mark(c, n, fd, got))
                if not marks:
                    count = len(topo.uplinks(leaf))
                    out.append(
                        judged(
                            c,
                            n,
                            True,
                            f"{leaf.name} uplinks",
                            f"{count} uplinks",
                            "uplinks present, at speed, clean",
                            evidence=got.evidence,
                        )
                    )
    return out


def _leaf_findings(
    topo: Topology,
    prof: FabricProfile,
    got: Reading,
    golden: Mapping[str, Mapping[int, str]] | None = None,
) -> dict[str, list[Finding]]:
    """Leaf guid -> its faults (missing or moved uplinks, links below width/speed, errors,
    XmitWait). With a golden snapshot every uplink it lists must be where it was; without,
    a leaf must have as many as the profile says (or most leaves have)."""
    leaves = topo.leaves()
    ports = {leaf.guid: {u.local.port for u in topo.uplinks(leaf)} for leaf in leaves}
    usual = Counter(p for ps in ports.values() for p in ps)
    # The uplink port numbers most leaves use: one a leaf lacks is a cable down.
    common = {p for p, k in usual.items() if k * 2 > len(leaves)}
    counts = Counter(len(ps) for ps in ports.values())
    typical = counts.most_common(1)[0][0] if counts else 0
    rule = prof.uplinks
    out: dict[str, list[Finding]] = {}
    names = tuple(prof.counters.max_delta)
    for leaf in leaves:
        found: list[Finding] = []
        have = ports[leaf.guid]
        if golden is not None:
            found += _moved(topo, leaf, golden.get(leaf.name, {}))
            for u in topo.uplinks(leaf):
                found += _uplink_findings(u, prof, got, names)
            if found:
                out[leaf.guid] = found
            continue
        count_ok = rule.count.holds(len(have)) if rule.count is not None else len(have) >= typical
        want = rule.count.expected() if rule.count is not None else f"{typical} (as most leaves)"
        if not count_ok:
            missing: list[int | None] = [*sorted(common - have)] or [None]
            for p in missing:
                comp = f"{leaf.name} P{p} (uplink)" if p is not None else f"{leaf.name} uplinks"
                found.append(
                    Finding(
                        comp,
                        f"{len(have)} uplinks",
                        want,
                        f"{leaf.name} has {len(have)} uplinks to the spines, "
                        f"expected {want}" + (f": P{p} has no link partner" if p else ""),
                        f"repair the uplink cable at {leaf.name} P{p}"
                        if p
                        else f"repair {leaf.name}'s uplinks to the spines",
                    )
                )
        for u in topo.uplinks(leaf):
            found += _uplink_findings(u, prof, got, names)
        if found:
            out[leaf.guid] = found
    return out


def _uplink_findings(
    u: Uplink, prof: FabricProfile, got: Reading, names: tuple[str, ...]
) -> list[Finding]:
    out: list[Finding] = []
    w, s = prof.uplinks.link.width, prof.uplinks.link.speed
    seen = f"{u.local.width or '?'} {u.local.speed or '?'}"
    if not (w.holds(u.local.width) and s.holds(u.local.speed)):
        want = f"{w.expected()} {s.expected()}"
        out.append(
            Finding(
                u.label,
                seen,
                want,
                f"uplink {u.label} links at {seen}, not {want}",
                f"reseat or replace the cable {u.label}",
            )
        )
    window = prof.counters.window_s
    for end in (u.local, u.remote):
        if end is None:
            continue
        rise, _why = _deltas(got, (end.switch.lid, end.port), (*names, XMIT_WAIT))
        if rise is None:
            continue  # counters not read: fabric.switch_port.errors is every node's ERROR then
        bad = [f"{k} +{v}" for k in names if not prof.counters.max_delta[k].holds(v := rise[k])]
        if bad:
            out.append(
                Finding(
                    u.label,
                    ", ".join(bad),
                    f"no error counter rising over {window:g} s",
                    f"uplink {u.label}: {', '.join(bad)} at {end.label} in {window:g} s",
                    f"reseat the cable {u.label}; replace it if errors continue",
                )
            )
        rate = round(rise[XMIT_WAIT] / seconds(got, prof), 1)
        t = prof.counters.xmit_wait_rate
        if not t.holds(rate):
            out.append(
                Finding(
                    u.label,
                    rate,
                    t.expected(),
                    f"uplink {u.label}: {end.label} waits for credits ({rate:.0f} {t.unit or ''})",
                    f"find the congestion behind {u.label}: a slow receiver or "
                    "too few uplinks for the traffic",
                    unit=t.unit,
                )
            )
    return out


def _firmware(o: Observation) -> Mapping[int, SwitchFirmware] | None:
    return o.firmware


def switch_firmware(c: AnyCheck, facts: Facts, profiles: Profiles) -> list[Verdict]:
    """fabric.switch.firmware: every switch of the subnet runs at least the profile's
    firmware, and (where the profile says so) the version most switches run. A leaf's fault
    marks the nodes cabled to it; a spine's every node of the subnet (their traffic crosses
    it)."""
    out: list[Verdict] = []
    for name in sorted(_subnets(profiles)):
        got = reading(facts, name, _firmware, (FIRMWARE,))
        topo = reading(facts, name, _topology).value
        nodes = _subnet_nodes(facts, profiles, name)
        if not isinstance(got.value, Mapping) or not isinstance(topo, Topology):
            why = got.why or "the subnet's topology was not read"
            out += [
                error(c, n, f"subnet {name} switches", why, evidence=got.evidence) for n in nodes
            ]
            continue
        prof = profiles[nodes[0]]
        fw: Mapping[int, SwitchFirmware] = got.value
        findings = _firmware_findings(topo, fw, prof)
        leaves = {s.guid for s in topo.leaves()}
        for n in nodes:
            mine = _leaves_of(facts[n], profiles[n], name, topo)
            marks = [fd for guid, fd in findings if guid not in leaves or guid in mine]
            for fd in marks:
                out.append(_mark(c, n, fd, got))
            if not marks:
                versions = sorted({f.version for f in fw.values()})
                out.append(
                    judged(
                        c,
                        n,
                        True,
                        f"subnet {name} switches",
                        ", ".join(versions),
                        prof.switch_firmware.expected(),
                        f"{len(fw)} switches",
                        evidence=got.evidence,
                    )
                )
    return out


def _leaves_of(f: FabricFacts, prof: FabricProfile, subnet: str, topo: Topology) -> set[str]:
    """GUIDs of the leaves the node's rails on `subnet` land on."""
    out: set[str] = set()
    for s in prof.subnets:
        if s.name != subnet:
            continue
        for r in rails_on(prof, s):
            guid = None if f.guids is None else f.guids.get(r.device)
            port = None if guid is None else topo.ca_ports.get(guid)
            if port is not None:
                out.add(port.switch.guid)
    return out


def _firmware_findings(
    topo: Topology, fw: Mapping[int, SwitchFirmware], prof: FabricProfile
) -> list[tuple[str, Finding]]:
    """(switch guid, finding) for each switch below the minimum or off the majority; a
    discovered switch the loop did not report is one too (its firmware unknown)."""
    rule = prof.switch_firmware
    usual = Counter(f.version for f in fw.values()).most_common(1)
    common = usual[0][0] if usual else None
    target = common if common and rule.holds(common) else rule.min
    out: list[tuple[str, Finding]] = []
    for sw in sorted(topo.switches.values(), key=lambda s: (s.name, s.guid)):
        got = fw.get(sw.lid)
        if got is None:
            out.append(
                (
                    sw.guid,
                    Finding(
                        sw.name,
                        "not reported",
                        rule.expected(),
                        f"{sw.name} (lid {sw.lid}): no firmware read",
                        f"query {sw.name}'s firmware (flint -d lid-{sw.lid} q)",
                    ),
                )
            )
            continue
        if not rule.holds(got.version):
            out.append(
                (
                    sw.guid,
                    Finding(
                        sw.name,
                        got.version,
                        rule.expected(),
                        f"{sw.name} runs firmware {got.version}",
                        f"update {sw.name}'s firmware to {target}",
                    ),
                )
            )
        elif prof.uniform_firmware and got.version != common:
            out.append(
                (
                    sw.guid,
                    Finding(
                        sw.name,
                        got.version,
                        f"{common} (as most switches)",
                        f"{sw.name} runs firmware {got.version}, most switches {common}",
                        f"bring {sw.name} to the fabric's firmware {common}",
                    ),
                )
            )
    return out


def _moved(topo: Topology, leaf: Switch, golden: Mapping[int, str]) -> list[Finding]:
    """The snapshot's uplinks of `leaf` that are not where they were: gone dark, or moved."""
    out: list[Finding] = []
    for port, far in sorted(golden.items()):
        now = topo.switch_links.get((leaf.guid, port))
        if now is not None and now.label == far:
            continue
        seen = "no link partner" if now is None else now.label
        cable = f"{leaf.name} P{port} -> {far}"
        what = "has no link partner" if now is None else f"now goes to {now.label}"
        out.append(Finding(cable, seen, f"{far} (snapshot)",
                           f"uplink {cable} {what}",
                           f"restore the cable {cable} as in the snapshot"))  # fmt: skip
    return out
