"""pcie_gpu checks on the GPU fabric and diagnostics: NVLink, fabric manager, DCGM diag."""

from __future__ import annotations

from nodegate.core.checks import AnyCheck
from nodegate.core.values import Verdict
from nodegate.core.verdicts import error, judged
from nodegate.parsers.dcgm import DcgmDiag, DiagResult
from nodegate.parsers.gpu_facts import NvsmiGpu
from nodegate.parsers.nvlink import NvlinkCondition, NvlinkGpu
from nodegate.stages.pcie_gpu.commands import DCGM, FABRICMANAGER, NVLINK, NVSMI
from nodegate.stages.pcie_gpu.facts import PcieGpuFacts
from nodegate.stages.pcie_gpu.judging import cmd_error, gpu_name, per_gpu
from nodegate.stages.pcie_gpu.profile import NvlinkSpec, PcieGpuProfile

NVLINK_FIX = "reset the GPU; if links stay down, reseat the baseboard and RMA the GPU/NVSwitch tray"
# nvidia-smi prints link speeds rounded to 3 decimals: a link at the profile's speed may print
# a hair below it.
SPEED_SLACK_GBPS = 1e-6
FM_FIX = (
    "start the fabric manager (systemctl enable --now nvidia-fabricmanager); "
    "check its log if it does not stay up"
)
FABRIC_OK = "Completed/Success"
FABRIC_NOT_EXPOSED = "N/A (no per-GPU fabric state before Hopper)"
DCGM_FIX = "run `dcgmi diag -r 3` on the node; drain and RMA the GPU if the failure repeats"


def check_nvlink(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.nvlink: each GPU has the profile's link count, all active at the profile's speed."""
    spec = p.nvlink
    if spec is None:
        return [
            judged(
                check,
                f.node,
                True,
                "NVLink",
                "not checked",
                "none",
                "profile expects no NVLink",
                evidence=f.evidence(NVLINK),
            )
        ]
    want = f"{spec.links_per_gpu.value} links active at {spec.speed.describe()}"
    if f.nvlink is None:
        return [cmd_error(f, check, "NVLink", want, NVLINK)]
    by_uuid = {g.uuid: g for g in f.nvlink.gpus}

    def one(g: NvsmiGpu) -> Verdict:
        lg = by_uuid.get(g.uuid or "")
        if lg is None:
            return error(
                check,
                f.node,
                gpu_name(g),
                "GPU not listed by nvidia-smi nvlink -s",
                expected=want,
                evidence=f.evidence(NVLINK, NVSMI),
            )
        return _nvlink_gpu(check, f, gpu_name(g), lg, spec, want)

    return per_gpu(f, check, want, one)


def _nvlink_gpu(
    check: AnyCheck, f: PcieGpuFacts, comp: str, lg: NvlinkGpu, spec: NvlinkSpec, want: str
) -> Verdict:
    ev = f.evidence(NVLINK)
    if lg.condition is NvlinkCondition.MIG_MODE_NOT_SUPPORTED:
        return error(
            check, f.node, comp, f"not queryable: {lg.message}", expected=want, evidence=ev
        )
    if lg.condition is not NvlinkCondition.REPORTED:
        return judged(
            check,
            f.node,
            False,
            comp,
            "0 active",
            want,
            str(lg.message),
            unit="links",
            remediation=NVLINK_FIX,
            evidence=ev,
        )
    down = [lk.link for lk in lg.links if not lk.active]
    slow = [
        lk.link
        for lk in lg.links
        if lk.active and not spec.speed.holds((lk.speed_gbps or 0) + SPEED_SLACK_GBPS)
    ]
    active = len(lg.links) - len(down)
    problems = []
    if not spec.links_per_gpu.holds(len(lg.links)):
        problems.append(f"{len(lg.links)} links listed")
    if down:
        problems.append("inactive link(s) " + ",".join(map(str, down)))
    if slow:
        problems.append("slow link(s) " + ",".join(map(str, slow)))
    return judged(
        check,
        f.node,
        not problems,
        comp,
        f"{active}/{len(lg.links)} active",
        want,
        "; ".join(problems) if problems else f"{active} links active",
        unit="links",
        remediation=NVLINK_FIX,
        evidence=ev,
    )


def check_fabric(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.fabric: fabric manager running, every GPU's fabric state Completed/Success."""
    comp = "nvidia-fabricmanager"
    if not p.fabric_manager:
        msg = "profile: no NVSwitch fabric"
        return [judged(check, f.node, True, comp, "not required", "not required", msg)]
    out: list[Verdict] = []
    if f.fm is None:
        out.append(cmd_error(f, check, comp, "active (running)", FABRICMANAGER))
    else:
        fm = f.fm
        got = f"{fm.active_state or fm.load_state} ({fm.sub_state or fm.result or '-'})"
        ok = fm.active_state == "active" and fm.sub_state == "running"
        out.append(
            judged(
                check,
                f.node,
                ok,
                comp,
                got,
                "active (running)",
                f"{fm.unit} {got}",
                remediation=FM_FIX,
                evidence=f.evidence(FABRICMANAGER),
            )
        )
    ev = f.evidence(NVSMI)

    def one(g: NvsmiGpu) -> Verdict:
        fab = g.fabric
        if (fab is None or fab.state is None) and not p.fabric_per_gpu_state:
            # Before Hopper the GPU has no fabric probe: N/A is all it can say. The fabric
            # manager above and gpu.nvlink judge its fabric.
            return judged(
                check,
                f.node,
                True,
                gpu_name(g),
                "N/A",
                FABRIC_NOT_EXPOSED,
                "no per-GPU fabric state on this GPU generation (profile: per_gpu_state false)",
                evidence=ev,
            )
        if fab is None or fab.state is None:
            why = "no Fabric state (N/A): no NVSwitch fabric seen by the driver, or driver too old"
            return error(check, f.node, gpu_name(g), why, expected=FABRIC_OK, evidence=ev)
        got = f"{fab.state}/{fab.status}"
        return judged(
            check,
            f.node,
            fab.state == "Completed" and fab.status == "Success",
            gpu_name(g),
            got,
            FABRIC_OK,
            f"fabric {got}",
            remediation="restart nvidia-fabricmanager, then reset the GPUs; "
            "check NVSwitch health (SXid) if it does not complete",
            evidence=ev,
        )

    want = FABRIC_OK if p.fabric_per_gpu_state else FABRIC_NOT_EXPOSED
    return out + per_gpu(f, check, want, one)


def check_dcgm(check: AnyCheck, f: PcieGpuFacts, p: PcieGpuProfile) -> list[Verdict]:
    """gpu.dcgm: `dcgmi diag -r <level>` passes every test on every GPU."""
    want = f"diag -r {p.dcgm.level}: every test Pass or Skip"
    ev = f.evidence(DCGM)
    if f.dcgm is None:
        if f.absent(DCGM) and not p.dcgm.required:
            return [
                judged(
                    check,
                    f.node,
                    True,
                    "dcgmi",
                    "not installed",
                    "optional",
                    "dcgmi not installed; profile does not require it",
                    evidence=ev,
                )
            ]
        return [cmd_error(f, check, "dcgmi diag", want, DCGM)]
    allowed = {DiagResult.PASS, DiagResult.SKIP} | (
        {DiagResult.WARN} if p.dcgm.allow_warn else set()
    )
    # DCGM numbers the GPUs of its run 0..n-1, one per device id it detected.
    run_gpus = tuple(range(len(f.dcgm.gpu_device_ids) or len(f.gpus)))
    per, bad = _dcgm_results(f.dcgm, allowed, run_gpus)
    # DCGM numbers GPUs in NVML order, which is nvidia-smi's order.
    names = {i: gpu_name(g) for i, g in enumerate(f.gpus)}
    out = [
        judged(
            check,
            f.node,
            not bad.get(gid),
            names.get(gid, f"DCGM GPU {gid}") if gid >= 0 else "dcgmi diag",
            "; ".join(bad.get(gid, [])) or "Pass",
            want,
            "; ".join(bad.get(gid, []) or per.get(gid, [])),
            remediation=DCGM_FIX,
            evidence=ev,
        )
        for gid in sorted(set(per) | set(bad))
    ]
    if not out:
        why = "diag reported no per-GPU result"
        return [error(check, f.node, "dcgmi diag", why, expected=want, evidence=ev)]
    if not bad and f.dcgm_rc not in (0, None):
        # dcgmi exits 226 (DCGM_ST_NVVS_ERROR) when a test fails; an exit that nothing in the
        # document explains is a run that did not end cleanly: never a pass.
        why = f"dcgmi exited {f.dcgm_rc} but no test in its diag document failed"
        out.append(error(check, f.node, "dcgmi diag", why, expected=want, evidence=ev))
    return out


def _dcgm_results(
    diag: DcgmDiag, allowed: set[DiagResult], run_gpus: tuple[int, ...]
) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """(every result per DCGM GPU id, the failing ones); id -1: a test without entities when
    the run's GPUs are not known."""
    per: dict[int, list[str]] = {}
    bad: dict[int, list[str]] = {}
    for t in diag.tests:
        gpu_failed = False
        rows = [(e.entity_id, e.result) for e in t.entities if e.entity_group == "GPU"]
        if not t.entities:
            # DCGM 3.x tables print one result for the whole run, `Pass - All` or a bare
            # `Pass` (corpus: dcgmi-diag-r1__v100..., -r2__a100...): every GPU's result.
            rows = [(gid, t.result) for gid in run_gpus]
        for gid, res in rows:
            per.setdefault(gid, []).append(f"{t.name} {res.value}")
            if res not in allowed:
                gpu_failed = True
                msgs = [w.text for w in t.warnings if w.entity_id in (gid, None)]
                bad.setdefault(gid, []).append(
                    f"{t.name} {res.value}" + (f": {msgs[0]}" if msgs else "")
                )
        # DCGM 4.x can fail a test while every GPU row says Pass (an error inside the test:
        # "There was an internal error during the test", NVIDIA/DCGM#254): the test's own
        # result counts too.
        if t.result not in allowed and not gpu_failed:
            msgs = [w.text for w in t.warnings if w.entity_group != "GPU"]
            bad.setdefault(-1, []).append(
                f"{t.name} {t.result_raw}" + (f": {msgs[0]}" if msgs else "")
            )
    return per, bad
