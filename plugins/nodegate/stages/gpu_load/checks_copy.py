"""gpu_load checks on nvbandwidth copies: host->device, device->host, device<->device, local
(HBM) copy bandwidth per GPU against the profile's floor per testcase.

Host<->device: a GPU below its floor and far below its peers' median (the profile's
`peer_ratio`) while its PCIe link passed pcie_gpu (a node in gpu_load passed it) is named with
its placement: a passthrough on the wrong root port, ACS/ATS redirecting peer traffic, a host
buffer on the far NUMA node. Every GPU below the floor alike is the host's fault (IOMMU, BIOS,
NUMA binding), named as such.
"""

from __future__ import annotations

import statistics

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Status, Verdict
from nodegate.core.verdicts import error, judged
from nodegate.parsers.nvbandwidth import NvbMatrix
from nodegate.stages.gpu_load.commands import NVBANDWIDTH
from nodegate.stages.gpu_load.profile import D2D, D2H, H2D, LOCAL, GpuLoadProfile
from nodegate.stages.gpu_load.reading import Gpu, LoadFacts

HOST = "host PCIe (every GPU)"
NOT_AT_LEVEL = "not selected by gpu_load.run at this run's level"


def not_at_level(check: AnyCheck, node: str, what: str) -> list[Verdict]:
    """A check the run's level leaves out: it passes as not part of this level (as a null
    section is not applicable); admission.json says which level ran."""
    return [
        Verdict(
            check.id,
            node,
            Status.PASS,
            "node",
            None,
            NOT_AT_LEVEL,
            message=f"{what}: not run at this level",
        )
    ]


def _matrix(check: AnyCheck, f: LoadFacts, testcase: str) -> tuple[NvbMatrix | None, list[Verdict]]:
    ev = f.evidence(NVBANDWIDTH)
    if f.nvbandwidth is None:
        return None, [error(check, f.node, "node", f.why(NVBANDWIDTH), evidence=ev)]
    tc = f.nvbandwidth.testcase(testcase)
    if tc is None:
        why = f"nvbandwidth printed no result for {testcase}"
        return None, [error(check, f.node, "node", why, evidence=ev)]
    if tc.matrix is None:
        why = f"nvbandwidth {testcase}: {tc.status}" + (f": {tc.message}" if tc.message else "")
        return None, [error(check, f.node, "node", why, evidence=ev)]
    return tc.matrix, []


def _gpus(f: LoadFacts, m: NvbMatrix) -> list[Gpu]:
    """The GPUs the sampler named, else the matrix's columns."""
    if f.gpus:
        return list(f.gpus)
    return [f.gpu(int(c)) for c in m.columns if c.isdigit()]


def host_copy(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile, testcase: str) -> list[Verdict]:
    """One row (CPU) by one column per GPU: each GPU against the floor, and its peers."""
    if testcase not in p.run.testcases:
        return not_at_level(check, f.node, testcase)
    m, errs = _matrix(check, f, testcase)
    if m is None:
        return errs
    floor, ev = p.floors[testcase], f.evidence(NVBANDWIDTH)
    values: dict[int, float | None] = {}
    for g in _gpus(f, m):
        col = str(g.index)
        values[g.index] = m.cell(m.rows[0], col) if col in m.columns and m.rows else None
    measured = [v for v in values.values() if v is not None]
    low = [i for i, v in values.items() if not floor.holds(v)]
    every = bool(measured) and len(low) == len(values) and len(values) > 1
    slow_numa = _slow_numa_nodes(f, values, set(low)) if not every else {}
    out = []
    for g in _gpus(f, m):
        v = values[g.index]
        if v is None:
            out.append(
                error(
                    check,
                    f.node,
                    g.name,
                    f"{testcase}: no value for GPU{g.index}",
                    expected=floor.expected(),
                    unit=floor.unit,
                    evidence=ev,
                )
            )
            continue
        peers = [x for i, x in values.items() if i != g.index and x is not None]
        median = statistics.median(peers) if peers else None
        ok = floor.holds(v)
        msg, hint, cls = f"{testcase}: {v:g} GB/s", None, None
        if median is not None:
            msg += f" (peers' median {median:g} GB/s)"
        numa = f.placement(g.index)[0]
        comp = HOST if (every and not ok) else g.name
        if not ok and numa in slow_numa:
            comp = f"host NUMA node {numa}"
            msg += (
                f"; every GPU of NUMA node {numa} ({slow_numa[numa]}) is below the floor while "
                "the other NUMA nodes' pass: the host side of that NUMA node"
            )
            hint = (
                f"check the host side of NUMA node {numa}: its socket's PCIe root complex and "
                "BIOS settings, the NUMA binding of the host buffers (a VM's vNUMA layout)"
            )
            cls = "fix_config"
        elif not ok and every:
            msg += "; every GPU of the node is below the floor alike: the host side"
            hint = (
                "check the host: IOMMU/ACS settings, BIOS PCIe settings, the NUMA binding "
                "of the host buffers; then requalify"
            )
            cls = "fix_config"
        elif not ok and median is not None and p.peer_ratio and v < p.peer_ratio * median:
            msg += (
                f"; far below its peers with a PCIe link pcie_gpu passed: its placement "
                f"({_placement(f, g, values)})"
            )
            hint = (
                f"check where GPU{g.index} ({g.bdf or 'bdf?'}) sits: its root port and NUMA "
                "node (nvidia-smi topo -m), a VM passthrough on the wrong root port, ACS/ATS "
                "on its switch; reseat its riser if bare metal"
            )
        elif not ok:
            hint = f"reseat GPU{g.index} and its riser/retimer; requalify"
        out.append(
            judged(
                check,
                f.node,
                ok,
                comp,
                v,
                floor.expected(),
                msg,
                unit=floor.unit,
                remediation=hint,
                evidence=ev,
                remediation_class=cls,
                reference=floor,
            )
        )
    return out


def _slow_numa_nodes(
    f: LoadFacts, values: dict[int, float | None], low: set[int]
) -> dict[int, str]:
    """NUMA node -> its GPUs, for each node of two or more GPUs all below the floor while
    GPUs of another NUMA node pass (the topology says which GPU sits where)."""
    by_numa: dict[int, list[int]] = {}
    for i in values:
        numa = f.placement(i)[0]
        if numa is not None:
            by_numa.setdefault(numa, []).append(i)
    if len(by_numa) < 2:
        return {}
    passing = {n for n, gs in by_numa.items() if any(i not in low for i in gs)}
    return {
        n: ", ".join(f"GPU{i}" for i in gs)
        for n, gs in sorted(by_numa.items())
        if len(gs) > 1 and all(i in low for i in gs) and passing - {n}
    }


def _placement(f: LoadFacts, g: Gpu, values: dict[int, float | None]) -> str:
    """`0000:5d:00.0: NUMA node 0 (CPUs 0-55), its switch shared with mlx5_3; the other GPUs
    of NUMA node 0 at 55.1 GB/s: its root port or switch, not the NUMA node`."""
    numa, cpus, nics = f.placement(g.index)
    where = g.bdf or "bdf?"
    if numa is None:
        why = f.errors.get("topology", "topology not read")
        return f"{where}: root port, NUMA node, ACS/ATS; {why}"
    text = f"{where}: NUMA node {numa} (CPUs {cpus})"
    if nics:
        text += f", its PCIe switch shared with {', '.join(nics)}"
    same = [
        v for i, v in values.items() if i != g.index and v is not None and f.placement(i)[0] == numa
    ]
    if same:
        text += (
            f"; the other GPUs of NUMA node {numa} at {statistics.median(same):g} GB/s: its root "
            "port or switch (ACS/ATS), not the NUMA node"
        )
    return text


def check_h2d(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.h2d.bandwidth: host_to_device_memcpy_ce per GPU."""
    return host_copy(check, f, p, H2D)


def check_d2h(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.d2h.bandwidth: device_to_host_memcpy_ce per GPU."""
    return host_copy(check, f, p, D2H)


def check_d2d(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.d2d.bandwidth: device_to_device_memcpy_read_ce; each GPU by the median of its
    pairs (its row and its column): one bad GPU lowers every pair it is in, so its median
    drops, while each good GPU has a single low pair (with the bad one)."""
    if D2D not in p.run.testcases:
        return not_at_level(check, f.node, D2D)
    m, errs = _matrix(check, f, D2D)
    if m is None:
        return errs
    floor, ev = p.floors[D2D], f.evidence(NVBANDWIDTH)
    out = []
    for g in _gpus(f, m):
        me = str(g.index)
        if me not in m.columns or me not in m.rows:
            out.append(
                error(
                    check,
                    f.node,
                    g.name,
                    f"{D2D}: GPU{g.index} not in the matrix",
                    expected=floor.expected(),
                    unit=floor.unit,
                    evidence=ev,
                )
            )
            continue
        pairs = {}
        for other in m.columns:
            if other == me or other not in m.rows:
                continue
            a, b = m.cell(me, other), m.cell(other, me)
            pairs[other] = [x for x in (a, b) if x is not None]
        vals = [x for xs in pairs.values() for x in xs]
        if not vals:
            out.append(
                error(
                    check,
                    f.node,
                    g.name,
                    f"{D2D}: no measured pair of GPU{g.index}",
                    expected=floor.expected(),
                    unit=floor.unit,
                    evidence=ev,
                )
            )
            continue
        med = statistics.median(vals)
        worst = sorted((min(xs), o) for o, xs in pairs.items() if xs)[:2]
        msg = f"{D2D}: median {med:g} GB/s over its {len(pairs)} peers; lowest " + ", ".join(
            f"GPU{o} {v:g}" for v, o in worst
        )
        out.append(
            judged(
                check,
                f.node,
                floor.holds(med),
                g.name,
                med,
                floor.expected(),
                msg,
                unit=floor.unit,
                evidence=ev,
                reference=floor,
                remediation=f"check GPU{g.index}'s NVLinks (nvidia-smi nvlink -s -e) and "
                "the NVSwitches; reset the GPU, then reseat",
            )
        )
    return out


def check_local(check: AnyCheck, f: LoadFacts, p: GpuLoadProfile) -> list[Verdict]:
    """gpu_load.hbm.bandwidth: device_local_copy per GPU (the GPU's own memory, HBM)."""
    if LOCAL not in p.run.testcases:
        return not_at_level(check, f.node, LOCAL)
    m, errs = _matrix(check, f, LOCAL)
    if m is None:
        return errs
    floor, ev = p.floors[LOCAL], f.evidence(NVBANDWIDTH)
    out = []
    for g in _gpus(f, m):
        col = str(g.index)
        v = m.cell(m.rows[0], col) if col in m.columns else None
        if v is None:
            out.append(
                error(
                    check,
                    f.node,
                    g.name,
                    f"{LOCAL}: no value for GPU{g.index}",
                    expected=floor.expected(),
                    unit=floor.unit,
                    evidence=ev,
                )
            )
            continue
        out.append(
            judged(
                check,
                f.node,
                floor.holds(v),
                g.name,
                v,
                floor.expected(),
                f"{LOCAL}: {v:g} GB/s",
                unit=floor.unit,
                evidence=ev,
                reference=floor,
                remediation=f"GPU{g.index}'s memory is slow: check its clocks and ECC/row "
                "remapping, reset it; an RMA if it stays slow",
            )
        )
    return out
