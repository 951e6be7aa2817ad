"""Checks of the `hca` stage on rail ports: state, width, speed, rate, link layer, error
counter deltas, and mlxlink BER and module flags. Pure (check, HcaFacts, HcaProfile) -> verdicts.
"""

from __future__ import annotations

from typing import Literal

from nodegate.core.checks import AnyCheck
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.parsers.ib_sysfs import IbSysfsPort
from nodegate.parsers.mlxlink import MlxlinkReport
from nodegate.stages.hca.commands import SYSFS, SYSFS_AGAIN, mlxlink_id
from nodegate.stages.hca.facts import HcaFacts
from nodegate.stages.hca.placement import no_sysfs, port_label, rail_label
from nodegate.stages.hca.profile import CounterRule, HcaProfile, LinkHealthRule, Rail, show_expected

RailPort = tuple[Rail, str, IbSysfsPort]


def _rail_ports(
    check: AnyCheck, f: HcaFacts, prof: HcaProfile
) -> tuple[list[RailPort], list[Verdict]]:
    """(rail, device, port) of every present rail port; ERROR verdicts for absent rails."""
    found: list[RailPort] = []
    errs = []
    for r in prof.rails:
        d = f.device(r.device)
        if d is None:
            why = f"not judged: {r.device} absent (hca.count)"
            errs.append(error(check, f.node, rail_label(r), why))
            continue
        found += [(r, d.name, p) for p in d.ports]
    return found, errs


def port_state(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.port.state: every rail port ACTIVE and LinkUp."""
    if f.sysfs is None:
        return no_sysfs(c, f)
    want = prof.compute.port
    ports, out = _rail_ports(c, f, prof)
    exp = f"{show_expected(want.state, str)}/{show_expected(want.phys_state, str)}"
    for r, dev, p in ports:
        got = f"{p.state}/{p.phys_state}"
        ok = want.state.holds(p.state.upper()) and want.phys_state.holds(p.phys_state)
        out.append(
            judged(
                c,
                f.node,
                ok,
                port_label(dev, p.port, r),
                got,
                exp,
                f"{dev} port {p.port} {got}" + ("" if ok else f", expected {exp}"),
                remediation="check the cable, transceiver and switch port; then the subnet manager",
                evidence=f.ev(SYSFS),
            )
        )
    return out


def port_width(check: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.port.width: the link width of every rail port (`4X`)."""
    return _port_link(check, f, prof, "width")


def port_speed(check: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.port.speed: the link speed of every rail port (`NDR`)."""
    return _port_link(check, f, prof, "speed")


def port_rate(check: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.port.rate: the link rate of every rail port (400 Gb/s)."""
    return _port_link(check, f, prof, "rate")


def _port_link(
    check: AnyCheck, f: HcaFacts, prof: HcaProfile, what: Literal["width", "speed", "rate"]
) -> list[Verdict]:
    """Width, speed and rate are each judged on their own from the sysfs rate string."""
    if f.sysfs is None:
        return no_sysfs(check, f)
    rule = prof.compute.port
    want = {"width": rule.width_lanes, "speed": rule.speed, "rate": rule.rate_gbps}[what]
    ports, out = _rail_ports(check, f, prof)
    for r, dev, p in ports:
        lbl = port_label(dev, p.port, r)
        if not rule.state.holds(p.state.upper()):
            out.append(
                error(check, f.node, lbl, f"not judged: port is {p.state}", evidence=f.ev(SYSFS))
            )
            continue
        got: object
        shown: object
        if what == "width":
            got = p.rate.width_lanes
            shown = None if got is None else f"{got}X"
            exp = show_expected(want, lambda v: f"{v}X")
        else:
            got = shown = p.rate.speed if what == "speed" else p.rate.rate_gbps
            exp = show_expected(want)
        ok = want.holds(got)
        out.append(
            judged(
                check,
                f.node,
                ok,
                lbl,
                shown,
                exp,
                f"{dev} port {p.port} {what} {shown} ({p.rate.raw})"
                + ("" if ok else f", expected {exp}"),
                unit=want.unit,
                reference=want,
                remediation="check the cable and transceiver, reseat; compare with the switch port",
                evidence=f.ev(SYSFS),
            )
        )
    return out


def link_layer(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.port.link_layer: InfiniBand vs Ethernet per rail, as the profile says."""
    if f.sysfs is None:
        return no_sysfs(c, f)
    want = prof.compute.link_layer
    exp = show_expected(want)
    ports, out = _rail_ports(c, f, prof)
    for r, dev, p in ports:
        ok = want.holds(p.link_layer)
        out.append(
            judged(
                c,
                f.node,
                ok,
                port_label(dev, p.port, r),
                p.link_layer,
                exp,
                f"{dev} port {p.port} link layer {p.link_layer}"
                + ("" if ok else f", expected {exp}"),
                remediation="set LINK_TYPE with mlxconfig and reboot (or fix the rail map)",
                evidence=f.ev(SYSFS),
                reference=want,
            )
        )
    return out


def counters(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.counters.errors: error counters read twice, judged on deltas; absolute = warning."""
    if f.sysfs is None:
        return no_sysfs(c, f)
    ports, out = _rail_ports(c, f, prof)
    ev = f.ev(SYSFS, SYSFS_AGAIN)
    if f.sysfs_again is None:
        why = f.errors.get(SYSFS_AGAIN, "second counter read missing")
        return out + [
            error(c, f.node, port_label(d, p.port, r), why, evidence=ev) for r, d, p in ports
        ]
    for r, dev, p in ports:
        again = f.sysfs_again
        d2 = next((d for d in again.devices if d.name == dev), None)
        p2 = None if d2 is None else next((q for q in d2.ports if q.port == p.port), None)
        out.append(_port_counters(c, f, port_label(dev, p.port, r), dev, p, p2, prof.counters, ev))
    return out


def _port_counters(
    c: AnyCheck,
    f: HcaFacts,
    lbl: str,
    dev: str,
    p: IbSysfsPort,
    p2: IbSysfsPort | None,
    rule: CounterRule,
    ev: tuple[str, ...],
) -> Verdict:
    """One port's verdict: a counter over its max delta fails; absolute values only warn."""
    deltas: dict[str, int] = {}
    unread = []
    for name in sorted(rule.max_delta):
        a = p.counters.get(name)
        b = None if p2 is None else p2.counters.get(name)
        if a is None or b is None:
            unread.append(name)
        else:
            deltas[name] = b - a
    if unread:
        return error(c, f.node, lbl, f"unreadable counters: {', '.join(unread)}", evidence=ev)
    over = {k: v for k, v in deltas.items() if not rule.max_delta[k].holds(v)}
    if over:
        got = ", ".join(f"{k} +{v}" for k, v in over.items())
        exp = ", ".join(f"{k} {_delta_shown(rule.max_delta[k])}" for k in over)
        return judged(
            c,
            f.node,
            False,
            lbl,
            got,
            exp,
            f"{dev} port {p.port}: {got} in {rule.window_s:g} s",
            unit=rule.max_delta[next(iter(over))].unit,
            remediation="replace this port's cable/transceiver; check the switch side",
            evidence=ev,
        )
    warn = {
        k: p.counters[k]
        for k in sorted(rule.warn_absolute)
        if not rule.warn_absolute[k].holds(p.counters.get(k) or 0)
    }
    msg = f"{dev} port {p.port}: no error counter rose in {rule.window_s:g} s"
    if warn:
        msg += "; warning, absolute values (not judged): " + ", ".join(
            f"{k}={v}" for k, v in warn.items()
        )
    return judged(c, f.node, True, lbl, "no increase", "no increase", msg, evidence=ev)


def _delta_shown(t: Threshold) -> str:
    """`<= +0`: an increase at most the threshold."""
    return str(show_expected(t, lambda v: f"+{v}"))


def _raised(values: tuple[str, ...]) -> list[int]:
    """Lanes whose flag is set ('0' clear; 'N/A' not reported by this module)."""
    return [i for i, v in enumerate(values) if v not in ("0", "N/A", "")]


def link_health(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.link.ber: mlxlink effective and raw BER and transceiver fault flags, per rail port."""
    rule = prof.link_health
    if rule is None:
        return [
            judged(c, f.node, True, port_label(r.device, 1, r), None, "not judged",
                   f"{r.device}: BER not judged (profile: link_health null)")
            for r in prof.rails
        ]  # fmt: skip
    want = (
        f"effective BER {rule.effective_ber.expected()}, raw BER {rule.raw_ber.expected()}, "
        "no module fault flag"
    )
    out = []
    for r in prof.rails:
        cid = mlxlink_id(r.device)
        lbl, ev = port_label(r.device, 1, r), f.ev(cid)
        rep = f.mlxlink.get(cid)
        if rep is None:
            why = f.errors.get(cid, f"no mlxlink output for {r.device}")
            if why.startswith("absent:"):
                ok = not rule.required
                msg = "mlxlink (MFT) not installed: BER and module flags " + (
                    "not judged (profile: optional)" if ok else "required by the profile"
                )
                fix = "install NVIDIA MFT (mlxlink)"
                out.append(
                    judged(
                        c, f.node, ok, lbl, "no mlxlink", want, msg, remediation=fix, evidence=ev
                    )
                )
            else:
                out.append(error(c, f.node, lbl, why, evidence=ev))
            continue
        out.append(_ber_verdict(c, f, lbl, r.device, rep, rule, want, ev))
    return out


def _ber_verdict(
    c: AnyCheck,
    f: HcaFacts,
    lbl: str,
    dev: str,
    rep: MlxlinkReport,
    rule: LinkHealthRule,
    want: str,
    ev: tuple[str, ...],
) -> Verdict:
    k = rep.counters
    if k is None or k.effective_physical_ber is None or k.raw_physical_ber is None:
        return error(c, f.node, lbl, f"no BER in mlxlink output for {dev}", evidence=ev)
    eff, raw = k.effective_physical_ber, k.raw_physical_ber
    problems = []
    if not rule.effective_ber.holds(eff):
        problems.append(f"effective BER {eff:.2g}")
    if not rule.raw_ber.holds(raw):
        problems.append(f"raw BER {raw:.2g}")
    mod = rep.module
    for name in rule.fault_flags if mod is not None else ():
        assert mod is not None
        vals = mod.lane_values.get(name) or (mod.fields.get(name, "N/A"),)
        lanes = _raised(vals)
        if lanes:
            problems.append(f"{name} on lane {','.join(map(str, lanes))}")
    got = "; ".join(problems) or f"effective BER {eff:.2g}, raw BER {raw:.2g}"
    note = "" if mod is not None else " (no module info: flags not judged)"
    return judged(
        c,
        f.node,
        not problems,
        lbl,
        got,
        want,
        f"{dev} port 1: {got}{note}" + (f", expected {want}" if problems else ""),
        remediation="clean or replace the cable/transceiver; check the switch port's BER",
        evidence=ev,
    )
