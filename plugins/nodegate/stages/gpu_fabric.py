"""pcie_gpu checks on the GPU fabric and diagnostics: NVLink, fabric manager, DCGM diag."""

from __future__ import annotations

from nodegate.model import Status, Verdict
from nodegate.parsers.dcgm import DiagResult
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.parsers.nvlink import NvlinkCondition, NvlinkGpu
from nodegate.stages.gpu_health import per_gpu
from nodegate.stages.pcie_gpu_facts import GpuNode, gpu_name

NVLINK_FIX = "reset the GPU; if links stay down, reseat the baseboard and RMA the GPU/NVSwitch tray"


def check_nvlink(n: GpuNode) -> list[Verdict]:
    """gpu.nvlink: each GPU has the profile's link count, all active at the profile's speed."""
    spec = n.prof["nvlink"]
    if spec is None:
        return [
            n.verdict(
                "gpu.nvlink",
                Status.PASS,
                "NVLink",
                "not checked",
                "none",
                "profile expects no NVLink",
                cmds=("nvlink",),
            )
        ]
    links, speed = int(spec["links_per_gpu"]), float(spec["speed_gbps"])
    want = f"{links} links active at >= {speed:g} GB/s"
    if n.nvlink is None:
        return [n.error("gpu.nvlink", "NVLink", want, "nvlink")]
    by_uuid = {g.uuid: g for g in n.nvlink.gpus}

    def one(n: GpuNode, g: NvsmiGpu) -> Verdict:
        comp = gpu_name(g)
        lg = by_uuid.get(g.uuid or "")
        if lg is None:
            return n.verdict(
                "gpu.nvlink",
                Status.ERROR,
                comp,
                None,
                want,
                "GPU not listed by nvidia-smi nvlink -s",
                cmds=("nvlink", "nvsmi"),
            )
        return _one_gpu(n, comp, lg, links, speed, want)

    return per_gpu(n, "gpu.nvlink", want, one)


def _one_gpu(n: GpuNode, comp: str, lg: NvlinkGpu, links: int, speed: float, want: str) -> Verdict:
    cmds = ("nvlink",)
    if lg.condition is NvlinkCondition.MIG_MODE_NOT_SUPPORTED:
        return n.verdict(
            "gpu.nvlink", Status.ERROR, comp, None, want, f"not queryable: {lg.message}", cmds=cmds
        )
    if lg.condition is not NvlinkCondition.REPORTED:
        return n.verdict(
            "gpu.nvlink",
            Status.FAIL,
            comp,
            "0 active",
            want,
            str(lg.message),
            cmds=cmds,
            unit="links",
            remediation=NVLINK_FIX,
        )
    down = [lk.link for lk in lg.links if not lk.active]
    slow = [lk.link for lk in lg.links if lk.active and (lk.speed_gbps or 0) < speed - 1e-6]
    active = len(lg.links) - len(down)
    problems = []
    if len(lg.links) != links:
        problems.append(f"{len(lg.links)} links listed")
    if down:
        problems.append("inactive link(s) " + ",".join(map(str, down)))
    if slow:
        problems.append("slow link(s) " + ",".join(map(str, slow)))
    got = f"{active}/{len(lg.links)} active"
    return n.verdict(
        "gpu.nvlink",
        Status.FAIL if problems else Status.PASS,
        comp,
        got,
        want,
        "; ".join(problems) if problems else f"{active} links active",
        cmds=cmds,
        unit="links",
        remediation=NVLINK_FIX,
    )


def check_fabric(n: GpuNode) -> list[Verdict]:
    """gpu.fabric: fabric manager running, every GPU's fabric state Completed/Success."""
    if not n.prof["fabric"]["manager"]:
        return [
            n.verdict(
                "gpu.fabric",
                Status.PASS,
                "nvidia-fabricmanager",
                "not required",
                "not required",
                "profile: no NVSwitch fabric",
                cmds=(),
            )
        ]
    out: list[Verdict] = []
    comp = "nvidia-fabricmanager"
    if n.fm is None:
        out.append(n.error("gpu.fabric", comp, "active (running)", "fabricmanager"))
    else:
        got = f"{n.fm.active_state or n.fm.load_state} ({n.fm.sub_state or n.fm.result or '-'})"
        ok = n.fm.active_state == "active" and n.fm.sub_state == "running"
        out.append(
            n.verdict(
                "gpu.fabric",
                Status.PASS if ok else Status.FAIL,
                comp,
                got,
                "active (running)",
                f"{n.fm.unit} {got}",
                cmds=("fabricmanager",),
                remediation="start the fabric manager (systemctl enable --now "
                "nvidia-fabricmanager); check its log if it does not stay up",
            )
        )

    def one(n: GpuNode, g: NvsmiGpu) -> Verdict:
        fab = g.fabric
        if fab is None or fab.state is None:
            return n.verdict(
                "gpu.fabric",
                Status.ERROR,
                gpu_name(g),
                None,
                "Completed/Success",
                "no Fabric state (N/A): no NVSwitch fabric seen by the driver, or driver too old",
                cmds=("nvsmi",),
            )
        got = f"{fab.state}/{fab.status}"
        ok = fab.state == "Completed" and fab.status == "Success"
        return n.verdict(
            "gpu.fabric",
            Status.PASS if ok else Status.FAIL,
            gpu_name(g),
            got,
            "Completed/Success",
            f"fabric {got}",
            cmds=("nvsmi",),
            remediation="restart nvidia-fabricmanager, then reset the GPUs; "
            "check NVSwitch health (SXid) if it does not complete",
        )

    return out + per_gpu(n, "gpu.fabric", "Completed/Success", one)


def check_dcgm(n: GpuNode) -> list[Verdict]:
    """gpu.dcgm: `dcgmi diag -r <level>` passes every test on every GPU."""
    spec = n.prof["dcgm"]
    level = int(spec["level"])
    want = f"diag -r {level}: every test Pass or Skip"
    if n.dcgm is None:
        if n.facts.absent("dcgm") and not spec["required"]:
            return [
                n.verdict(
                    "gpu.dcgm",
                    Status.PASS,
                    "dcgmi",
                    "not installed",
                    "optional",
                    "dcgmi not installed; profile does not require it",
                    cmds=("dcgm",),
                )
            ]
        return [n.error("gpu.dcgm", "dcgmi diag", want, "dcgm")]
    allowed = {DiagResult.PASS, DiagResult.SKIP} | (
        {DiagResult.WARN} if spec["allow_warn"] else set()
    )
    out: list[Verdict] = []
    # DCGM numbers GPUs in NVML order, which is nvidia-smi's order.
    names = {i: gpu_name(g) for i, g in enumerate(n.gpus)}
    per: dict[int, list[str]] = {}
    bad: dict[int, list[str]] = {}
    for t in n.dcgm.tests:
        for e in t.entities:
            if e.entity_group != "GPU":
                continue
            per.setdefault(e.entity_id, []).append(f"{t.name} {e.result.value}")
            if e.result not in allowed:
                msgs = [w.text for w in t.warnings if w.entity_id in (e.entity_id, None)]
                bad.setdefault(e.entity_id, []).append(
                    f"{t.name} {e.result.value}" + (f": {msgs[0]}" if msgs else "")
                )
        if not t.entities and t.result not in allowed:
            bad.setdefault(-1, []).append(f"{t.name} {t.result_raw}")
    for gid in sorted(set(per) | set(bad)):
        comp = names.get(gid, f"DCGM GPU {gid}") if gid >= 0 else "dcgmi diag"
        fails = bad.get(gid, [])
        out.append(
            n.verdict(
                "gpu.dcgm",
                Status.FAIL if fails else Status.PASS,
                comp,
                "; ".join(fails) or "Pass",
                want,
                "; ".join(fails or per.get(gid, [])),
                cmds=("dcgm",),
                remediation="run `dcgmi diag -r 3` on the node; drain and RMA the GPU "
                "if the failure repeats",
            )
        )
    if not out:
        out.append(
            n.verdict(
                "gpu.dcgm",
                Status.ERROR,
                "dcgmi diag",
                None,
                want,
                "diag reported no per-GPU result",
                cmds=("dcgm",),
            )
        )
    return out
