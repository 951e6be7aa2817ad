"""Checks of the `hca` stage on rail ports: state, width, speed, rate, link layer, error
counter deltas, and mlxlink BER and module flags. Pure (HcaFacts, profile section) -> verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodegate.model import Verdict
from nodegate.parsers.ib_sysfs import IbSysfsPort
from nodegate.stages.hca_checks import no_sysfs
from nodegate.stages.hca_facts import (
    SYSFS,
    SYSFS_AGAIN,
    HcaFacts,
    device_label,
    error,
    mlxlink_id,
    port_label,
    verdict,
)

Prof = Mapping[str, Any]


def _rail_ports(
    check: str, f: HcaFacts, prof: Prof
) -> tuple[list[tuple[Mapping[str, Any], str, IbSysfsPort]], list[Verdict]]:
    """(rail, device, port) of every present rail port; ERROR verdicts for absent rails."""
    found, errs = [], []
    for r in prof["rails"]:
        d = f.device(r["device"])
        if d is None:
            lbl = device_label(r["device"], r, "compute")
            errs.append(error(check, f, lbl, f"not judged: {r['device']} absent (hca.count)"))
            continue
        found += [(r, d.name, p) for p in d.ports]
    return found, errs


def port_state(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.port.state: every rail port ACTIVE and LinkUp."""
    c = "hca.port.state"
    if f.sysfs is None:
        return no_sysfs(c, f)
    want = prof["roles"]["compute"]["port"]
    ports, out = _rail_ports(c, f, prof)
    exp = f"{want['state']}/{want['phys_state']}"
    for r, dev, p in ports:
        got = f"{p.state}/{p.phys_state}"
        ok = p.state.upper() == want["state"].upper() and p.phys_state == want["phys_state"]
        out.append(
            verdict(
                c,
                f,
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


_LINK_FACTS = {
    # check -> (profile key, port fact, unit, what)
    "hca.port.width": ("width_lanes", "width_lanes", "lanes", "width"),
    "hca.port.speed": ("speed", "speed", None, "speed"),
    "hca.port.rate": ("rate_gbps", "rate_gbps", "Gb/s", "rate"),
}


def port_link(check: str, f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.port.width / .speed / .rate: each judged on its own from the sysfs rate string."""
    if f.sysfs is None:
        return no_sysfs(check, f)
    key, attr, unit, what = _LINK_FACTS[check]
    want = prof["roles"]["compute"]["port"]
    ports, out = _rail_ports(check, f, prof)
    for r, dev, p in ports:
        lbl = port_label(dev, p.port, r)
        if p.state.upper() != want["state"].upper():
            out.append(error(check, f, lbl, f"not judged: port is {p.state}", f.ev(SYSFS)))
            continue
        got = getattr(p.rate, attr)
        shown = f"{got}X" if attr == "width_lanes" and got is not None else got
        exp = f"{want[key]}X" if attr == "width_lanes" else want[key]
        ok = got == want[key]
        out.append(
            verdict(
                check,
                f,
                ok,
                lbl,
                shown,
                exp,
                f"{dev} port {p.port} {what} {shown} ({p.rate.raw})"
                + ("" if ok else f", expected {exp}"),
                unit=unit,
                remediation="check the cable and transceiver, reseat; compare with the switch port",
                evidence=f.ev(SYSFS),
            )
        )
    return out


def link_layer(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.port.link_layer: InfiniBand vs Ethernet per rail, as the profile says."""
    c = "hca.port.link_layer"
    if f.sysfs is None:
        return no_sysfs(c, f)
    want = prof["roles"]["compute"]["link_layer"]
    ports, out = _rail_ports(c, f, prof)
    for r, dev, p in ports:
        ok = p.link_layer == want
        out.append(
            verdict(
                c,
                f,
                ok,
                port_label(dev, p.port, r),
                p.link_layer,
                want,
                f"{dev} port {p.port} link layer {p.link_layer}"
                + ("" if ok else f", expected {want}"),
                remediation="set LINK_TYPE with mlxconfig and reboot (or fix the rail map)",
                evidence=f.ev(SYSFS),
            )
        )
    return out


def counters(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.counters.errors: error counters read twice, judged on deltas; absolute = warning."""
    c = "hca.counters.errors"
    if f.sysfs is None:
        return no_sysfs(c, f)
    spec = prof["counters"]
    ports, out = _rail_ports(c, f, prof)
    ev = f.ev(SYSFS, SYSFS_AGAIN)
    if f.sysfs_again is None and ports:
        why = f.errors.get(SYSFS_AGAIN, "second counter read missing")
        return out + [error(c, f, port_label(d, p.port, r), why, ev) for r, d, p in ports]
    window = spec["window_s"]
    for r, dev, p in ports:
        assert f.sysfs_again is not None
        d2 = next((d for d in f.sysfs_again.devices if d.name == dev), None)
        p2 = None if d2 is None else next((q for q in d2.ports if q.port == p.port), None)
        lbl = port_label(dev, p.port, r)
        deltas: dict[str, int] = {}
        unread = []
        for name in sorted(spec["max_delta"]):
            a = p.counters.get(name)
            b = None if p2 is None else p2.counters.get(name)
            if a is None or b is None:
                unread.append(name)
            else:
                deltas[name] = b - a
        if unread:
            out.append(error(c, f, lbl, f"unreadable counters: {', '.join(unread)}", ev))
            continue
        over = {k: v for k, v in deltas.items() if v > spec["max_delta"][k]}
        warn = {
            k: p.counters[k]
            for k in sorted(spec["warn_absolute"])
            if (p.counters.get(k) or 0) > spec["warn_absolute"][k]
        }
        if over:
            got = ", ".join(f"{k} +{v}" for k, v in over.items())
            msg = f"{dev} port {p.port}: {got} in {window:g} s"
            exp = ", ".join(f"{k} <= +{spec['max_delta'][k]}" for k in over)
            out.append(
                verdict(
                    c,
                    f,
                    False,
                    lbl,
                    got,
                    exp,
                    msg,
                    unit="errors",
                    remediation="replace this port's cable/transceiver; check the switch side",
                    evidence=ev,
                )
            )
            continue
        msg = f"{dev} port {p.port}: no error counter rose in {window:g} s"
        if warn:
            msg += "; warning, absolute values (not judged): " + ", ".join(
                f"{k}={v}" for k, v in warn.items()
            )
        out.append(verdict(c, f, True, lbl, "no increase", "no increase", msg, evidence=ev))
    return out


def _raised(values: tuple[str, ...]) -> list[int]:
    """Lanes whose flag is set ('0' clear; 'N/A' not reported by this module)."""
    return [i for i, v in enumerate(values) if v not in ("0", "N/A", "")]


def link_health(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.link.ber: mlxlink effective and raw BER and transceiver fault flags, per rail port."""
    c = "hca.link.ber"
    spec = prof["link_health"]
    if spec is None:
        return [
            verdict(c, f, True, port_label(r["device"], 1, r), None, "not judged",
                    f"{r['device']}: BER not judged (profile: link_health null)")
            for r in prof["rails"]
        ]  # fmt: skip
    want = (
        f"effective BER <= {spec['max_effective_ber']:g}, raw BER <= {spec['max_raw_ber']:g}, "
        "no module fault flag"
    )
    out = []
    for r in prof["rails"]:
        dev, cid = r["device"], mlxlink_id(r["device"])
        lbl, ev = port_label(dev, 1, r), f.ev(cid)
        rep = f.mlxlink.get(cid)
        if rep is None:
            why = f.errors.get(cid, f"no mlxlink output for {dev}")
            if why.startswith("absent:"):
                ok = not spec["required"]
                msg = "mlxlink (MFT) not installed: BER and module flags " + (
                    "not judged (profile: optional)" if ok else "required by the profile"
                )
                fix = "install NVIDIA MFT (mlxlink)"
                out.append(
                    verdict(c, f, ok, lbl, "no mlxlink", want, msg, remediation=fix, evidence=ev)
                )
            else:
                out.append(error(c, f, lbl, why, ev))
            continue
        k = rep.counters
        if k is None or k.effective_physical_ber is None or k.raw_physical_ber is None:
            out.append(error(c, f, lbl, f"no BER in mlxlink output for {dev}", ev))
            continue
        eff, raw = k.effective_physical_ber, k.raw_physical_ber
        problems = []
        if eff > spec["max_effective_ber"]:
            problems.append(f"effective BER {eff:.2g}")
        if raw > spec["max_raw_ber"]:
            problems.append(f"raw BER {raw:.2g}")
        mod = rep.module
        for name in spec["fault_flags"] if mod is not None else ():
            assert mod is not None
            vals = mod.lane_values.get(name) or (mod.fields.get(name, "N/A"),)
            lanes = _raised(vals)
            if lanes:
                problems.append(f"{name} on lane {','.join(map(str, lanes))}")
        got = "; ".join(problems) or f"effective BER {eff:.2g}, raw BER {raw:.2g}"
        note = "" if mod is not None else " (no module info: flags not judged)"
        out.append(
            verdict(
                c,
                f,
                not problems,
                lbl,
                got,
                want,
                f"{dev} port 1: {got}{note}" + (f", expected {want}" if problems else ""),
                remediation="clean or replace the cable/transceiver; check the switch port's BER",
                evidence=ev,
            )
        )
    return out
