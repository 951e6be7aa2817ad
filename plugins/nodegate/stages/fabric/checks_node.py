"""The fabric checks that judge a node's own rails: where each rail's cable lands, the switch
side of that cable (width and speed, error counters, XmitWait) and the ports' partition keys.

They read the subnet's discovered topology (fleet scope: an observer's reading judges every
node), the node's port GUIDs tie its rails to it. A rail whose subnet nobody could read is an
ERROR for that rail, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Verdict
from nodegate.core.verdicts import against, error, judged
from nodegate.stages.fabric.commands import COUNTERS, COUNTERS_AGAIN, GUIDS, PKEYS
from nodegate.stages.fabric.facts import Expected, FabricFacts, PortKey
from nodegate.stages.fabric.profile import FabricProfile
from nodegate.stages.fabric.topology import SwitchPort, Topology
from nodegate.stages.fabric.view import Reading, rail_label, rails_on, reading
from nodegate.stages.hca.profile import Rail

RailJudge = Callable[[AnyCheck, FabricFacts, FabricProfile, Rail, SwitchPort, Reading], Verdict]
Facts = Mapping[str, FabricFacts]
Profiles = Mapping[str, FabricProfile]

RESEAT = "reseat_cable"


def _topology(o: object) -> Topology | None:
    return getattr(o, "topology", None)


def per_rail_on_fabric(judge: RailJudge) -> Callable[[AnyCheck, Facts, Profiles], list[Verdict]]:
    """A fleet check judging each node's rails where they land in the subnet's topology; a
    rail not in the topology is judged by `fabric.cable.expected` (here an ERROR: nothing on
    the switch side to judge)."""

    def check(c: AnyCheck, facts: Facts, profiles: Profiles) -> list[Verdict]:
        out: list[Verdict] = []
        readings: dict[str, Reading] = {}
        for n, f in facts.items():
            prof = profiles[n]
            for s in prof.subnets:
                if s.name not in readings:
                    readings[s.name] = reading(facts, s.name, _topology)
                got = readings[s.name]
                for r in rails_on(prof, s):
                    out.append(_on_fabric(c, f, prof, r, got, judge))
        return out

    check.__name__ = judge.__name__
    return check


def _on_fabric(
    c: AnyCheck, f: FabricFacts, prof: FabricProfile, r: Rail, got: Reading, judge: RailJudge
) -> Verdict:
    topo = got.value
    if not isinstance(topo, Topology):
        return error(c, f.node, rail_label(r), got.why, evidence=got.evidence)
    if f.guids is None or r.device not in f.guids:
        why = f.errors.get(GUIDS, f"no port GUID read for {r.device}")
        return error(c, f.node, rail_label(r), why, evidence=f.ev(GUIDS))
    port = topo.ca_ports.get(f.guids[r.device])
    if port is None:
        why = f"{rail_label(r)} is not in the discovered fabric (see fabric.cable.expected)"
        return error(c, f.node, rail_label(r), why, evidence=f.ev(GUIDS) + got.evidence)
    return judge(c, f, prof, r, port, got)


def _expected_of(f: FabricFacts, r: Rail) -> Expected | None:
    return f.expected.get(r.rail)


def _lands(port: SwitchPort, exp: Expected) -> bool:
    return port.switch.name == exp.switch and (exp.port is None or port.port == exp.port)


def cable_expected(c: AnyCheck, facts: Facts, profiles: Profiles) -> list[Verdict]:
    """fabric.cable.expected: each rail's cable lands on the expected switch and port; two
    rails that landed on each other's ports are named as a swapped pair; a rail the fabric
    does not show (no link partner) fails."""
    out: list[Verdict] = []
    readings: dict[str, Reading] = {}
    for n, f in facts.items():
        prof = profiles[n]
        landed: dict[int, SwitchPort | None] = {}
        rails: list[tuple[Rail, Reading]] = []
        for s in prof.subnets:
            if s.name not in readings:
                readings[s.name] = reading(facts, s.name, _topology)
            for r in rails_on(prof, s):
                rails.append((r, readings[s.name]))
                topo = readings[s.name].value
                if isinstance(topo, Topology) and f.guids is not None and r.device in f.guids:
                    landed[r.rail] = topo.ca_ports.get(f.guids[r.device])
        for r, got in rails:
            out.append(_cable(c, f, prof, r, got, landed))
    return out


def _cable(
    c: AnyCheck,
    f: FabricFacts,
    prof: FabricProfile,
    r: Rail,
    got: Reading,
    landed: Mapping[int, SwitchPort | None],
) -> Verdict:
    exp = _expected_of(f, r)
    name = rail_label(r)
    ev = f.ev(GUIDS) + got.evidence
    topo = got.value
    if not isinstance(topo, Topology):
        return error(c, f.node, name, got.why, evidence=got.evidence)
    if r.rail not in landed:
        why = f.errors.get(GUIDS, f"no port GUID read for {r.device}")
        return error(c, f.node, name, why, evidence=f.ev(GUIDS))
    port = landed[r.rail]
    component = f"{name} -> {exp.label}" if exp is not None and exp.switch else name
    if port is None:
        far = ""
        if exp is not None and exp.switch and exp.port is not None:
            sp = topo.switch_port(exp.switch, exp.port)
            if sp is not None and topo.ca_on(exp.switch, exp.port) is None:
                far = f"; {sp.label} has no link partner"
        msg = f"{name}: no link partner (the port is not in the discovered fabric){far}"
        fix = f"check and reseat the cable of {f.node} {r.device} (rail {r.rail})"
        want = exp.label if exp is not None and exp.switch else "a switch port"
        return judged(
            c,
            f.node,
            False,
            component,
            "no link partner",
            want,
            msg,
            remediation=fix,
            remediation_class=RESEAT,
            evidence=ev,
        )
    if exp is None or exp.switch is None:
        if prof.cabling_required:
            why = (
                f"no expected cabling for {name}: give data_plane.rails.{r.rail}.switch/port in "
                "the inventory, a fabric snapshot, or fabric.cabling.naming in the profile"
            )
            return error(c, f.node, name, why, evidence=ev)
        return judged(
            c,
            f.node,
            True,
            name,
            port.label,
            "a switch port",
            f"linked to {port.label} (no expected cabling to compare)",
            evidence=ev,
        )
    if _lands(port, exp):
        return judged(
            c, f.node, True, component, port.label, exp.label, f"({exp.source})", evidence=ev
        )
    swapped = _swapped_with(f, prof, r, port, landed)
    if swapped is not None:
        msg = (
            f"rails {min(r.rail, swapped.rail)} and {max(r.rail, swapped.rail)} swapped: "
            f"{r.device} lands on {port.label}, {swapped.device}'s expected port"
        )
        fix = f"swap the cables of {r.device} and {swapped.device} on {f.node}"
    else:
        msg = f"{name} lands on {port.label}, expected {exp.label} ({exp.source})"
        fix = f"move the cable of {f.node} {r.device} from {port.label} to {exp.label}"
    return judged(
        c,
        f.node,
        False,
        component,
        port.label,
        exp.label,
        msg,
        remediation=fix,
        remediation_class=RESEAT,
        evidence=ev,
    )


def _swapped_with(
    f: FabricFacts,
    prof: FabricProfile,
    r: Rail,
    port: SwitchPort,
    landed: Mapping[int, SwitchPort | None],
) -> Rail | None:
    """The node's other rail whose expected port this rail took, and which took this rail's."""
    mine = f.expected.get(r.rail)
    if mine is None:
        return None
    for other, its in landed.items():
        exp = f.expected.get(other)
        ok = other != r.rail and its is not None and exp is not None
        if ok and _lands(port, exp) and _lands(its, mine):  # type: ignore[arg-type]
            return prof.rail(other)
    return None


def link(
    c: AnyCheck, f: FabricFacts, prof: FabricProfile, r: Rail, port: SwitchPort, got: Reading
) -> Verdict:
    """fabric.link: width and speed at the switch side of the rail's cable."""
    w, s = prof.link.width, prof.link.speed
    ok = w.holds(port.width) and s.holds(port.speed)
    seen = f"{port.width or '?'} {port.speed or '?'}"
    want = f"{w.expected()} {s.expected()}"
    msg = "" if ok else f"{port.label} (switch side of {r.device}) links at {seen}, not {want}"
    fix = f"reseat or replace the cable between {f.node} {r.device} and {port.label}"
    return judged(
        c,
        f.node,
        ok,
        f"{rail_label(r)} -> {port.label}",
        seen,
        want,
        msg,
        remediation=fix,
        remediation_class=RESEAT,
        evidence=f.ev(GUIDS) + got.evidence,
    )


def _deltas(
    got: Reading, key: PortKey, names: tuple[str, ...]
) -> tuple[dict[str, int] | None, str]:
    """Each counter's rise on one switch port between the two reads, or why not."""
    obs = got.observation
    first = None if obs is None else obs.counters
    again = None if obs is None else obs.counters_again
    if obs is None or first is None or again is None:
        said = (
            []
            if obs is None
            else [obs.errors[k] for k in (COUNTERS, COUNTERS_AGAIN) if k in obs.errors]
        )
        return None, "; ".join(said) or "switch counters not read"
    a, b = first.get(key), again.get(key)
    if a is None or b is None:
        return None, f"switch LID {key[0]} port {key[1]} not in the counter reads"
    missing = [k for k in names if k not in a or k not in b]
    if missing:
        return None, f"counters not reported: {', '.join(missing)}"
    rise = {k: b[k] - a[k] for k in names}
    fell = [f"{k} {a[k]} -> {b[k]}" for k, v in rise.items() if v < 0]
    if fell:
        return None, f"counters went down between the reads: {', '.join(fell)}"
    return rise, ""


def switch_port_errors(
    c: AnyCheck, f: FabricFacts, prof: FabricProfile, r: Rail, port: SwitchPort, got: Reading
) -> Verdict:
    """fabric.switch_port.errors: error counters of the switch port facing the rail, read
    twice over the window; a rise blames the cable (reseat)."""
    rule = prof.counters.max_delta
    component = f"{rail_label(r)} -> {port.label}"
    ev = f.ev(GUIDS) + got.evidence
    rise, why = _deltas(got, (port.switch.lid, port.port), tuple(rule))
    if rise is None:
        return error(c, f.node, component, why, evidence=ev)
    bad = [f"{k} +{v}" for k, v in rise.items() if not rule[k].holds(v)]
    window = prof.counters.window_s
    want = f"no error counter rising over {window:g} s"
    if not bad:
        return judged(c, f.node, True, component, f"no rise in {window:g} s", want, evidence=ev)
    msg = f"{port.label} (facing {f.node} {r.device}): {', '.join(bad)} in {window:g} s"
    fix = (
        f"reseat the cable between {f.node} {r.device} and {port.label}; "
        "replace it if the errors continue"
    )
    return judged(
        c,
        f.node,
        False,
        component,
        ", ".join(bad),
        want,
        msg,
        remediation=fix,
        remediation_class=RESEAT,
        evidence=ev,
    )


XMIT_WAIT = "PortXmitWait"


def seconds(got: Reading, prof: FabricProfile) -> float:
    """Seconds between the two reads of a switch port (measured; else the profile's window)."""
    obs = got.observation
    measured = None if obs is None else obs.elapsed_s
    return measured if measured and measured > 0 else prof.counters.window_s


def xmit_wait(
    c: AnyCheck, f: FabricFacts, prof: FabricProfile, r: Rail, port: SwitchPort, got: Reading
) -> Verdict:
    """fabric.xmit_wait: PortXmitWait ticks per second on the switch port facing the rail
    (credit starvation: the node does not take what the switch sends)."""
    component = f"{rail_label(r)} -> {port.label}"
    ev = f.ev(GUIDS) + got.evidence
    rise, why = _deltas(got, (port.switch.lid, port.port), (XMIT_WAIT,))
    if rise is None:
        return error(c, f.node, component, why, evidence=ev)
    secs = seconds(got, prof)
    rate = round(rise[XMIT_WAIT] / secs, 1)
    t = prof.counters.xmit_wait_rate
    if t.holds(rate):
        # A passing rate is background that varies with when the two reads fall: not an
        # observation to compare run to run (A/B mode, serial vs -n), only that it is under.
        return judged(c, f.node, True, component, "under the limit", t.expected(),
                      evidence=ev, reference=t)  # fmt: skip
    msg = f"{port.label} waits for credits towards {f.node} {r.device}"
    fix = f"check {f.node} {r.device}: its receive side starves the switch of credits"
    return against(c, f.node, component, rate, t, msg, remediation=fix, evidence=ev)


def pkey(c: AnyCheck, f: FabricFacts, prof: FabricProfile) -> list[Verdict]:
    """fabric.pkey: each rail port holds every partition the profile requires (full member
    where it says so). Node scope: the node's own sysfs."""
    out: list[Verdict] = []
    want = ", ".join(f"0x{k:04x}" for k in prof.pkeys.required) or "none"
    judged_rails = [r for s in prof.subnets for r in rails_on(prof, s)]
    for r in judged_rails:
        name = rail_label(r)
        if f.pkeys is None:
            why = f.errors.get(PKEYS, "partition keys not read")
            out.append(error(c, f.node, name, why, evidence=f.ev(PKEYS)))
            continue
        held = {e.pkey: e.full_member for e in f.pkeys if e.device == r.device and e.port == 1}
        missing = [k for k in prof.pkeys.required if k not in held]
        limited = [
            k for k in prof.pkeys.required if k in held and prof.pkeys.full_member and not held[k]
        ]
        seen = ", ".join(
            f"0x{k:04x}{'' if full else ' (limited)'}" for k, full in sorted(held.items())
        )
        problems = [f"0x{k:04x} missing" for k in missing]
        problems += [f"0x{k:04x} limited member, not full" for k in limited]
        msg = "; ".join(problems)
        fix = f"add the partition(s) to {f.node} {r.device} in the SM's partition configuration"
        if not held:  # no P_Key table at all: the device or its port is not there
            msg = f"{r.device} port 1 has no P_Key table (the device or port is absent)"
            fix = f"find why {f.node} has no {r.device} port 1 (the hca stage's checks)"
        out.append(
            judged(
                c,
                f.node,
                not problems,
                name,
                seen or "none",
                want,
                msg,
                remediation=fix,
                remediation_class="fix_config",
                evidence=f.ev(PKEYS),
            )
        )
    return out
