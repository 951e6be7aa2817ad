"""hca stage evaluation, pure: simulated outputs -> build_facts -> verdicts, every error path."""

from __future__ import annotations

from typing import Any

import pytest
from nodegate.core.values import CommandResult, NodeOutcome, Reach, Status, Verdict
from nodegate.profiles import load_profile_file
from nodegate.sim.fleet_model import Fault, SimNode
from nodegate.sim.tools.hca import (
    _mlxlink_template,
    mlxlink_json,
    node_hcas,
    sysfs_listing,
    topo_matrix,
)
from nodegate.sim.tools.reach import nvidia_version
from nodegate.stages.hca import STAGE
from nodegate.stages.hca.checks import CHECKS, firmware_uniform
from nodegate.stages.hca.commands import (
    DRIVER,
    KERNEL,
    PEERMEM,
    SLEEP,
    SYSFS,
    SYSFS_AGAIN,
    TOPO,
    mlxlink_id,
)
from nodegate.stages.hca.facts import build_facts
from nodegate.stages.hca.profile import HcaProfile, hca_profile
from nodegate.transport.script import command_line

from tests.integration.conftest import REPO

PROFILE = load_profile_file(REPO / "inventories/profiles/generic-hgx-h100.yaml")
SEC = PROFILE.section("hca")
NODE_CHECKS = {c.id for c in STAGE.checks} - {"hca.firmware.uniform"}


def res(cmd_id: str, stdout: str = "", rc: int = 0, **kw: Any) -> CommandResult:
    return CommandResult(cmd_id, cmd_id, rc, stdout, kw.pop("stderr", ""), 0.01, **kw)


def outcome(
    name: str = "gpu001", faults: tuple[Fault, ...] = (), **over: CommandResult
) -> NodeOutcome:
    devs = node_hcas(SimNode(name, 0, "127.0.0.1", {}, {}, faults))
    results = {
        SYSFS: res(SYSFS, sysfs_listing(devs, 0)),
        SLEEP: res(SLEEP),
        SYSFS_AGAIN: res(SYSFS_AGAIN, sysfs_listing(devs, 1)),
        TOPO: res(TOPO, topo_matrix(devs)),
        PEERMEM: res(PEERMEM, "live\n"),
        DRIVER: res(DRIVER, nvidia_version("535.161.08", False, "12.3.0")),
        KERNEL: res(KERNEL, "5.15.0-105-generic\n"),
    }
    template = _mlxlink_template()
    for d in devs[:8]:
        results[mlxlink_id(d.name)] = res(mlxlink_id(d.name), mlxlink_json(d, template))
    results.update(over)
    return NodeOutcome(name, Reach.OK, results)


def judge(out: NodeOutcome, sec: Any = SEC) -> list[Verdict]:
    """Every node-scope check of the table on one node, against a (maybe edited) hca section."""
    return CHECKS.judge_node(out.node, build_facts(out), HcaProfile.of(sec, PROFILE.name))


def failing(verdicts: list[Verdict]) -> dict[str, list[Verdict]]:
    out: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if v.status is not Status.PASS:
            out.setdefault(v.check, []).append(v)
    return out


def test_healthy_node_passes_every_check_with_named_components() -> None:
    verdicts = judge(outcome())
    assert {v.check for v in verdicts} == NODE_CHECKS
    assert failing(verdicts) == {}
    comps = {v.component for v in verdicts if v.check == "hca.port.rate"}
    assert comps == {f"mlx5_{i} port 1 (rail {i})" for i in range(8)}
    models = {v.component for v in verdicts if v.check == "hca.model"}
    assert "mlx5_bond_0 (frontend)" in models
    counters = next(v for v in verdicts if v.check == "hca.counters.errors")
    assert "warning, absolute values (not judged): excessive_buffer_overrun_errors=15" in (
        counters.message
    )


@pytest.mark.parametrize(
    ("fault", "check", "component", "observed"),
    [
        ("hca_missing", "hca.count", "compute rails", 7),
        ("hca_old_firmware", "hca.firmware.version", "mlx5_4 (rail 4)", "28.37.1014"),
        ("hca_port_down", "hca.port.state", "mlx5_4 port 1 (rail 4)", "DOWN/Polling"),
        ("hca_port_2x", "hca.port.width", "mlx5_4 port 1 (rail 4)", "2X"),
        ("hca_port_hdr", "hca.port.speed", "mlx5_4 port 1 (rail 4)", "HDR"),
        ("hca_symbol_errors", "hca.counters.errors", "mlx5_4 port 1 (rail 4)", "symbol_error +66"),
        ("hca_pcie_x8", "hca.pcie.width", "mlx5_4 (rail 4)", "x8"),
        ("peermem_missing", "hca.gpudirect", "GPUDirect RDMA", None),
        ("hca_high_ber", "hca.link.ber", "mlx5_4 port 1 (rail 4)", None),
        ("hca_module_fault", "hca.link.ber", "mlx5_4 port 1 (rail 4)", None),
    ],
)
def test_each_sim_fault_fails_its_check(
    fault: str, check: str, component: str, observed: Any
) -> None:
    out = outcome(faults=(Fault(fault),))
    if fault == "peermem_missing":  # the file is absent: the simulated cat exits 1
        out.results[PEERMEM] = res(PEERMEM, "", 1, stderr="cat: ...: No such file or directory")
    bad = failing(judge(out))
    assert check in bad
    v = next(v for v in bad[check] if v.status is Status.FAIL)
    assert v.component == component and v.remediation
    if observed is not None:
        assert v.observed == observed


def test_port_down_does_not_judge_width_speed_rate() -> None:
    bad = failing(judge(outcome(faults=(Fault("hca_port_down", "mlx5_2"),))))
    for check in ("hca.port.width", "hca.port.speed", "hca.port.rate"):
        (v,) = bad[check]
        assert v.status is Status.ERROR and v.message == "not judged: port is DOWN"
        assert v.component == "mlx5_2 port 1 (rail 2)"


def test_no_rdma_device_at_all_fails_count_and_errors_the_rest() -> None:
    out = outcome(**{SYSFS: res(SYSFS, "", 2), SYSFS_AGAIN: res(SYSFS_AGAIN, "", 2)})
    bad = failing(judge(out))
    (count,) = bad["hca.count"]
    assert count.status is Status.FAIL and count.observed == 0 and count.expected == 8
    assert bad["hca.port.state"][0].status is Status.ERROR
    assert "hca.gpudirect" not in bad


def test_sysfs_timeout_and_garbage_are_errors() -> None:
    hung = res(SYSFS, "mlx5_0/fw_ver:28.41.1000\n", 124, timed_out=True)
    bad = failing(judge(outcome(**{SYSFS: hung})))
    assert "timed out" in bad["hca.count"][0].message
    assert all(v.status is Status.ERROR for vs in bad.values() for v in vs)
    junk = res(SYSFS, "\x1b[31m#!%@ segfault?? 0xdeadbeef\n")
    bad = failing(judge(outcome(**{SYSFS: junk})))
    assert "unrecognized output" in bad["hca.model"][0].message


def test_second_counter_read_missing_or_no_pma_is_error() -> None:
    lost = NodeOutcome(
        "gpu001",
        Reach.OK,
        {k: v for k, v in outcome().results.items() if k != SYSFS_AGAIN},
        detail="session cut short",
    )
    (v, *_) = failing(judge(lost))["hca.counters.errors"]
    assert v.status is Status.ERROR and "did not run" in v.message
    text = (
        outcome()
        .results[SYSFS_AGAIN]
        .stdout.replace(
            "mlx5_3/ports/1/counters/symbol_error:0",
            "mlx5_3/ports/1/counters/symbol_error:N/A (no PMA)",
        )
    )
    bad = failing(judge(outcome(**{SYSFS_AGAIN: res(SYSFS_AGAIN, text)})))
    (v,) = bad["hca.counters.errors"]
    assert v.status is Status.ERROR and v.message == "unreadable counters: symbol_error"


def test_topo_absent_is_error_for_affinity_only() -> None:
    out = outcome(**{TOPO: res(TOPO, "", 127, stderr="sh: 1: nvidia-smi: not found")})
    bad = failing(judge(out))
    assert set(bad) == {"hca.rail.affinity"}
    assert bad["hca.rail.affinity"][0].status is Status.ERROR


def test_affinity_wrong_numa_fails() -> None:
    sec = {**SEC, "rails": [{**r, "numa_node": 1 - r["numa_node"]} for r in SEC["rails"]]}
    bad = failing(judge(outcome(), sec))
    assert len(bad["hca.rail.affinity"]) == 8
    assert bad["hca.rail.affinity"][0].observed == "PIX to GPU0, NUMA 0"


def test_unknown_psid_rule_and_device_without_role() -> None:
    sec = {**SEC, "firmware": {"MT_0000000838": SEC["firmware"]["MT_0000000838"]}}
    bad = failing(judge(outcome(), sec))
    (fw,) = bad["hca.firmware.version"]
    assert fw.status is Status.ERROR and "no rule for PSID MT_0000000884" in fw.message
    roles = {"compute": SEC["roles"]["compute"]}
    bad = failing(judge(outcome(), {**SEC, "roles": roles}))
    (model,) = bad["hca.model"]
    assert model.component == "mlx5_bond_0 (no role)" and model.status is Status.FAIL


def test_frontend_count_and_wrong_model() -> None:
    out = outcome(
        **{SYSFS: res(SYSFS, outcome().results[SYSFS].stdout.replace("0x1021", "0x101b"))}
    )
    bad = failing(judge(out))
    assert len(bad["hca.model"]) == 8
    assert bad["hca.model"][0].observed == "pci 15b3:101b, PSID MT_0000000838"
    two = {"equal": 2, "unit": "HCAs"}
    sec = {**SEC, "roles": {**SEC["roles"], "frontend": {**SEC["roles"]["frontend"], "count": two}}}
    (count,) = failing(judge(outcome(), sec))["hca.count"]
    assert (count.component, count.observed, count.expected) == ("frontend HCAs", 1, 2)


@pytest.mark.parametrize(
    ("accept", "peermem", "open_module", "kernel", "status"),
    [
        (["peermem", "dmabuf"], False, True, "6.8.0-45-generic", Status.PASS),
        (["peermem"], False, True, "6.8.0-45-generic", Status.FAIL),
        (["dmabuf"], True, False, "6.8.0-45-generic", Status.FAIL),
        (["dmabuf"], False, True, "5.4.0-150-generic", Status.FAIL),
        (["peermem"], True, False, "5.15.0-105-generic", Status.PASS),
    ],
)
def test_gpudirect_peermem_or_dmabuf(
    accept: list[str], peermem: bool, open_module: bool, kernel: str, status: Status
) -> None:
    sec = {**SEC, "gpudirect": {"accept": {"one_of": accept}, "dmabuf_min_kernel": "5.12"}}
    out = outcome(
        **{
            PEERMEM: res(PEERMEM, "live\n") if peermem else res(PEERMEM, "", 1),
            DRIVER: res(DRIVER, nvidia_version("560.35.03", open_module, "12.3.0")),
            KERNEL: res(KERNEL, kernel + "\n"),
        }
    )
    (v,) = [v for v in judge(out, sec) if v.check == "hca.gpudirect"]
    assert v.status is status


def test_gpudirect_unreadable_driver_is_error() -> None:
    out = outcome(**{PEERMEM: res(PEERMEM, "", 1), DRIVER: res(DRIVER, "garbage\n")})
    (v,) = [v for v in judge(out) if v.check == "hca.gpudirect"]
    assert v.status is Status.ERROR and "unrecognized output" in v.message


def _profiles(names: list[str]) -> dict[str, HcaProfile]:
    return {n: hca_profile(PROFILE) for n in names}


UNIFORM = next(c for c in CHECKS if c.fn is firmware_uniform)


def test_firmware_uniform_majority_histogram_and_tie() -> None:
    names = ["gpu001", "gpu002", "gpu003"]
    facts = {n: build_facts(outcome(n)) for n in names[:2]}
    facts["gpu003"] = build_facts(outcome("gpu003", (Fault("hca_old_firmware", "mlx5_1"),)))
    verdicts = firmware_uniform(UNIFORM, facts, _profiles(names))
    bad = [v for v in verdicts if v.status is not Status.PASS]
    assert [(v.node, v.component) for v in bad] == [("gpu003", "mlx5_1 (rail 1)")]
    assert bad[0].message.endswith("fleet PSID MT_0000000838: 28.41.1000 x23, 28.37.1014 x1")
    # two nodes, one differing device each way: 8 vs 8 would be a tie only at equal counts
    half = {
        "gpu001": build_facts(outcome("gpu001")),
        "gpu002": build_facts(
            outcome("gpu002", tuple(Fault("hca_old_firmware", f"mlx5_{i}") for i in range(8)))
        ),
    }
    tie = [
        v for v in firmware_uniform(UNIFORM, half, _profiles(list(half))) if "rail" in v.component
    ]
    assert all(v.status is Status.FAIL and "no fleet majority" in v.message for v in tie)


def test_unreachable_node_errors_every_check() -> None:
    from nodegate.framework.stage import unreachable_verdicts

    out = NodeOutcome("gpu009", Reach.UNREACHABLE, detail="connection refused")
    verdicts = unreachable_verdicts(STAGE, out, first_check_fails=False)
    assert {v.check for v in verdicts} == {c.id for c in STAGE.checks}
    assert all(v.status is Status.ERROR for v in verdicts)


def _mlxlink_everywhere(rc: int, stdout: str = "") -> dict[str, CommandResult]:
    return {mlxlink_id(f"mlx5_{i}"): res(mlxlink_id(f"mlx5_{i}"), stdout, rc) for i in range(8)}


def test_link_ber_optional_mlxlink_absent_passes_required_fails() -> None:
    out = outcome(**_mlxlink_everywhere(127))
    vs = [v for v in judge(out) if v.check == "hca.link.ber"]
    assert len(vs) == 8 and all(v.status is Status.PASS for v in vs)
    assert "not judged (profile: optional)" in vs[0].message
    sec = {**SEC, "link_health": {**SEC["link_health"], "required": True}}
    vs = [v for v in judge(out, sec) if v.check == "hca.link.ber"]
    assert all(v.status is Status.FAIL and v.observed == "no mlxlink" for v in vs)


def test_link_ber_garbage_or_failure_is_error() -> None:
    for over in (_mlxlink_everywhere(0, "#!%@ segfault"), _mlxlink_everywhere(1)):
        vs = [v for v in judge(outcome(**over)) if v.check == "hca.link.ber"]
        assert len(vs) == 8 and all(v.status is Status.ERROR for v in vs)


def test_link_ber_observed_names_ber_and_flags() -> None:
    faults = (Fault("hca_high_ber", "mlx5_1"), Fault("hca_module_fault", "mlx5_6"))
    bad = failing(judge(outcome(faults=faults)))
    ber, flag = bad["hca.link.ber"]
    assert (ber.component, ber.observed) == (
        "mlx5_1 port 1 (rail 1)",
        "effective BER 2e-11; raw BER 0.0003",
    )
    assert (flag.component, flag.observed) == (
        "mlx5_6 port 1 (rail 6)",
        "Rx LOS [per lane] on lane 2",
    )


def test_rail_on_ethernet_fails_link_layer() -> None:
    text = (
        outcome()
        .results[SYSFS]
        .stdout.replace(
            "mlx5_5/ports/1/link_layer:InfiniBand", "mlx5_5/ports/1/link_layer:Ethernet"
        )
    )
    (v,) = failing(judge(outcome(**{SYSFS: res(SYSFS, text)})))["hca.port.link_layer"]
    assert (v.component, v.observed, v.expected) == (
        "mlx5_5 port 1 (rail 5)",
        "Ethernet",
        "InfiniBand",
    )


def test_peermem_garbage_is_error_not_unloaded() -> None:
    out = outcome(**{PEERMEM: res(PEERMEM, "#!%@ segfault\n"), DRIVER: res(DRIVER, "", 1)})
    (v,) = [v for v in judge(out) if v.check == "hca.gpudirect"]
    assert v.status is Status.ERROR and "unknown module state" in v.message


IB = "/sys/class/infiniband"


def test_commands_are_byte_identical() -> None:
    """The simulated fleet answers these exact lines (and real nodes' evidence names them)."""
    sysfs = (
        f"grep -H -r . {IB}/*/fw_ver {IB}/*/board_id {IB}/*/hca_type {IB}/*/node_guid "
        f"{IB}/*/ports/*/state {IB}/*/ports/*/phys_state {IB}/*/ports/*/rate "
        f"{IB}/*/ports/*/link_layer {IB}/*/ports/*/counters {IB}/*/device/vendor "
        f"{IB}/*/device/device {IB}/*/device/numa_node {IB}/*/device/current_link_speed "
        f"{IB}/*/device/current_link_width {IB}/*/device/max_link_speed "
        f"{IB}/*/device/max_link_width 2>/dev/null"
    )
    again = (
        f"grep -H -r . {IB}/*/ports/*/state {IB}/*/ports/*/phys_state {IB}/*/ports/*/rate "
        f"{IB}/*/ports/*/counters 2>/dev/null"
    )
    specs = STAGE.commands(None, PROFILE)  # type: ignore[arg-type]
    got = [(c.id, command_line(c.argv), c.timeout_s) for c in specs]
    assert got == [
        ("ib_sysfs", sysfs, 15.0),
        ("counter_window", "sleep 1", 16.0),
        ("ib_sysfs_again", again, 15.0),
        ("topo", "nvidia-smi topo -m", 15.0),
        ("peermem", "cat /sys/module/nvidia_peermem/initstate", 15.0),
        ("nvidia_driver", "cat /proc/driver/nvidia/version", 15.0),
        ("kernel", "uname -r", 15.0),
    ] + [(f"mlxlink_mlx5_{i}", f"mlxlink -d mlx5_{i} -m -c --json", 30.0) for i in range(8)]


def test_check_table_ids_tests_and_scopes() -> None:
    assert [(c.id, c.test, c.scope) for c in CHECKS] == [
        ("hca.count", "test_hca_count", "node"),
        ("hca.model", "test_hca_model", "node"),
        ("hca.firmware.version", "test_hca_firmware_version", "node"),
        ("hca.firmware.uniform", "test_hca_firmware_uniform", "fleet"),
        ("hca.port.state", "test_hca_port_state", "node"),
        ("hca.port.width", "test_hca_port_width", "node"),
        ("hca.port.speed", "test_hca_port_speed", "node"),
        ("hca.port.rate", "test_hca_port_rate", "node"),
        ("hca.port.link_layer", "test_hca_port_link_layer", "node"),
        ("hca.pcie.gen", "test_hca_pcie_gen", "node"),
        ("hca.pcie.width", "test_hca_pcie_width", "node"),
        ("hca.counters.errors", "test_hca_error_counters", "node"),
        ("hca.link.ber", "test_hca_link_ber", "node"),
        ("hca.gpudirect", "test_hca_gpudirect", "node"),
        ("hca.rail.affinity", "test_hca_rail_affinity", "node"),
    ]
    assert STAGE.checks is CHECKS


@pytest.mark.parametrize("rc", [1, 2])
def test_grep_exit_1_or_2_still_reads_the_lines_it_printed(rc: int) -> None:
    """grep exits 2 when a glob matched nothing (no `device/` of a VF); its lines count."""
    sysfs, again = outcome().results[SYSFS], outcome().results[SYSFS_AGAIN]
    over = {SYSFS: res(SYSFS, sysfs.stdout, rc), SYSFS_AGAIN: res(SYSFS_AGAIN, again.stdout, rc)}
    verdicts = judge(outcome(**over))
    assert failing(verdicts) == {} and {v.check for v in verdicts} == NODE_CHECKS


def test_pci_garbage_is_reported_where_pci_facts_are_needed() -> None:
    """One unreadable PCI attribute: no PCI facts for any HCA; the sysfs facts still judge."""
    text = (
        outcome()
        .results[SYSFS]
        .stdout.replace(
            "mlx5_3/device/current_link_width:16", "mlx5_3/device/current_link_width:sixteen"
        )
    )
    bad = failing(judge(outcome(**{SYSFS: res(SYSFS, text)})))
    why = "unrecognized PCI attributes in the sysfs listing: mlx5_3 device: "
    why += "current_link_width reads 'sixteen'"
    got = {(c, v.component, v.status, v.message) for c, vs in bad.items() for v in vs}
    assert got == {
        ("hca.count", "frontend HCAs", Status.FAIL, "0 frontend HCAs (none), expected 1"),
        ("hca.model", "mlx5_bond_0 (no role)", Status.FAIL,
         "mlx5_bond_0 (pci unknown, PSID MT_0000000884) matches no HCA role of the profile"),
    } | {
        row
        for i in range(8)
        for row in (
            ("hca.model", f"mlx5_{i} (rail {i})", Status.ERROR,
             f"mlx5_{i}: pci unknown, PSID MT_0000000838 in sysfs"),
            ("hca.pcie.gen", f"mlx5_{i} (rail {i})", Status.ERROR, why),
            ("hca.pcie.width", f"mlx5_{i} (rail {i})", Status.ERROR, why),
            ("hca.rail.affinity", f"mlx5_{i} (rail {i})", Status.ERROR,
             f"no NUMA node for mlx5_{i}: {why}"),
        )
    }  # fmt: skip


def test_fleet_check_groups_by_profile_and_psid_in_majority_order() -> None:
    old = tuple(Fault("hca_old_firmware", f"mlx5_{i}") for i in (1, 2))
    facts = {n: build_facts(outcome(n)) for n in ("gpu001", "gpu002", "gpu003")}
    facts["gpu004"] = build_facts(outcome("gpu004", old))
    facts["gpu005"] = build_facts(outcome("gpu005", **{SYSFS: res(SYSFS, "", 124, timed_out=True)}))
    hgx = hca_profile(PROFILE)
    other = HcaProfile.of(SEC, "site-h100")  # same PSIDs, another profile: its own majority
    profs = {n: hgx for n in facts} | {"gpu003": other}
    verdicts = CHECKS.judge_fleet(facts, profs)
    assert {v.check for v in verdicts} == {"hca.firmware.uniform"}
    bad = {(v.node, v.component, v.status) for v in verdicts if v.status is not Status.PASS}
    assert bad == {
        ("gpu004", "mlx5_1 (rail 1)", Status.FAIL),
        ("gpu004", "mlx5_2 (rail 2)", Status.FAIL),
        ("gpu005", "hca", Status.ERROR),
    }
    msg = {(v.node, v.component): v.message for v in verdicts}
    assert msg[("gpu004", "mlx5_1 (rail 1)")] == (
        "mlx5_1 firmware 28.37.1014 differs (fleet runs 28.41.1000); "
        "fleet PSID MT_0000000838: 28.41.1000 x22, 28.37.1014 x2"
    )
    assert msg[("gpu003", "mlx5_0 (rail 0)")] == (
        "mlx5_0 firmware 28.41.1000; fleet PSID MT_0000000838: 28.41.1000 x8"
    )
    relaxed = HcaProfile.of({**SEC, "uniform_firmware": False}, "relaxed")
    (v,) = CHECKS.judge_fleet({"gpu004": facts["gpu004"]}, {"gpu004": relaxed})
    assert (v.status, v.expected, v.message) == (
        Status.PASS,
        "not required",
        "profile relaxed does not require it",
    )


def test_the_facts_kept_for_the_fleet_check_judge_it_as_all_of_them() -> None:
    """What the stage keeps of each node until its end (`fleet_facts`: no second listing,
    topology or mlxlink) gives the fleet check exactly the verdicts every fact gives."""
    old = tuple(Fault("hca_old_firmware", f"mlx5_{i}") for i in (1, 2))
    facts = {n: build_facts(outcome(n)) for n in ("gpu001", "gpu002", "gpu003")}
    facts["gpu004"] = build_facts(outcome("gpu004", old))
    facts["gpu005"] = build_facts(outcome("gpu005", **{SYSFS: res(SYSFS, "", 124, timed_out=True)}))
    profs = {n: hca_profile(PROFILE) for n in facts}
    kept = {n: STAGE.fleet_facts(f) for n, f in facts.items()}
    assert [(k.topo, k.sysfs_again, dict(k.mlxlink)) for k in kept.values()] == [
        (None, None, {})
    ] * 5
    assert all(f.topo is not None and f.mlxlink for n, f in facts.items() if n != "gpu005")
    assert CHECKS.judge_fleet(kept, profs) == CHECKS.judge_fleet(facts, profs)
    assert sum(v.status is not Status.PASS for v in CHECKS.judge_fleet(kept, profs)) == 3
