"""Checks of the `hca` stage on HCAs as parts: count, model, firmware, PCIe link, GPUDirect RDMA,
rail affinity. Pure functions (HcaFacts, profile section) -> verdicts; ports: hca_ports.

Each returns at least one verdict for the node; what it cannot judge is an ERROR.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodegate.model import Verdict
from nodegate.stages.hca_facts import (
    DRIVER,
    KERNEL,
    NO_DEVICES,
    PCI,
    PEERMEM,
    SYSFS,
    TOPO,
    HcaFacts,
    device_label,
    error,
    firmware_rule,
    matches,
    pci_id,
    placements,
    role_spec,
    verdict,
)
from nodegate.versions import check_version

Prof = Mapping[str, Any]


def no_sysfs(check: str, f: HcaFacts) -> list[Verdict]:
    why = f.errors.get(SYSFS, "no /sys/class/infiniband listing")
    return [error(check, f, "hca", why, f.ev(SYSFS))]


def count(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.count: every rail HCA present; each other role has its exact count."""
    c = "hca.count"
    if f.sysfs is None and f.errors.get(SYSFS, "").startswith(NO_DEVICES):
        want = len(prof["rails"])
        msg, fix = f.errors[SYSFS], "check that the HCAs are seated and mlx5_core is loaded"
        return [verdict(c, f, False, "compute rails", 0, want, msg, remediation=fix)]
    if f.sysfs is None:
        return no_sysfs(c, f)
    ev = f.ev(SYSFS)
    present = {d.name for d in f.sysfs.devices}
    rails = prof["rails"]
    missing = [device_label(r["device"], r, "compute") for r in rails if r["device"] not in present]
    n_ok = len(rails) - len(missing)
    msg = f"{n_ok}/{len(rails)} rail HCAs present" + (
        f"; missing {', '.join(missing)}" if missing else ""
    )
    out = [
        verdict(
            c,
            f,
            not missing,
            "compute rails",
            n_ok,
            len(rails),
            msg,
            unit="HCAs",
            remediation="reseat or replace the missing HCA; check it in `lspci` and `dmesg`",
            evidence=ev,
        )
    ]
    by_role: dict[str, list[str]] = {}
    for p in placements(f, prof):
        if p.role is not None and p.role != "compute":
            by_role.setdefault(p.role, []).append(p.device.name)
    for role, spec in prof["roles"].items():
        if role == "compute":
            continue
        got = by_role.get(role, [])
        names = ", ".join(got) if got else "none"
        rule = spec["count"]
        shown: int | str = rule if isinstance(rule, int) else f"{rule['min']}..{rule['max']}"
        ok = len(got) == rule if isinstance(rule, int) else rule["min"] <= len(got) <= rule["max"]
        out.append(
            verdict(
                c,
                f,
                ok,
                f"{role} HCAs",
                len(got),
                shown,
                f"{len(got)} {role} HCAs ({names}), expected {shown}",
                unit="HCAs",
                remediation=f"install or reseat the {role} HCAs the profile lists",
                evidence=ev,
            )
        )
    return out


def model(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.model: each HCA's PCI id and PSID belong to its role."""
    c = "hca.model"
    if f.sysfs is None:
        return no_sysfs(c, f)
    ev = f.ev(SYSFS)
    out = []
    for p in placements(f, prof):
        pci, psid = pci_id(f, p.device.name), p.device.board_id
        got = f"pci {pci or 'unknown'}, PSID {psid or 'unknown'}"
        if p.role is None:
            out.append(
                verdict(
                    c,
                    f,
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
        spec = prof["roles"]["compute"] if p.role == "compute" else role_spec(prof, p.role)
        assert spec is not None
        want = f"pci {'|'.join(spec['pci_ids'])}, PSID {'|'.join(spec['psids'])}"
        if pci is None or psid is None:
            out.append(error(c, f, p.label, f"{p.device.name}: {got} in sysfs", ev))
            continue
        ok = matches(spec, pci, psid)
        out.append(
            verdict(
                c,
                f,
                ok,
                p.label,
                got,
                want,
                f"{p.device.name} {got}" + ("" if ok else f", expected {want}"),
                remediation="install the HCA model (PCI id and PSID) the profile lists",
                evidence=ev,
            )
        )
    return out or [error(c, f, "hca", "no RDMA device found", ev)]


def firmware(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.firmware.version: each HCA's firmware against the rule for its PSID."""
    c = "hca.firmware.version"
    if f.sysfs is None:
        return no_sysfs(c, f)
    ev = f.ev(SYSFS)
    out = []
    for p in placements(f, prof):
        d = p.device
        rule = firmware_rule(prof, d.board_id)
        if d.fw_ver is None or rule is None:
            why = "no fw_ver in sysfs" if d.fw_ver is None else f"no rule for PSID {d.board_id}"
            out.append(error(c, f, p.label, f"{d.name}: {why}", ev))
            continue
        ok, want = check_version(d.fw_ver, rule)
        out.append(
            verdict(
                c,
                f,
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
    return out or [error(c, f, "hca", "no RDMA device found", ev)]


def pcie(check: str, f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.pcie.gen / hca.pcie.width: the HCA's current PCIe link against its role."""
    if f.sysfs is None:
        return no_sysfs(check, f)
    gen = check == "hca.pcie.gen"
    out = []
    for p in placements(f, prof):
        spec = role_spec(prof, p.role)
        if spec is None:
            continue  # no role: hca.model fails it
        if spec["pcie"] is None:
            why = f"{p.device.name}: PCIe link not judged (profile: {p.role} pcie null)"
            out.append(verdict(check, f, True, p.label, None, "not judged", why))
            continue
        link = f.pci.get(p.device.name)
        cur = None if link is None else (link.gen if gen else link.width_lanes)
        cap = None if link is None else (link.max_gen if gen else link.max_width_lanes)
        if cur is None:
            why = f.errors.get(PCI) or (
                f"no PCIe link {'speed' if gen else 'width'} under {p.device.name}/device"
            )
            out.append(error(check, f, p.label, why, f.ev(SYSFS)))
            continue
        want = spec["pcie"]["gen" if gen else "width_lanes"]
        shown, exp = (f"Gen{cur}", f"Gen{want}") if gen else (f"x{cur}", f"x{want}")
        capable = f"Gen{cap}" if gen else f"x{cap}"
        ok = cur == want
        out.append(
            verdict(
                check,
                f,
                ok,
                p.label,
                shown,
                exp,
                f"{p.device.name} PCIe {shown} (capable {capable if cap else 'unknown'})"
                + ("" if ok else f", expected {exp}"),
                remediation="reseat the HCA or its riser; check the slot and BIOS PCIe settings",
                evidence=f.ev(SYSFS),
            )
        )
    return out or [error(check, f, "hca", "no HCA with a role to judge", f.ev(SYSFS))]


def gpudirect(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.gpudirect: nvidia_peermem loaded, or DMA-BUF possible (open module, kernel)."""
    c = "hca.gpudirect"
    spec = prof["gpudirect"]
    accept = spec["accept"]
    ev = f.ev(PEERMEM, DRIVER, KERNEL)
    ways = []
    if "peermem" in accept and f.peermem_live:
        ways.append("nvidia_peermem loaded")
    new_kernel = (
        f.kernel is not None and check_version(f.kernel, {"min": spec["dmabuf_min_kernel"]})[0]
    )
    if "dmabuf" in accept and f.driver_open_module and new_kernel:
        ways.append(f"DMA-BUF (open kernel module, kernel {f.kernel})")
    want = " or ".join(
        {"peermem": "nvidia_peermem loaded", "dmabuf": "DMA-BUF support"}[a] for a in accept
    )
    if ways:
        return [verdict(c, f, True, "GPUDirect RDMA", ways[0], want, "; ".join(ways), evidence=ev)]
    # Fail closed, but say which input could not be read.
    unknown = [
        f.errors[k]
        for k in (PEERMEM, DRIVER, KERNEL)
        if k in f.errors and not f.errors[k].startswith("absent:")
    ]
    if unknown:
        return [error(c, f, "GPUDirect RDMA", "; ".join(unknown), ev)]
    got = "nvidia_peermem not loaded" + (
        "" if "dmabuf" not in accept else ", no DMA-BUF (needs the open kernel module)"
    )
    return [
        verdict(
            c,
            f,
            False,
            "GPUDirect RDMA",
            got,
            want,
            f"GPUDirect RDMA not available: {got}",
            remediation="modprobe nvidia_peermem (and enable it at boot)",
            evidence=ev,
        )
    ]


def affinity(f: HcaFacts, prof: Prof) -> list[Verdict]:
    """hca.rail.affinity: rail HCA i shares a PCIe switch with its GPU and sits on its NUMA node."""
    c = "hca.rail.affinity"
    ev = f.ev(TOPO, SYSFS)
    if f.topo is None:
        return [error(c, f, "topology", f.errors.get(TOPO, "no topo -m"), ev)]
    kinds = prof["affinity"]["relations"]
    nic_of = {name: nic for nic, name in f.topo.nic_names.items()}
    rows = {row.device: row for row in f.topo.rows}
    out = []
    for r in prof["rails"]:
        dev, gpu = r["device"], r["gpu"]
        lbl = device_label(dev, r, "compute")
        nic = nic_of.get(dev, dev if dev in rows else None)
        row = rows.get(nic) if nic is not None else None
        rel = None if row is None else row.links.get(gpu)
        link = f.pci.get(dev)
        numa = None if link is None else link.numa_node
        if rel is None:
            out.append(error(c, f, lbl, f"{dev} or {gpu} not in nvidia-smi topo -m", ev))
            continue
        want_numa = r["numa_node"]
        if numa is None and want_numa is not None:
            why = f.errors.get(SYSFS) or f.errors.get(PCI) or f"{dev}/device/numa_node unknown"
            out.append(error(c, f, lbl, f"no NUMA node for {dev}: {why}", ev))
            continue
        ok = rel in kinds and (want_numa is None or numa == want_numa)
        got = f"{rel} to {gpu}" + ("" if want_numa is None else f", NUMA {numa}")
        exp = f"{'|'.join(kinds)} to {gpu}" + ("" if want_numa is None else f", NUMA {want_numa}")
        out.append(
            verdict(
                c,
                f,
                ok,
                lbl,
                got,
                exp,
                f"{dev}: {got}" + ("" if ok else f", expected {exp}"),
                remediation="fix the rail map (NCCL_IB_HCA) or move the HCA to its GPU's switch",
                evidence=ev,
            )
        )
    return out
