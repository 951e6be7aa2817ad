"""The `hca` stage's check table, in report order, and its node-wide and fleet checks:
GPUDirect RDMA, rail affinity, firmware uniformity. Parts: checks_parts; ports: checks_ports.
"""

from __future__ import annotations

from collections.abc import Mapping

from nodegate.core.checks import AnyCheck, Chart, Check, CheckTable
from nodegate.core.majority import Majority
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.stages.hca import checks_parts as parts
from nodegate.stages.hca import checks_ports as ports
from nodegate.stages.hca.commands import DRIVER, KERNEL, PCI, PEERMEM, SYSFS, TOPO
from nodegate.stages.hca.facts import HcaFacts
from nodegate.stages.hca.placement import Placement, placements, rail_label
from nodegate.stages.hca.profile import HcaProfile

_WAYS = {"peermem": "nvidia_peermem loaded", "dmabuf": "DMA-BUF support"}


def gpudirect(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.gpudirect: nvidia_peermem loaded, or DMA-BUF possible (open module, kernel)."""
    rule = prof.gpudirect
    ev = f.ev(PEERMEM, DRIVER, KERNEL)
    ways = []
    if rule.accept.holds("peermem") and f.peermem_live:
        ways.append("nvidia_peermem loaded")
    new_kernel = f.kernel is not None and rule.dmabuf_kernel.judge(f.kernel)[0]
    if rule.accept.holds("dmabuf") and f.driver_open_module and new_kernel:
        ways.append(f"DMA-BUF (open kernel module, kernel {f.kernel})")
    want = " or ".join(_WAYS[a] for a in rule.accept.value)
    if ways:
        return [
            judged(c, f.node, True, "GPUDirect RDMA", ways[0], want, "; ".join(ways), evidence=ev)
        ]
    # Fail closed, but say which input could not be read.
    unknown = [
        f.errors[k]
        for k in (PEERMEM, DRIVER, KERNEL)
        if k in f.errors and not f.errors[k].startswith("absent:")
    ]
    if unknown:
        return [error(c, f.node, "GPUDirect RDMA", "; ".join(unknown), evidence=ev)]
    got = "nvidia_peermem not loaded" + (
        ", no DMA-BUF (needs the open kernel module)" if rule.accept.holds("dmabuf") else ""
    )
    return [
        judged(
            c,
            f.node,
            False,
            "GPUDirect RDMA",
            got,
            want,
            f"GPUDirect RDMA not available: {got}",
            remediation="modprobe nvidia_peermem (and enable it at boot)",
            evidence=ev,
        )
    ]


def affinity(c: AnyCheck, f: HcaFacts, prof: HcaProfile) -> list[Verdict]:
    """hca.rail.affinity: rail HCA i shares a PCIe switch with its GPU and sits on its NUMA node."""
    ev = f.ev(TOPO, SYSFS)
    if f.topo is None:
        return [error(c, f.node, "topology", f.errors.get(TOPO, "no topo -m"), evidence=ev)]
    kinds = "|".join(prof.affinity.value)
    nic_of = {name: nic for nic, name in f.topo.nic_names.items()}
    rows = {row.device: row for row in f.topo.rows}
    out = []
    for r in prof.rails:
        dev, gpu, lbl = r.device, r.gpu, rail_label(r)
        nic = nic_of.get(dev, dev if dev in rows else None)
        row = rows.get(nic) if nic is not None else None
        rel = None if row is None else row.links.get(gpu)
        link = f.pci.get(dev)
        numa = None if link is None else link.numa_node
        if rel is None:
            out.append(
                error(c, f.node, lbl, f"{dev} or {gpu} not in nvidia-smi topo -m", evidence=ev)
            )
            continue
        if numa is None and r.numa is not None:
            why = f.errors.get(SYSFS) or f.errors.get(PCI) or f"{dev}/device/numa_node unknown"
            out.append(error(c, f.node, lbl, f"no NUMA node for {dev}: {why}", evidence=ev))
            continue
        ok = prof.affinity.holds(rel) and (r.numa is None or r.numa.holds(numa))
        got = f"{rel} to {gpu}" + ("" if r.numa is None else f", NUMA {numa}")
        exp = f"{kinds} to {gpu}" + ("" if r.numa is None else f", NUMA {r.numa_node}")
        out.append(
            judged(
                c,
                f.node,
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


def firmware_uniform(
    c: AnyCheck, facts: Mapping[str, HcaFacts], profiles: Mapping[str, HcaProfile]
) -> list[Verdict]:
    """hca.firmware.uniform: each HCA's firmware = the majority of its PSID in the fleet
    (same profile); the message carries the fleet's histogram."""
    mine = {n: placements(f, profiles[n]) for n, f in facts.items()}
    seen: dict[tuple[str, str], list[str]] = {}
    for n, ps in mine.items():
        for p in ps:
            if p.device.board_id and p.device.fw_ver:
                seen.setdefault((profiles[n].name, p.device.board_id), []).append(p.device.fw_ver)
    fleet = {key: Majority.of(versions) for key, versions in seen.items()}
    out: list[Verdict] = []
    for n, f in facts.items():
        prof, ev = profiles[n], f.ev(SYSFS)
        if f.sysfs is None:
            out.append(error(c, n, "hca", f.errors.get(SYSFS, "no sysfs listing"), evidence=ev))
        elif not prof.uniform_firmware:
            why = f"profile {prof.name} does not require it"
            out.append(judged(c, n, True, "hca", None, "not required", why, evidence=ev))
        elif not mine[n]:
            out.append(error(c, n, "hca", "no RDMA device found", evidence=ev))
        else:
            out += [_uniform(c, n, p, prof.name, fleet, ev) for p in mine[n]]
    return out


def _uniform(
    c: AnyCheck,
    node: str,
    p: Placement,
    profile: str,
    fleet: Mapping[tuple[str, str], Majority],
    ev: tuple[str, ...],
) -> Verdict:
    """One HCA against its PSID's fleet majority (a tie is no majority: a failure)."""
    d = p.device
    if not (d.board_id and d.fw_ver):
        return error(c, node, p.label, f"{d.name}: no PSID or firmware in sysfs", evidence=ev)
    m = fleet[(profile, d.board_id)]
    ok = m.agrees(d.fw_ver)
    why = "no fleet majority" if m.top is None else f"fleet runs {m.top}"
    return judged(
        c,
        node,
        ok,
        p.label,
        d.fw_ver,
        "fleet majority" if m.top is None else m.top,
        f"{d.name} firmware {d.fw_ver}"
        + ("" if ok else f" differs ({why})")
        + f"; fleet PSID {d.board_id}: {m.histogram(fmt='{value} x{n}')}",
        remediation=f"flash {d.name} to the fleet's firmware",
        evidence=ev,
    )


CHECKS: CheckTable[HcaFacts, HcaProfile] = CheckTable(
    "hca",
    [
        Check("hca.count", "every rail HCA is present; other roles (storage, front-end) have "
              "their count", parts.count, "HCA role", "test_hca_count"),
        Check("hca.model", "each HCA's PCI id and PSID belong to its role", parts.model, "HCA",
              "test_hca_model"),
        Check("hca.firmware.version", "each HCA's firmware meets the profile's rule for its PSID",
              parts.firmware, "HCA", "test_hca_firmware_version"),
        Check("hca.firmware.uniform", "each HCA runs its PSID's fleet majority firmware",
              firmware_uniform, "HCA", "test_hca_firmware_uniform", "fleet"),
        Check("hca.port.state", "every rail port is ACTIVE and LinkUp", ports.port_state,
              "HCA port", "test_hca_port_state"),
        Check("hca.port.width", "every rail port runs the profile's link width (4X)",
              ports.port_width, "HCA port", "test_hca_port_width"),
        Check("hca.port.speed", "every rail port runs the profile's link speed (NDR)",
              ports.port_speed, "HCA port", "test_hca_port_speed"),
        Check("hca.port.rate", "every rail port runs the profile's link rate (400 Gb/s)",
              ports.port_rate, "HCA port", "test_hca_port_rate", chart=Chart(6)),
        Check("hca.port.link_layer", "every rail port has the profile's link layer "
              "(InfiniBand/Ethernet)", ports.link_layer, "HCA port", "test_hca_port_link_layer"),
        Check("hca.pcie.gen", "each HCA's PCIe link runs its role's generation", parts.pcie_gen,
              "HCA", "test_hca_pcie_gen"),
        Check("hca.pcie.width", "each HCA's PCIe link runs its role's width", parts.pcie_width,
              "HCA", "test_hca_pcie_width", chart=Chart(4)),
        Check("hca.counters.errors", "no error counter of a rail port rises over the profile's "
              "window", ports.counters, "HCA port", "test_hca_error_counters"),
        Check("hca.link.ber", "mlxlink effective/raw BER and transceiver fault flags of each "
              "rail port", ports.link_health, "HCA port", "test_hca_link_ber"),
        Check("hca.gpudirect", "GPUDirect RDMA is ready (nvidia_peermem or DMA-BUF, per "
              "profile)", gpudirect, "node", "test_hca_gpudirect"),
        Check("hca.rail.affinity", "each rail HCA sits on its GPU's PCIe switch and NUMA node",
              affinity, "rail HCA", "test_hca_rail_affinity"),
    ],
)  # fmt: skip
