"""gpu_load checks on one node's sides (the simulator's outputs and the formats fixtures):
exact verdicts per path, the level's selection, and every way a part cannot be read."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from nodegate.core.values import Status, Verdict
from nodegate.framework.active.campaign import Execution, Side
from nodegate.profiles import ProfileLibrary
from nodegate.sim.fleet_model import Fault, SimNode
from nodegate.sim.tools import gpu_load as simload
from nodegate.sim.tools import node_tools
from nodegate.sim.tools.base import answer
from nodegate.stages.gpu_load.checks import CHECKS, CLEANUP
from nodegate.stages.gpu_load.commands import (
    DCGM,
    FIELDS,
    KERNEL_LOG,
    NVBANDWIDTH,
    SAMPLER,
    TOPOLOGY,
    dcgm_argv,
    nvbandwidth_argv,
    sampler_argv,
)
from nodegate.stages.gpu_load.profile import GpuLoadProfile, gpu_load_profile
from nodegate.stages.gpu_load.reading import read_load
from nodegate.transport.process import ProcessResult

REPO = Path(__file__).resolve().parents[2]
FORMATS = REPO / "tests" / "fixtures" / "formats"
LOOP = "nvidia-smi-query-gpu-csv-lms__h100-8gpu-3-samples-gpu3-thermal-written-from-corpus-csv.txt"
NODE = "gpu017"
GPU3 = "GPU3 0000:5d:00.0"


@pytest.fixture(scope="module")
def prof() -> GpuLoadProfile:
    return gpu_load_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("nd-h100-v5"))


def result(stdout: str, rc: int | None = 0, **kw: Any) -> ProcessResult:
    return ProcessResult(NODE, "cmd", rc, stdout, kw.pop("stderr", ""), kw.pop("timed_out", False),
                         kw.pop("killed", False), 1.0, **kw)  # fmt: skip


def sim_outputs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *faults: str) -> dict[str, str]:
    """What the simulated node's tools print under load (its state file under tmp_path)."""
    monkeypatch.setenv("NG_NODE", str(tmp_path))
    node = SimNode(NODE, 16, "127.0.0.1", {}, {}, tuple(Fault(f) for f in faults))
    tools = {t.name: t for t in simload.tools(node)}
    nvb = answer(tools["nvbandwidth"], list(nvbandwidth_argv_default()[1:]))
    dcgm = answer(tools["dcgmi"], ["diag", "-r", "3", "-p", "x", "-j"])
    q = ["--query-gpu=" + ",".join(FIELDS), "--format=csv"]
    merged = {t.name: t for t in node_tools(node)}["nvidia-smi"]  # topo -m: the hca provider's
    # two samples under load, as the looping sampler prints them (its header once)
    sampled = answer(tools["nvidia-smi"], q).stdout
    sampled += "".join(sampled.splitlines(keepends=True)[1:])
    return {
        NVBANDWIDTH: nvb.stdout,
        DCGM: dcgm.stdout,
        SAMPLER: sampled,
        TOPOLOGY: answer(merged, ["topo", "-m"]).stdout,
    }


def nvbandwidth_argv_default() -> tuple[str, ...]:
    return ("nvbandwidth", "-t", *simload.TESTCASES)


def execution(
    out: dict[str, str], rcs: dict[str, int] | None = None, **over: ProcessResult
) -> Execution:
    rcs = rcs or {}
    sides = []
    for role in (TOPOLOGY, SAMPLER, NVBANDWIDTH, DCGM, KERNEL_LOG):
        if role in over:
            sides.append(Side(NODE, role, role, over[role]))
        elif role in out:
            r = result(out[role], rcs.get(role, 0), killed=role == SAMPLER)
            sides.append(Side(NODE, role, role, r))
    return Execution(tuple(sides))


def judge(run: Execution, prof: GpuLoadProfile) -> list[Verdict]:
    refs = {
        r: f"raw/{NODE}/gpu_load.json#r1-{NODE}.{r}"
        for r in (SAMPLER, NVBANDWIDTH, DCGM, KERNEL_LOG)
    }
    return CHECKS.judge_node(NODE, read_load(NODE, run, prof, refs), prof)


def bad(vs: list[Verdict]) -> set[tuple[str, str, Status]]:
    """(check, component up to the serial, status) of every verdict that did not pass."""
    return {(v.check, comp(v), v.status) for v in vs if v.status is not Status.PASS}


def comp(v: Verdict) -> str:
    return v.component.split(" serial ")[0]


def healthy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *faults: str) -> dict[str, str]:
    out = sim_outputs(monkeypatch, tmp_path, *faults)
    out[KERNEL_LOG] = "-- No entries --\n"
    return out


def test_a_healthy_node_passes_every_check_on_every_gpu(monkeypatch, tmp_path, prof) -> None:
    vs = judge(execution(healthy(monkeypatch, tmp_path)), prof)
    assert bad(vs) == set()
    by = {(v.check, comp(v)): v for v in vs}
    assert {v.check for v in vs} == set(CHECKS.ids()) - {CLEANUP.id}
    assert len([v for v in vs if v.check == "gpu_load.h2d.bandwidth"]) == 8
    h2d = by[("gpu_load.h2d.bandwidth", GPU3)]
    assert (h2d.observed, h2d.expected, h2d.unit) == (55.11, ">= 45", "GB/s")
    assert h2d.evidence == (f"raw/{NODE}/gpu_load.json#r1-{NODE}.nvbandwidth",)
    tp = by[("gpu_load.dcgm.targeted_power", GPU3)]
    assert (tp.observed, tp.expected, tp.unit) == (699.1, ">= 560", "W")
    pulse = by[("gpu_load.dcgm.pulse_test", "node")]
    assert (pulse.status, pulse.observed, pulse.expected) == (
        Status.PASS, None, "not selected by gpu_load.run at this run's level",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "want"),
    [
        ("h2d_slow", {("gpu_load.h2d.bandwidth", GPU3, Status.FAIL)}),
        ("hbm_slow", {("gpu_load.hbm.bandwidth", GPU3, Status.FAIL)}),
        ("dcgm_targeted_power_fail", {("gpu_load.dcgm.targeted_power", GPU3, Status.FAIL)}),
        ("power_brake", {("gpu_load.telemetry.throttle", GPU3, Status.FAIL),
                         ("gpu_load.telemetry.sm_clock", GPU3, Status.FAIL)}),
        ("thermal_throttle_under_load", {("gpu_load.telemetry.throttle", GPU3, Status.FAIL),
                                         ("gpu_load.telemetry.sm_clock", GPU3, Status.FAIL),
                                         ("gpu_load.telemetry.temperature", GPU3, Status.FAIL)}),
        ("sm_clock_drop", {("gpu_load.telemetry.sm_clock", GPU3, Status.FAIL)}),
    ],
)  # fmt: skip
def test_each_fault_is_its_gpus_only(monkeypatch, tmp_path, prof, fault, want) -> None:
    out = healthy(monkeypatch, tmp_path, fault)
    # the simulated query ran after nvbandwidth and dcgmi marked the node loaded
    rcs = {DCGM: 226} if fault == "dcgm_targeted_power_fail" else {}
    assert bad(judge(execution(out, rcs), prof)) == want


def test_h2d_far_below_its_peers_names_the_placement(monkeypatch, tmp_path, prof) -> None:
    vs = judge(execution(healthy(monkeypatch, tmp_path, "h2d_slow")), prof)
    (v,) = [v for v in vs if v.status is Status.FAIL]
    assert v.message == (
        "host_to_device_memcpy_ce: 13.5 GB/s (peers' median 55.08 GB/s); far below its peers "
        "with a PCIe link pcie_gpu passed: its placement (0000:5d:00.0: NUMA node 0 (CPUs "
        "0-55,112-167), its PCIe switch shared with mlx5_3; the other GPUs of NUMA node 0 at "
        "55.17 GB/s: its root port or switch (ACS/ATS), not the NUMA node)"
    )
    assert v.remediation is not None and "root port and NUMA node" in v.remediation
    assert v.remediation_class is None  # the profile's class for the check (reseat_cable)


def test_every_gpu_of_one_numa_node_slow_blames_that_numa_node(monkeypatch, tmp_path, prof):
    out = healthy(monkeypatch, tmp_path)
    head, rest = out[NVBANDWIDTH].split("Running device_to_host", 1)
    row = next(ln for ln in head.splitlines() if ln.startswith(" 0 "))
    cells = row.split()[1:]
    slow = cells[:4] + ["21.30"] * 4  # GPU4-7: NUMA node 1 in the topology
    head = head.replace(row, " 0" + "".join(f"{c:>10}" for c in slow))
    out[NVBANDWIDTH] = head + "Running device_to_host" + rest
    vs = [v for v in judge(execution(out), prof) if v.status is Status.FAIL]
    assert {(v.check, v.component) for v in vs} == {("gpu_load.h2d.bandwidth", "host NUMA node 1")}
    assert len(vs) == 4 and {v.remediation_class for v in vs} == {"fix_config"}
    assert vs[0].message.endswith(
        "every GPU of NUMA node 1 (GPU4, GPU5, GPU6, GPU7) is below the floor while the other "
        "NUMA nodes' pass: the host side of that NUMA node"
    )


def test_without_the_topology_the_placement_says_why(monkeypatch, tmp_path, prof) -> None:
    out = healthy(monkeypatch, tmp_path, "h2d_slow")
    out[TOPOLOGY] = "NVIDIA-SMI has failed\n"
    vs = judge(execution(out, {TOPOLOGY: 9}), prof)
    (v,) = [v for v in vs if v.status is not Status.PASS]
    assert v.message.endswith(
        "its placement (0000:5d:00.0: root port, NUMA node, ACS/ATS; unrecognized output of "
        "`topology` (exited 9: NVIDIA-SMI has failed): first line is not a topology header: "
        "'NVIDIA-SMI has failed')"
    ), v.message


def test_every_gpu_slow_alike_blames_the_host(monkeypatch, tmp_path, prof) -> None:
    out = healthy(monkeypatch, tmp_path)
    out[NVBANDWIDTH] = re.sub(r" 5[45]\.(\d\d)", r" 25.\1", out[NVBANDWIDTH])
    vs = [v for v in judge(execution(out), prof) if v.status is Status.FAIL]
    assert {(v.check, v.component) for v in vs} == {
        ("gpu_load.h2d.bandwidth", "host PCIe (every GPU)"),
        ("gpu_load.d2h.bandwidth", "host PCIe (every GPU)"),
    }
    assert {v.remediation_class for v in vs} == {"fix_config"}
    assert len(vs) == 16  # one per GPU and direction, each naming the host


def test_d2d_one_bad_gpu_is_blamed_not_its_peers(monkeypatch, tmp_path, prof) -> None:
    out = healthy(monkeypatch, tmp_path)
    lines = out[NVBANDWIDTH].split("\n")
    start = lines.index("Running device_to_device_memcpy_read_ce.") + 3
    for i in range(start, start + 8):  # GPU5's row and column at 120 GB/s
        cells = lines[i].split()
        cells = [c if j - 1 != 5 and int(cells[0]) != 5 else ("N/A" if c == "N/A" else "120.00")
                 for j, c in enumerate(cells)]  # fmt: skip
        cells[0] = lines[i].split()[0]
        lines[i] = f"{cells[0]:>2}" + "".join(f"{c:>10}" for c in cells[1:])
    out[NVBANDWIDTH] = "\n".join(lines)
    vs = judge(execution(out), prof)
    assert bad(vs) == {("gpu_load.d2d.bandwidth", "GPU5 0000:bb:00.0", Status.FAIL)}
    (v,) = [v for v in vs if v.status is Status.FAIL]
    assert v.observed == 120.0 and v.message.startswith(
        "device_to_device_memcpy_read_ce: median 120"
    )


def test_throttle_quotes_the_samples_under_load(prof) -> None:
    samples = (FORMATS / LOOP).read_text(encoding="utf-8")
    out = {SAMPLER: samples, KERNEL_LOG: "-- No entries --\n"}
    p = replace(prof, run=replace(prof.run, testcases=(), dcgm_level=None, dcgm_plugins=()))
    vs = judge(execution(out), p)
    assert bad(vs) == {
        ("gpu_load.telemetry.throttle", GPU3, Status.FAIL),
        ("gpu_load.telemetry.sm_clock", GPU3, Status.FAIL),
        ("gpu_load.telemetry.temperature", GPU3, Status.FAIL),
    }
    hot = next(
        v for v in vs if v.check == "gpu_load.telemetry.throttle" and v.status is Status.FAIL
    )
    assert hot.observed == "hw_thermal_slowdown, sw_thermal_slowdown"
    assert hot.message == (
        "hw_thermal_slowdown, sw_thermal_slowdown active in 2 of 3 samples under load: "
        "2026/12/01 18:40:02.121 SM 1275/1980 MHz 92 C 688.4 W; "
        "2026/12/01 18:40:03.123 SM 1275/1980 MHz 92 C 688.4 W"
    )
    assert "cooling" in (hot.remediation or "")
    # what the level leaves out passes as not run at this level, never an error
    skipped = {
        v.check for v in vs if v.expected == "not selected by gpu_load.run at this run's level"
    }
    assert skipped == {c for c in CHECKS.ids() if ".dcgm." in c or c.endswith("bandwidth")}


def test_ecc_delta_and_xid_under_load(prof) -> None:
    samples = (FORMATS / LOOP).read_text(encoding="utf-8").splitlines()
    last = samples[-1]  # GPU7's last sample: 2 uncorrectable errors counted since the first
    samples[-1] = last[: last.rindex(", ")] + ", 2"
    klog = ("2026-12-01T18:40:02+0000 gpu017 kernel: NVRM: Xid (PCI:0000:3b:00): 13, "
            "pid='<unknown>', name=<unknown>, Graphics SM Warp Exception\n")  # fmt: skip
    out = {SAMPLER: "\n".join(samples) + "\n", KERNEL_LOG: klog}
    p = replace(prof, run=replace(prof.run, testcases=(), dcgm_level=None, dcgm_plugins=()))
    vs = judge(execution(out), p)
    got = {(v.check, comp(v), v.observed) for v in vs if v.status is Status.FAIL}
    assert got == {
        ("gpu_load.telemetry.ecc", "GPU7 0000:db:00.0", 2),
        ("gpu_load.telemetry.xid", "GPU1 0000:3b:00.0", 1),
        ("gpu_load.telemetry.throttle", GPU3, "hw_thermal_slowdown, sw_thermal_slowdown"),
        ("gpu_load.telemetry.sm_clock", GPU3, 2),
        ("gpu_load.telemetry.temperature", GPU3, 92.0),
    }


def test_sm_clock_names_the_reason_or_none_and_counts_only_samples_under_load(prof) -> None:
    samples = (FORMATS / LOOP).read_text(encoding="utf-8")
    p = replace(prof, run=replace(prof.run, testcases=(), dcgm_level=None, dcgm_plugins=()))

    def clock(text: str, prof: GpuLoadProfile = p) -> list[Verdict]:
        vs = judge(execution({SAMPLER: text, KERNEL_LOG: "-- No entries --\n"}), prof)
        return [v for v in vs if v.check == "gpu_load.telemetry.sm_clock"]

    hot = [v for v in clock(samples) if v.status is not Status.PASS]
    assert [(comp(v), v.status, v.observed, v.expected, v.unit) for v in hot] == [
        (GPU3, Status.FAIL, 2, "<= 1 samples below 75 % of clocks.max.sm", "samples")
    ]
    assert hot[0].message == (
        "SM clock below 75 % of max in 2 of 2 samples under load: "
        "2026/12/01 18:40:02.121 SM 1275/1980 MHz 92 C 688.4 W; "
        "2026/12/01 18:40:03.123 SM 1275/1980 MHz 92 C 688.4 W "
        "(clock event reasons active: hw_thermal_slowdown, sw_thermal_slowdown)"
    )  # the idle first sample (345 MHz, GPU-idle bit) is not counted
    assert "(hw_thermal_slowdown, sw_thermal_slowdown)" in (hot[0].remediation or "")
    # the same drop with no reason reported still fails, saying so
    quiet = samples.replace("0x0000000000000060, Not Active, Not Active, Active, Not Active, "
                            "Active", "0x0000000000000000, Not Active, Not Active, Not Active, "
                            "Not Active, Not Active")  # fmt: skip
    (v,) = [v for v in clock(quiet) if v.status is not Status.PASS]
    assert v.message.endswith("(no clock event reason reported)") and v.observed == 2
    assert "with no reason NVML reports" in (v.remediation or "")
    # one sample below is a ramp, not a drop: max_samples_below 1 passes it
    one = "\n".join(ln for ln in samples.splitlines() if "18:40:03.123" not in ln) + "\n"
    assert {v.status for v in clock(one)} == {Status.PASS}
    # a mask that is not reported: ERROR (idle cannot be told from load), never a pass
    na = samples.replace("1275 MHz, 1980 MHz, 0x0000000000000060", "1275 MHz, 1980 MHz, [N/A]")
    (e,) = [v for v in clock(na) if v.status is not Status.PASS]
    assert (comp(e), e.status) == (GPU3, Status.ERROR) and e.message.startswith(
        "clocks_event_reasons.active not reported ([N/A])"
    )
    # a profile without the rule: one PASS saying so
    plain = replace(p, telemetry=replace(p.telemetry, sm_clock=None))
    assert [(v.component, v.status, v.message) for v in clock(samples, plain)] == [
        ("node", Status.PASS, "the profile sets no gpu_load.telemetry.sm_clock")
    ]


@pytest.mark.parametrize(
    ("role", "res", "why"),
    [
        (NVBANDWIDTH, result("", None, timed_out=True),
         "nvbandwidth killed at its deadline after 1 s"),
        (NVBANDWIDTH, result("", 127, stderr="sh: 1: nvbandwidth: not found"),
         "absent: `nvbandwidth` exited 127 (sh: 1: nvbandwidth: not found)"),
        (NVBANDWIDTH, result("#!%@ segfault??\n", 0),
         "unrecognized output of `nvbandwidth`: no testcase result "
         "(no 'Running <testcase>.' block)"),
        (DCGM, result("{", 1), "unrecognized output of `dcgmi` (exited 1: {): not valid JSON "
                               "(Expecting property name enclosed in double quotes at line 1)"),
    ],
)  # fmt: skip
def test_a_part_that_cannot_be_read_is_error_on_its_checks_only(
    monkeypatch, tmp_path, prof, role, res, why
) -> None:
    vs = judge(execution(healthy(monkeypatch, tmp_path), **{role: res}), prof)
    errs = {(v.check, v.message) for v in vs if v.status is Status.ERROR}
    mine = [c for c in CHECKS.ids() if (".dcgm." in c) == (role == DCGM) and
            (c.endswith("bandwidth") and ".dcgm." not in c or role == DCGM)]  # fmt: skip
    sel = [c for c in mine if not c.endswith("pulse_test")]
    assert errs == {(c, why) for c in sel}
    assert not [v for v in vs if v.status is Status.FAIL]


def test_no_sample_is_every_telemetry_check_error(monkeypatch, tmp_path, prof) -> None:
    out = healthy(monkeypatch, tmp_path)
    out[SAMPLER] = out[SAMPLER].splitlines()[0] + "\n"
    vs = judge(execution(out), prof)
    errs = {v.check for v in vs if v.status is Status.ERROR}
    assert errs == {c for c in CHECKS.ids() if ".telemetry." in c}
    assert {v.message for v in vs if v.status is Status.ERROR} == {
        "the sampler printed its header but no sample"
    }


def test_the_commands(prof) -> None:
    assert sampler_argv(prof)[-2:] == ("-lms", "1000")
    assert dcgm_argv(prof) == ("dcgmi", "diag", "-r", "3", "-p",
                               "targeted_stress.test_duration=120;targeted_power.test_duration=120",
                               "-j")  # fmt: skip
    assert nvbandwidth_argv(prof)[:2] == ("nvbandwidth", "-t")


def test_a_sampler_that_stopped_before_the_load_ended_cannot_pass(prof) -> None:
    samples = (FORMATS / LOOP).read_text(encoding="utf-8")
    gap = "the samples do not cover the load: the sampler exited 9 before the stage ended it"
    sampler = Side(NODE, SAMPLER, "nvidia-smi", result(samples, 9), gap)
    run = Execution((sampler, Side(NODE, KERNEL_LOG, "journalctl", result("-- No entries --\n"))))
    p = replace(prof, run=replace(prof.run, testcases=(), dcgm_level=None, dcgm_plugins=()))
    vs = judge(run, p)
    assert {(v.check, v.status, v.message) for v in vs if v.status is not Status.PASS} == {
        (c, Status.ERROR, gap) for c in CHECKS.ids() if ".telemetry." in c
    }
