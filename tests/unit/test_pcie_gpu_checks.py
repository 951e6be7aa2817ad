"""pcie_gpu evaluation (pure: command outputs + profile -> verdicts), incl. every error path."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

import pytest
from nodegate.core.errors import ConfigError
from nodegate.core.values import CommandResult, NodeOutcome, Reach, Status, Verdict
from nodegate.profiles import Profile, load_profile_file
from nodegate.sim.fleet_model import Fault, SimNode
from nodegate.sim.tools import answer
from nodegate.sim.tools import pcie_gpu as sim
from nodegate.stages.pcie_gpu import STAGE
from nodegate.stages.pcie_gpu.checks import CHECKS
from nodegate.stages.pcie_gpu.profile import PcieGpuProfile
from nodegate.transport.script import command_line

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "corpus" / "gpu"
MODULE_OF_GPU6 = 6  # HGX module id of the template's 7th GPU (0000:cb:00.0)
PROFILES = [
    REPO / "inventories" / "profiles" / f"{name}.yaml"
    for name in ("generic-hgx-h100", "nd-a100-v4", "nd-h100-v5", "nd-h200-v5")
]


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_profile_file(REPO / "inventories" / "profiles" / "generic-hgx-h100.yaml")


def sim_outputs(profile: Profile, faults: tuple[Fault, ...] = ()) -> dict[str, CommandResult]:
    """What the simulated node answers to every command of the stage."""
    node = SimNode("gpu001", 0, "127.0.0.1", {}, {"nvidia_driver": "535.161.08"}, faults)
    tools = {t.name: t for t in sim.tools(node)}
    out = {}
    for spec in STAGE.commands(None, profile):  # type: ignore[arg-type]
        cmd = command_line(spec.argv)
        argv = shlex.split(cmd)
        r = answer(tools[argv[0]], argv[1:])
        out[spec.id] = CommandResult(
            spec.id,
            cmd,
            r.rc,
            r.stdout,
            r.stderr,
            0.1,
            evidence=f"raw/gpu001/pcie_gpu.json#{spec.id}",
        )
    return out


def run(
    profile: Profile,
    faults: tuple[Fault, ...] = (),
    replace: dict[str, tuple[int | None, str]] | None = None,
    prof_edit: dict[str, Any] | None = None,
) -> list[Verdict]:
    results = sim_outputs(profile, faults)
    for cid, (rc, text) in (replace or {}).items():
        old = results[cid]
        results[cid] = CommandResult(
            cid, old.cmd, rc, text, "", 0.1, timed_out=rc == 124, evidence=old.evidence
        )
    sec = copy.deepcopy(dict(profile.section("pcie_gpu")))
    sec.update(prof_edit or {})
    out = NodeOutcome("gpu001", Reach.OK, results)
    typed = PcieGpuProfile.of(sec)
    return CHECKS.judge_node("gpu001", STAGE.facts(out, typed), typed)


def not_passing(vs: list[Verdict]) -> set[tuple[str, str]]:
    return {(v.check, v.status.value) for v in vs if v.status is not Status.PASS}


def test_healthy_node_passes_every_check(profile):
    vs = run(profile)
    assert not_passing(vs) == set()
    assert {v.check for v in vs} == {c.id for c in STAGE.checks} == set(CHECKS.ids())
    for v in vs:
        assert v.component and v.evidence or v.check == "gpu.fabric" and not v.evidence
    per_gpu = [v for v in vs if v.check == "pcie.gpu.width"]
    assert [v.component for v in per_gpu][3] == "GPU3 0000:5d:00.0 serial 1650124032506"
    # 8 GPUs x 3 ports (root port, switch upstream, switch downstream)
    assert len([v for v in vs if v.check == "pcie.switch.link"]) == 24


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        (Fault("gpu_missing"), "gpu.count"),
        (Fault("gpu_pcie_x8", "5"), "pcie.gpu.width"),
        (Fault("gpu_pcie_gen4"), "pcie.gpu.gen"),
        (Fault("xid", "79"), "gpu.xid"),
        (Fault("xid", "48"), "gpu.xid"),
        (Fault("xid", "94"), "gpu.xid"),
        (Fault("xid", "119"), "gpu.xid"),
        (Fault("ecc_dbe"), "gpu.ecc.uncorrectable"),
        (Fault("remap_pending"), "gpu.remap"),
        (Fault("nvlink_down"), "gpu.nvlink"),
        (Fault("fabricmanager_stopped"), "gpu.fabric"),
        (Fault("hw_slowdown"), "gpu.clocks"),
        (Fault("dcgm_fail"), "gpu.dcgm"),
    ],
    ids=str,
)
def test_each_fault_fails_its_check_only(profile, fault, check):
    vs = run(profile, (fault,))
    assert not_passing(vs) == {(check, "fail")}
    bad = [v for v in vs if v.status is Status.FAIL]
    assert all(v.remediation and v.evidence for v in bad)


def test_xid_actions_from_the_profile_table(profile):
    vs = [v for v in run(profile, (Fault("xid", "13"),)) if v.check == "gpu.xid"]
    assert [(v.status, v.observed) for v in vs] == [(Status.PASS, "13")]  # application error
    vs = [v for v in run(profile, (Fault("xid", "4242"),)) if v.check == "gpu.xid"]
    assert vs[0].status is Status.FAIL and "not in the profile's Xid table" in vs[0].message
    assert vs[0].remediation and "reset" in vs[0].remediation  # unknown_action: reset
    vs = [
        v
        for v in run(profile, (Fault("xid", "79@2"), Fault("xid", "63@2")))
        if v.check == "gpu.xid"
    ]
    assert vs[0].component.startswith("GPU2 0000:4c:00.0") and "RMA" in (vs[0].remediation or "")


def test_corpus_xid_log_maps_to_gpus(profile):
    # Real journal-style lines: Xid 48/63/94 on 0000:19:00 = GPU0 of the simulated node.
    text = (CORPUS / "dmesg__xid-48-63-94-dbe-row-remap-contained-plus-peermem.txt").read_text()
    vs = [v for v in run(profile, replace={"kernel_log": (0, text)}) if v.check == "gpu.xid"]
    assert [(v.component.split(" serial")[0], v.observed, v.status) for v in vs] == [
        ("GPU0 0000:19:00.0", "48, 63, 94", Status.FAIL)
    ]


def test_empty_kernel_window_is_no_events(profile):
    vs = run(profile, replace={"kernel_log": (0, "-- No entries --\n")})
    assert not_passing(vs) == set()


@pytest.mark.parametrize(
    ("cid", "rc", "text", "checks"),
    [
        (
            "nvsmi",
            127,
            "",
            {
                "gpu.count",
                "gpu.model",
                "gpu.driver",
                "pcie.gpu.gen",
                "pcie.gpu.width",
                "pcie.switch.link",
                "gpu.ecc.mode",
                "gpu.ecc.uncorrectable",
                "gpu.remap",
                "gpu.retired_pages",
                "gpu.nvlink",
                "gpu.fabric",
                "gpu.clocks",
                "gpu.persistence",
            },
        ),
        (
            "nvsmi",
            0,
            "\x1b[31m#!%@ segfault??\n",
            {
                "gpu.count",
                "gpu.model",
                "gpu.driver",
                "pcie.gpu.gen",
                "pcie.gpu.width",
                "pcie.switch.link",
                "gpu.ecc.mode",
                "gpu.ecc.uncorrectable",
                "gpu.remap",
                "gpu.retired_pages",
                "gpu.nvlink",
                "gpu.fabric",
                "gpu.clocks",
                "gpu.persistence",
            },
        ),
        ("lspci", 124, "", {"pcie.switch.link"}),
        ("nvlink", 0, "garbage line\n", {"gpu.nvlink"}),
        ("kernel_log", 1, "", {"gpu.xid", "gpu.nvswitch"}),
        ("fabricmanager", 124, "", {"gpu.fabric"}),
        ("dcgm", 124, "", {"gpu.dcgm"}),
        ("dcgm", 0, '{"not": "a diag"}', {"gpu.dcgm"}),
    ],
    ids=lambda x: x if isinstance(x, str) and len(x) < 12 else "",
)
def test_unusable_output_is_error_never_pass(profile, cid, rc, text, checks):
    vs = run(profile, replace={cid: (rc, text)})
    assert not_passing(vs) == {(c, "error") for c in checks}
    errs = [v for v in vs if v.status is Status.ERROR]
    assert all(v.message and v.component for v in errs)


def test_dcgm_absent_passes_only_when_not_required(profile):
    absent = {"dcgm": (127, "")}
    assert not_passing(run(profile, replace=absent)) == {("gpu.dcgm", "error")}
    dcgm = {**profile.section("pcie_gpu")["dcgm"], "required": False}
    assert not_passing(run(profile, replace=absent, prof_edit={"dcgm": dcgm})) == set()


def test_fabric_manager_not_installed_fails(profile):
    text = "Unit nvidia-fabricmanager.service could not be found.\n"
    vs = run(profile, replace={"fabricmanager": (4, text)})
    fm = [v for v in vs if v.check == "gpu.fabric" and v.status is not Status.PASS]
    assert [(v.component, v.status, v.observed) for v in fm] == [
        ("nvidia-fabricmanager", Status.FAIL, "not-found (-)")
    ]


def test_nvlink_all_links_inactive_and_profiles_without_nvlink(profile):
    good = sim_outputs(profile)["nvlink"].stdout
    uuid = good.split("\n")[3 * 19].split("UUID: ")[1].rstrip(")")
    head = good.split("\n")[3 * 19]
    assert uuid in head
    broken = good.replace(
        "\n".join(good.split("\n")[3 * 19 : 3 * 19 + 19]),
        head + "\nNVML: Unable to retrieve NVLink information as all links are inactive",
    )
    vs = [v for v in run(profile, replace={"nvlink": (0, broken)}) if v.status is Status.FAIL]
    assert [(v.check, v.component.split(" serial")[0], v.observed) for v in vs] == [
        ("gpu.nvlink", "GPU3 0000:5d:00.0", "0 active")
    ]
    vs = run(profile, (Fault("nvlink_down"),), prof_edit={"nvlink": None})
    assert not_passing(vs) == set()


def test_switch_ports_not_visible_profile(profile):
    pcie = {**profile.section("pcie_gpu")["pcie"], "switch_ports": False}
    vs = [v for v in run(profile, prof_edit={"pcie": pcie}) if v.check == "pcie.switch.link"]
    assert [(v.status, v.observed) for v in vs] == [(Status.PASS, "not checked")]


def test_pre_ampere_retired_pages_and_remap(profile):
    # Page retirement counters (corpus: -q -d PAGE_RETIREMENT, 8 GPUs, all zero).
    text = (CORPUS / "nvidia-smi-q-d-page-retirement__azure-8gpu-driver535.86.10.txt").read_text()
    vs = run(profile, replace={"nvsmi": (0, text)})
    pages = [v for v in vs if v.check == "gpu.retired_pages"]
    assert len(pages) == 8 and all(v.status is Status.PASS and v.observed == 0 for v in pages)
    # No retirement and no remapper state (Titan V prints N/A for both): cannot judge.
    text = (CORPUS / "nvidia-smi-q__titan-v-volta-driver560.35.03.txt").read_text()
    vs = run(profile, replace={"nvsmi": (0, text)})
    by = {v.check: v for v in vs if v.component.startswith("GPU0")}
    assert by["gpu.retired_pages"].status is Status.ERROR
    assert by["gpu.remap"].status is Status.ERROR  # the profile says these GPUs remap rows
    assert by["gpu.model"].status is Status.FAIL  # a Titan V is not an H100
    vs = run(profile, replace={"nvsmi": (0, text)}, prof_edit={"row_remap": {"required": False}})
    remap = [v for v in vs if v.check == "gpu.remap"]
    assert [(v.status, v.observed) for v in remap] == [(Status.PASS, "n/a")]


def test_lspci_gpu_unknown_to_nvidia_smi_is_named(profile):
    text = sim_outputs(profile)["nvsmi"].stdout
    head, *blocks = text.split("\nGPU 0000")
    dropped = head.replace(
        "Attached GPUs                             : 8",
        "Attached GPUs                             : 7",
    )
    dropped += "".join("\nGPU 0000" + b for i, b in enumerate(blocks) if i != 6)
    vs = [v for v in run(profile, replace={"nvsmi": (0, dropped)}) if v.check == "gpu.count"]
    assert [(v.status, v.component) for v in vs] == [
        (Status.FAIL, "GPU 0000:cb:00.0 (lspci only)"),
        (Status.FAIL, f"GPU module(s) {MODULE_OF_GPU6} missing"),
    ]


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_shipped_profiles_have_the_section_and_cite_it(path):
    prof = load_profile_file(path)
    sec = prof.section("pcie_gpu")
    assert set(sec) >= {"gpu", "pcie", "xid", "dcgm"}
    sources = prof.data["sources"]
    for key in sec:
        assert any(k == f"pcie_gpu.{key}" or k.startswith(f"pcie_gpu.{key}") for k in sources), (
            path.name,
            key,
        )


def test_real_h200_capture_against_nd_h200_v5():
    """Real `nvidia-smi -q` of one H200 (device machine): per-GPU checks pass, the count not."""
    prof = load_profile_file(REPO / "inventories" / "profiles" / "nd-h200-v5.yaml")
    text = (
        (REPO / "tests" / "fixtures" / "device")
        .joinpath("nvidia-smi-q__h200-1gpu-vm-driver580.159.04-session-capture.txt")
        .read_text()
    )
    # The other commands answer as a healthy simulated node; nvlink as on that machine.
    vs = run(prof, replace={"nvsmi": (0, text), "nvlink": (0, "")})
    by = {(v.check, v.status.value) for v in vs if v.status is not Status.PASS}
    assert by == {
        ("gpu.count", "fail"),  # 1 of 8
        ("gpu.nvlink", "error"),  # nvlink -s printed nothing
        ("gpu.fabric", "error"),  # Fabric State N/A: no NVSwitch in this VM
    }
    model = next(v for v in vs if v.check == "gpu.model")
    assert model.observed == "10de:2335" and model.component.startswith("GPU0 0000:00:06.0 serial")


def test_no_devices_found_is_a_count_failure(profile):
    vs = run(profile, replace={"nvsmi": (6, "No devices were found\n")})
    count = [v for v in vs if v.check == "gpu.count"]
    assert [(v.status, v.observed, v.expected) for v in count] == [(Status.FAIL, 0, 8)]
    assert ("gpu.model", "error") in not_passing(vs)


def test_an_xid_older_than_the_window_is_not_judged(profile):
    """#21: the simulated journalctl ignored --since, so a 2-day-old Xid counted as "last 24 h"
    (its records were stamped 2026-11-29). It honours the window the stage asks for."""
    old = run(profile, (Fault("xid", "79@2~48h"),))
    assert not_passing(old) == set()
    xid = [v for v in old if v.check == "gpu.xid"]
    assert {v.message for v in xid} == {"no Xid in the last 24 h"}
    fresh = run(profile, (Fault("xid", "79@2"), Fault("xid", "48@1~48h")))
    assert not_passing(fresh) == {("gpu.xid", "fail")}
    assert [(v.component.split()[0], v.observed) for v in fresh if v.status is Status.FAIL] == [
        ("GPU2", "79")
    ]


def test_the_simulated_journal_window_is_read_as_journalctl_reads_it():
    node = SimNode("gpu001", 0, "127.0.0.1", {}, {}, (Fault("xid", "79@2~48h"),))
    (tool,) = [t for t in sim.tools(node) if t.name == "journalctl"]

    def log(*args: str) -> tuple[int, list[str], str]:
        r = answer(tool, ["-k", "-o", "short-iso", *args])
        return r.rc, [ln.split(" kernel: ")[1][:24] for ln in r.stdout.splitlines()], r.stderr

    banner, xid = "NVRM: loading NVIDIA UNI", "NVRM: Xid (PCI:0000:4c:0"
    assert log() == (0, [xid, banner], "")  # no window: the whole journal
    assert log("--since", "-24h") == (0, [banner], "")
    assert log("-S", "-3d") == (0, [xid, banner], "")
    assert log("--since=-1min") == (0, [], "")
    assert log("--since", "-3d", "--until", "-1d") == (0, [xid], "")
    assert log("-S", "yesterday 1 month ago") == (0, [xid, banner], "")  # what `date -d` reads
    assert log("--since", "last tuesday-ish") == (
        1, [], "Failed to parse timestamp: last tuesday-ish\n",
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"fault xid: got '79@2~2d', expected CODE"):
        sim.xid_arg("79@2~2d")
