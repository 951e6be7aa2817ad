"""Checks of the `hca` stage on HCAs as parts: count, model, firmware, PCIe link.
Pure (check, HcaFacts, HcaProfile) -> verdicts; what a check cannot judge is an ERROR.
"""

from __future__ import annotations

from nodegate.core.checks import AnyCheck
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.stages.hca.commands import NO_DEVICES, PCI, SYSFS
from nodegate.stages.hca.facts import HcaFacts
from nodegate.stages.hca.placement import no_sysfs, pci_id, placements, rail_label
from nodegate.stages.hca.profile import COMPUTE, HcaProfile, PcieRule, show_expected


def count(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.count: every rail HCA present; each other role has its count."""
    if f.sysfs is None and f.errors.get(SYSFS, "").startswith(NO_DEVICES):
        want = len(prof.rails)
        msg, fix = f.errors[SYSFS], "check that the HCAs are seated and mlx5_core is loaded"
        rails = Threshold("equal", want)
        return [
            judged(
                c, f.node, False, "compute rails", 0, want, msg, remediation=fix, reference=rails
            )
        ]
    if f.sysfs is None:
        return no_sysfs(c, f)
    ev = f.ev(SYSFS)
    present = {d.name for d in f.sysfs.devices}
    missing = [rail_label(r) for r in prof.rails if r.device not in present]
    n_ok = len(prof.rails) - len(missing)
    msg = f"{n_ok}/{len(prof.rails)} rail HCAs present" + (
        f"; missing {', '.join(missing)}" if missing else ""
    )
    out = [
        judged(
            c,
            f.node,
            not missing,
            "compute rails",
            n_ok,
            len(prof.rails),
            msg,
            unit="HCAs",
            reference=Threshold("equal", len(prof.rails), "HCAs"),
            remediation="reseat or replace the missing HCA; check it in `lspci` and `dmesg`",
            evidence=ev,
        )
    ]
    by_role: dict[str, list[str]] = {}
    for p in placements(f, prof):
        if p.role is not None and p.role != COMPUTE:
            by_role.setdefault(p.role, []).append(p.device.name)
    for role in prof.others:
        got = by_role.get(role.name, [])
        names = ", ".join(got) if got else "none"
        want, bounds = role.count.expected(), role.count.bounds
        ref = bounds[0] if len(bounds) == 1 else None  # a range is no one threshold
        out.append(
            judged(
                c,
                f.node,
                role.count.holds(len(got)),
                f"{role.name} HCAs",
                len(got),
                want,
                f"{len(got)} {role.name} HCAs ({names}), expected {want}",
                unit=role.count.unit,
                reference=ref,
                remediation=f"install or reseat the {role.name} HCAs the profile lists",
                evidence=ev,
            )
        )
    return out


def model(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.model: each HCA's PCI id and PSID belong to its role."""
    if f.sysfs is None:
        return no_sysfs(c, f)
    ev = f.ev(SYSFS)
    out = []
    for p in placements(f, prof):
        pci, psid = pci_id(f, p.device.name), p.device.board_id
        got = f"pci {pci or 'unknown'}, PSID {psid or 'unknown'}"
        role = prof.role(p.role)
        if role is None:
            out.append(
                judged(
                    c,
                    f.node,
                    False,
                    p.label,
                    got,
                    "a role of the profile",
                    f"{p.device.name} ({got}) matches no HCA role of the profile",
                    remediation="remove the HCA or add its role to the profile",
                    evidence=ev,
                )
            )
            continue
        want = f"pci {'|'.join(role.pci_ids)}, PSID {'|'.join(role.psids)}"
        if pci is None or psid is None:
            out.append(error(c, f.node, p.label, f"{p.device.name}: {got} in sysfs", evidence=ev))
            continue
        ok = role.matches(pci, psid)
        out.append(
            judged(
                c,
                f.node,
                ok,
                p.label,
                got,
                want,
                f"{p.device.name} {got}" + ("" if ok else f", expected {want}"),
                remediation="install the HCA model (PCI id and PSID) the profile lists",
                evidence=ev,
            )
        )
    return out or [error(c, f.node, "hca", "no RDMA device found", evidence=ev)]


def firmware(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.firmware.version: each HCA's firmware against the rule for its PSID."""
    if f.sysfs is None:
        return no_sysfs(c, f)
    ev = f.ev(SYSFS)
    out = []
    for p in placements(f, prof):
        d = p.device
        rule = prof.firmware_rule(d.board_id)
        if d.fw_ver is None or rule is None:
            why = "no fw_ver in sysfs" if d.fw_ver is None else f"no rule for PSID {d.board_id}"
            out.append(error(c, f.node, p.label, f"{d.name}: {why}", evidence=ev))
            continue
        ok, want = rule.judge(d.fw_ver)
        out.append(
            judged(
                c,
                f.node,
                ok,
                p.label,
                d.fw_ver,
                want,
                f"{d.name} PSID {d.board_id} firmware {d.fw_ver}"
                + ("" if ok else f", expected {want}"),
                remediation=f"flash {d.name} (PSID {d.board_id}) to a qualified firmware ({want})",
                evidence=ev,
            )
        )
    return out or [error(c, f.node, "hca", "no RDMA device found", evidence=ev)]


def pcie_gen(check: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.pcie.gen: the HCA's current PCIe generation against its role."""
    return _pcie(check, f, prof, gen=True)


def pcie_width(check: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.pcie.width: the HCA's current PCIe width against its role."""
    return _pcie(check, f, prof, gen=False)


def _pcie(check: AnyCheck, f: HcaFacts, prof: HcaProfile, *, gen: bool) -> list[Verdict]:
    if f.sysfs is None:
        return no_sysfs(check, f)
    out = []
    for p in placements(f, prof):
        role = prof.role(p.role)
        if role is None:
            continue  # no role: hca.model fails it
        if role.pcie is None:
            why = f"{p.device.name}: PCIe link not judged (profile: {p.role} pcie null)"
            out.append(judged(check, f.node, True, p.label, None, "not judged", why))
            continue
        link = f.pci.get(p.device.name)
        cur = None if link is None else (link.gen if gen else link.width_lanes)
        cap = None if link is None else (link.max_gen if gen else link.max_width_lanes)
        if cur is None:
            why = f.errors.get(PCI) or (
                f"no PCIe link {'speed' if gen else 'width'} under {p.device.name}/device"
            )
            out.append(error(check, f.node, p.label, why, evidence=f.ev(SYSFS)))
            continue
        out.append(_pcie_verdict(check, f, p.label, p.device.name, role.pcie, cur, cap, gen))
    return out or [error(check, f.node, "hca", "no HCA with a role to judge", evidence=f.ev(SYSFS))]


def _pcie_verdict(
    check: AnyCheck,
    f: HcaFacts,
    label: str,
    dev: str,
    rule: PcieRule,
    cur: int,
    cap: int | None,
    gen: bool,
) -> Verdict:
    """`mlx5_2 PCIe x8 (capable x16), expected x16`."""
    t = rule.gen if gen else rule.width_lanes
    prefix = "Gen" if gen else "x"
    got, want = f"{prefix}{cur}", show_expected(t, lambda v: f"{prefix}{v}")
    capable = f"{prefix}{cap}" if cap else "unknown"
    ok = t.holds(cur)
    return judged(
        check,
        f.node,
        ok,
        label,
        got,
        want,
        f"{dev} PCIe {got} (capable {capable})" + ("" if ok else f", expected {want}"),
        unit=t.unit,
        reference=t,
        remediation="reseat the HCA or its riser; check the slot and BIOS PCIe settings",
        evidence=f.ev(SYSFS),
    )
