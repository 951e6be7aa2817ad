"""Stage `hca`: HCA count/model/PSID per role, firmware (rule and fleet uniformity), rail port
state/width/speed/rate/link layer, PCIe of each HCA, error counter deltas over a window,
GPUDirect RDMA, rail <-> GPU affinity.

One round trip per node: the script reads /sys/class/infiniband (with each device's PCI
attributes), sleeps the profile's counter window, reads the ports and counters again, then
reads `nvidia-smi topo -m`, the nvidia_peermem module state, the NVIDIA driver, the kernel and
`mlxlink` of each rail HCA (BER, module flags).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from nodegate.errors import ParseError
from nodegate.inventory import Node
from nodegate.model import CommandResult, CommandSpec, NodeOutcome, Reach, Status, Verdict
from nodegate.parsers.ib_pci import PCI_ATTRS, parse_ib_pci
from nodegate.parsers.ib_sysfs import IbSysfs, parse_ib_sysfs
from nodegate.parsers.mlxlink import parse_mlxlink_json
from nodegate.parsers.reach import parse_nvidia_version, parse_uname_r
from nodegate.parsers.topo import parse_topo_matrix
from nodegate.profiles import Profile
from nodegate.stages import hca_checks as checks
from nodegate.stages import hca_ports as ports
from nodegate.stages.base import (
    CheckSpec,
    OutcomeReader,
    PassiveStage,
    StageContext,
    unreachable_verdicts,
)
from nodegate.stages.hca_facts import (
    DRIVER,
    KERNEL,
    NO_DEVICES,
    PCI,
    PEERMEM,
    SLEEP,
    SYSFS,
    SYSFS_AGAIN,
    TOPO,
    HcaFacts,
    error,
    mlxlink_id,
    placements,
    verdict,
)

CMD_TIMEOUT_S = 15.0
MLXLINK_TIMEOUT_S = 30.0
_IB = "/sys/class/infiniband"
# Absolute globs, expanded by the node's shell: no `cd`, so the command is one program (grep)
# on every node. grep -r follows the named device symlinks, not the links it meets inside.
_PORT_FILES = ("state", "phys_state", "rate", "link_layer")
_PCI_FILES = PCI_ATTRS
SYSFS_COMMAND = (
    "grep -H -r . "
    + " ".join(
        [f"{_IB}/*/{n}" for n in ("fw_ver", "board_id", "hca_type", "node_guid")]
        + [f"{_IB}/*/ports/*/{n}" for n in _PORT_FILES]
        + [f"{_IB}/*/ports/*/counters"]
        + [f"{_IB}/*/device/{n}" for n in _PCI_FILES]
    )
    + " 2>/dev/null"
)
# The second read: port state and counters only (a port that flapped shows here too).
SYSFS_AGAIN_COMMAND = (
    "grep -H -r . "
    + " ".join(
        [f"{_IB}/*/ports/*/{n}" for n in ("state", "phys_state", "rate")]
        + [f"{_IB}/*/ports/*/counters"]
    )
    + " 2>/dev/null"
)
# grep: 1 = nothing matched, 2 = some named file missing (a glob with no match): the lines it
# did print still count.
_GREP_OK_RCS = (0, 1, 2)


class HcaStage(PassiveStage[Any, Any]):
    name = "hca"
    checks = (
        CheckSpec("hca.count", "test_hca_count", "rail HCAs present; other roles' counts"),
        CheckSpec("hca.model", "test_hca_model", "HCA PCI id and PSID per role"),
        CheckSpec("hca.firmware.version", "test_hca_firmware_version", "firmware per PSID"),
        CheckSpec("hca.firmware.uniform", "test_hca_firmware_uniform", "firmware = fleet"),
        CheckSpec("hca.port.state", "test_hca_port_state", "rail ports ACTIVE and LinkUp"),
        CheckSpec("hca.port.width", "test_hca_port_width", "rail port link width"),
        CheckSpec("hca.port.speed", "test_hca_port_speed", "rail port link speed"),
        CheckSpec("hca.port.rate", "test_hca_port_rate", "rail port link rate"),
        CheckSpec("hca.port.link_layer", "test_hca_port_link_layer", "InfiniBand/Ethernet"),
        CheckSpec("hca.pcie.gen", "test_hca_pcie_gen", "HCA PCIe generation"),
        CheckSpec("hca.pcie.width", "test_hca_pcie_width", "HCA PCIe width"),
        CheckSpec("hca.counters.errors", "test_hca_error_counters", "error counter deltas"),
        CheckSpec("hca.link.ber", "test_hca_link_ber", "mlxlink BER and module fault flags"),
        CheckSpec("hca.gpudirect", "test_hca_gpudirect", "GPUDirect RDMA ready"),
        CheckSpec("hca.rail.affinity", "test_hca_rail_affinity", "rail HCA on its GPU's switch"),
    )

    def commands(self, node: Node, profile: Profile) -> list[CommandSpec]:
        t = CMD_TIMEOUT_S
        window = float(profile.section("hca")["counters"]["window_s"])
        return [
            CommandSpec(SYSFS, SYSFS_COMMAND, t),
            CommandSpec(SLEEP, f"sleep {window:g}", window + t),
            CommandSpec(SYSFS_AGAIN, SYSFS_AGAIN_COMMAND, t),
            CommandSpec(TOPO, "nvidia-smi topo -m", t),
            CommandSpec(PEERMEM, "cat /sys/module/nvidia_peermem/initstate", t),
            CommandSpec(DRIVER, "cat /proc/driver/nvidia/version", t),
            CommandSpec(KERNEL, "uname -r", t),
        ] + [
            # mlxlink reads PHY registers: seconds per port, hence its own deadline.
            CommandSpec(
                mlxlink_id(r["device"]),
                f"mlxlink -d {shlex.quote(r['device'])} -m -c --json",
                MLXLINK_TIMEOUT_S,
            )
            for r in profile.section("hca")["rails"]
            if profile.section("hca")["link_health"] is not None
        ]

    def evaluate(self, outcomes: Mapping[str, NodeOutcome], ctx: StageContext) -> list[Verdict]:
        verdicts: list[Verdict] = []
        facts: dict[str, HcaFacts] = {}
        for node in ctx.nodes:
            out = outcomes[node.name]
            if out.reach is not Reach.OK:
                verdicts += unreachable_verdicts(self, out, first_check_fails=False)
                continue
            f = facts[node.name] = gather(out)
            verdicts += judge_node(f, ctx.profiles[node.name].section("hca"))
        verdicts += firmware_uniform(facts, {n: ctx.profiles[n] for n in facts})
        return verdicts


def _sysfs(f: OutcomeReader, cmd_id: str) -> tuple[IbSysfs | None, str]:
    """Parse a grep listing whose rc may be 1 or 2 (see _GREP_OK_RCS); (facts, stdout)."""
    r: CommandResult | None = f.result(cmd_id)
    if r is None or r.timed_out or r.rc not in _GREP_OK_RCS:
        return f.parse(cmd_id, parse_ib_sysfs), ""  # records the reason in f.errors
    if not r.stdout.strip():
        f.errors[cmd_id] = f"{NO_DEVICES} (`grep` printed nothing, rc {r.rc})"
        return None, ""
    ok = CommandResult(r.id, r.cmd, 0, r.stdout, r.stderr, r.duration_s, evidence=r.evidence)
    probe = OutcomeReader(f.stage, NodeOutcome(f.outcome.node, Reach.OK, {cmd_id: ok}))
    parsed = probe.parse(cmd_id, parse_ib_sysfs)
    f.errors.update(probe.errors)
    return parsed, r.stdout


def parse_module_initstate(text: str) -> bool:
    """/sys/module/<m>/initstate (kernel/module: live, coming, going, unformed) -> loaded."""
    state = text.strip()
    if state not in ("live", "coming", "going", "unformed"):
        raise ParseError("initstate", f"unknown module state {state[:40]!r}")
    return state == "live"


def gather(out: NodeOutcome) -> HcaFacts:
    """Parse one node's session into HcaFacts (failures recorded, never raised)."""
    f = OutcomeReader("hca", out)
    sysfs, text = _sysfs(f, SYSFS)
    pci = {}
    if sysfs is not None:
        try:
            pci = parse_ib_pci(text)
        except ParseError as exc:
            f.errors[PCI] = f"unrecognized PCI attributes in the sysfs listing: {exc.reason}"
    again, _ = _sysfs(f, SYSFS_AGAIN)
    topo = f.parse(TOPO, parse_topo_matrix, absent_rcs=(127,))
    peer = f.parse(PEERMEM, parse_module_initstate, absent_rcs=(1,))
    drv = f.parse(DRIVER, parse_nvidia_version, absent_rcs=(1,))
    kernel = f.parse(KERNEL, parse_uname_r)
    links = {}
    for cid in out.results:
        if cid.startswith("mlxlink_"):
            rep = f.parse(cid, parse_mlxlink_json, absent_rcs=(127,))
            if rep is not None:
                links[cid] = rep
    return HcaFacts(
        node=out.node,
        sysfs=sysfs,
        pci=pci,
        sysfs_again=again,
        topo=topo,
        peermem_live=peer if peer is not None else (False if f.absent(PEERMEM) else None),
        driver_open_module=None if drv is None else drv.open_module,
        kernel=kernel,
        mlxlink=links,
        errors=dict(f.errors),
        evidence={c: f.evidence(c) for c in out.results},
    )


_NODE_CHECKS: tuple[tuple[str, Callable[[HcaFacts, Mapping[str, Any]], list[Verdict]]], ...] = (
    ("hca.count", checks.count),
    ("hca.model", checks.model),
    ("hca.firmware.version", checks.firmware),
    ("hca.port.state", ports.port_state),
    ("hca.port.width", lambda f, p: ports.port_link("hca.port.width", f, p)),
    ("hca.port.speed", lambda f, p: ports.port_link("hca.port.speed", f, p)),
    ("hca.port.rate", lambda f, p: ports.port_link("hca.port.rate", f, p)),
    ("hca.port.link_layer", ports.link_layer),
    ("hca.pcie.gen", lambda f, p: checks.pcie("hca.pcie.gen", f, p)),
    ("hca.pcie.width", lambda f, p: checks.pcie("hca.pcie.width", f, p)),
    ("hca.counters.errors", ports.counters),
    ("hca.link.ber", ports.link_health),
    ("hca.gpudirect", checks.gpudirect),
    ("hca.rail.affinity", checks.affinity),
)


def judge_node(f: HcaFacts, prof: Mapping[str, Any]) -> list[Verdict]:
    """Every per-node check; a check that produced nothing is an ERROR (fail closed)."""
    out: list[Verdict] = []
    for check, fn in _NODE_CHECKS:
        got = fn(f, prof)
        out += got or [error(check, f, "hca", "check produced no verdict")]
    return out


def firmware_uniform(
    facts: Mapping[str, HcaFacts], profiles: Mapping[str, Profile]
) -> list[Verdict]:
    """hca.firmware.uniform: each HCA's firmware = the majority of its PSID in the fleet
    (same profile); the message carries the fleet's histogram."""
    c = "hca.firmware.uniform"
    hist: dict[tuple[str, str], Counter[str]] = {}
    for name, f in facts.items():
        for p in placements(f, profiles[name].section("hca")):
            d = p.device
            if d.board_id and d.fw_ver:
                hist.setdefault((profiles[name].name, d.board_id), Counter())[d.fw_ver] += 1
    out: list[Verdict] = []
    for name, f in facts.items():
        prof = profiles[name].section("hca")
        ev = f.ev(SYSFS)
        if f.sysfs is None:
            out.append(error(c, f, "hca", f.errors.get(SYSFS, "no sysfs listing"), ev))
            continue
        mine = placements(f, prof)
        if not prof["uniform_firmware"]:
            out.append(
                Verdict(
                    c,
                    f.node,
                    Status.PASS,
                    "hca",
                    None,
                    "not required",
                    message=f"profile {profiles[name].name} does not require it",
                    evidence=ev,
                )  # fmt: skip
            )
            continue
        for p in mine:
            d = p.device
            if not (d.board_id and d.fw_ver):
                out.append(error(c, f, p.label, f"{d.name}: no PSID or firmware in sysfs", ev))
                continue
            counts = hist[(profiles[name].name, d.board_id)]
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            shown = ", ".join(f"{v} x{n}" for v, n in ranked)
            top, n_top = ranked[0]
            tie = len(ranked) > 1 and ranked[1][1] == n_top
            ok = not tie and d.fw_ver == top
            want = "fleet majority" if tie else top
            why = "no fleet majority" if tie else f"fleet runs {top}"
            out.append(
                verdict(
                    c,
                    f,
                    ok,
                    p.label,
                    d.fw_ver,
                    want,
                    f"{d.name} firmware {d.fw_ver}"
                    + ("" if ok else f" differs ({why})")
                    + f"; fleet PSID {d.board_id}: {shown}",
                    remediation=f"flash {d.name} to the fleet's firmware",
                    evidence=ev,
                )
            )
        if not mine:
            out.append(error(c, f, "hca", "no RDMA device found", ev))
    return out


STAGE = HcaStage()
