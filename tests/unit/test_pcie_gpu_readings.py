"""pcie_gpu readings of issue #26 (items 5-8), each on the real capture that showed it: idle
PCIe links, interleaved NVSwitch SXid lines, DCGM 3.x compact results, NVML errors on stdout.
Exact verdicts (component, status, observed, expected, message) of the check concerned."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from nodegate.admission.remediation import table_of
from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.core.values import NodeOutcome, Reach, Verdict
from nodegate.parsers.dcgm import DcgmDiag, parse_dcgmi_diag
from nodegate.profiles import Profile, load_profile_file
from nodegate.stages.pcie_gpu import STAGE
from nodegate.stages.pcie_gpu.checks import CHECKS

from tests.unit.test_pcie_gpu_checks import CORPUS, REPO, run, sim_outputs
from tests.unit.test_pcie_gpu_profile import _write_variant
from tests.unit.test_pcie_gpu_trust import Pin, pins

PROFILES = REPO / "inventories" / "profiles"
SXID_LOG = "dmesg__sxid-22013-nvswitch-nonfatal-link-60.txt"
SXID_WANT = "no NVSwitch SXid needing action in the last 24 h"
DCGM_R2 = "dcgmi-diag-r2__a100-sxm4-80gb-8gpu-aws-p4de-dcgm3.3.3-driver535.104.12.txt"
DCGM_R3 = "dcgmi-diag-r3__h100-8gpu-dcgm3.3.8-driver560.35.03-cuda-init-fail-no-fabricmanager.txt"
NVML_MISMATCH = "nvidia-smi__nvml-driver-library-version-mismatch-nvml570.124-stdout.txt"
IDLE_CARDS = "nvidia-smi-q__rtx4090-8gpu-server-driver535.154.05.txt"
DCGM_WANT = "diag -r 1: every test Pass or Skip"
DEPLOYMENT = (
    *("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks"),
    *("Persistence Mode", "Environment Variables", "Page Retirement/Row Remap"),
    *("Graphics Processes", "Inforom"),
)


@pytest.fixture(scope="module")
def h100() -> Profile:
    return load_profile_file(PROFILES / "generic-hgx-h100.yaml")


@pytest.fixture(scope="module")
def gpus(h100: Profile) -> list[str]:
    """The simulated node's GPU component names, GPU0..GPU7."""
    return [v.component for v in run(h100) if v.check == "gpu.persistence"]


def interleaved_sxids() -> str:
    """Two NVSwitches' SXid lines interleaved, built from the corpus lines (SXID_LOG): switch
    3's error (made Fatal) twice, the second 1 s later; switch 2's copy (renamed, non-fatal)
    logged between the lines of the first."""
    head, sev, data = (CORPUS / SXID_LOG).read_text().splitlines()
    fatal = [ln.replace("22013, Non-fatal", "22013, Fatal") for ln in (head, sev, data)]
    other = [
        ln.replace("nvswitch3", "nvswitch2").replace("0000:08:00.0", "0000:07:00.0")
        for ln in (head, sev, data)
    ]
    later = [ln.replace("[  117.", "[  118.") for ln in fatal]
    return "\n".join([fatal[0], other[0], fatal[1], other[1], fatal[2], other[2], *later]) + "\n"


def test_interleaved_sxid_lines_count_each_error_once(h100):
    vs = run(h100, replace={"kernel_log": (0, interleaved_sxids())})
    sx = "SXid 22013 (Minion link DLREQ interrupt"
    sw2, sw3 = "NVSwitch 0000:07:00.0", "NVSwitch 0000:08:00.0"
    assert pins(vs, "gpu.nvswitch") == [
        (sw2, "pass", "22013", SXID_WANT, f"{sx}, non-fatal: ignore): kernel log x1"),
        (sw3, "fail", "22013", SXID_WANT, f"{sx}, fatal: reboot): kernel log x2"),
    ]
    (bad,) = [v for v in vs if v.check == "gpu.nvswitch" and v.status.value == "fail"]
    assert bad.remediation_class == "reboot"


def judge_with_diag(profile: Profile, diag: DcgmDiag) -> list[Verdict]:
    """The simulated node's verdicts with `diag` as its DCGM run (dcgmi exit 0)."""
    results = sim_outputs(profile)
    typed = STAGE.profile_of(profile)
    facts = STAGE.facts(NodeOutcome("gpu001", Reach.OK, results), typed)
    return CHECKS.judge_node("gpu001", replace(facts, dcgm=diag, dcgm_rc=0), typed)


def test_dcgm3_compact_all_pass_table_passes_every_gpu(h100, gpus):
    diag = parse_dcgmi_diag((CORPUS / DCGM_R2).read_text())
    got = pins(judge_with_diag(h100, diag), "gpu.dcgm")
    deployment = "; ".join(f"{t} Pass" for t in DEPLOYMENT)
    msg = f"{deployment}; PCIe Pass; GPU Memory Pass"
    assert got == [(g, "pass", "Pass", DCGM_WANT, msg) for g in gpus]


def test_dcgm3_fail_all_fails_every_gpu_with_its_own_warning(h100, gpus):
    diag = parse_dcgmi_diag((CORPUS / DCGM_R3).read_text())
    vs = judge_with_diag(h100, diag)
    got = pins(vs, "gpu.dcgm")
    assert [(c, s) for c, s, *_ in got] == [(g, "fail") for g in gpus]
    for i, (_, _, observed, _, msg) in enumerate(got):
        assert observed == msg and msg.startswith(f"GPU Memory Fail: GPU {i} Error using CUDA")


@pytest.mark.parametrize(
    ("capture", "rc", "status"), [(DCGM_R2, 0, "pass"), (DCGM_R3, 226, "fail")]
)
def test_a_dcgm_text_table_where_json_was_asked_is_read_by_the_text_parser(
    h100, gpus, capture, rc, status
):
    """The text parser is the fallback for `dcgmi diag -j` that prints its table instead (a
    dcgmi or wrapper that ignores -j): the same verdicts as the table judged directly, and a
    failed run (dcgmi exits 226) fails every GPU."""
    text = (CORPUS / capture).read_text()
    got = pins(run(h100, replace={"dcgm": (rc, text)}), "gpu.dcgm")
    assert [(c, s) for c, s, *_ in got] == [(g, status) for g in gpus]
    if rc == 0:
        assert got == pins(judge_with_diag(h100, parse_dcgmi_diag(text)), "gpu.dcgm")


def test_dcgm_output_neither_json_nor_a_table_stays_an_error(h100, gpus):
    got = pins(run(h100, replace={"dcgm": (0, "dcgmi: unknown option -j\n")}), "gpu.dcgm")
    assert [(s, o) for _, s, o, *_ in got] == [("error", None)]
    assert "not valid JSON" in got[0][4]


# Message text as printed by nvidia-smi (documented in NVIDIA forums/driver release notes):
# the driver not loaded, nvidia-smi exits 9 (NVML_ERROR_DRIVER_NOT_LOADED).
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.\n"
)


@pytest.mark.parametrize(
    ("rc", "text"),
    [(18, (CORPUS / NVML_MISMATCH).read_text()), (9, NO_DRIVER)],
    ids=["mismatch", "no-driver"],
)
def test_nvml_failure_on_stdout_is_the_reason_and_asks_for_a_driver_reload(h100, rc, text):
    vs = run(h100, replace={"nvsmi": (rc, text), "nvlink": (rc, text)})
    first = text.splitlines()[0]
    why = f"`nvidia-smi -q` exited {rc}: {first}"
    assert pins(vs, "gpu.driver") == [("nvidia driver", "error", None, ">= 535.104.05", why)]
    nvsmi_errors = [v for v in vs if v.message == why]
    assert len(nvsmi_errors) == len(
        {"gpu.count", "gpu.model", "gpu.driver", "pcie.gpu.gen", "pcie.gpu.width"}
        | {"pcie.switch.link", "gpu.ecc.mode", "gpu.ecc.uncorrectable", "gpu.remap"}
        | {"gpu.retired_pages", "gpu.fabric", "gpu.clocks", "gpu.persistence"}
    )
    table = table_of(h100.data)
    for v in (*nvsmi_errors, *(v for v in vs if v.check == "gpu.nvlink")):
        assert v.status.value == "error"
        assert table.classify(v).remediation_class == "reboot"
        assert v.remediation is not None and "reload the NVIDIA driver or reboot" in v.remediation
    # Any other failure still reads as before (stderr first) and is a retest.
    other = run(h100, replace={"nvsmi": (1, "")})
    (drv,) = [v for v in other if v.check == "gpu.driver"]
    assert drv.message == "`nvidia-smi -q` exited 1: (no output)"
    assert table.classify(drv).remediation_class == "retest"


# A PCIe-card SKU (the capture's 8x RTX 4090, 2684): Gen4 x16 cards straight on the host.
CARDS = {
    "gpu": {"count": {"equal": 8, "unit": "GPUs"}, "pci_device_ids": ["10de:2684"]},
    "pcie": {
        "gen": {"min": 4, "unit": "gen"},
        "width": {"min": 16, "unit": "lanes"},
        "switch_ports": False,
        "idle_pstate": {"min": 8, "unit": "pstate"},
    },
}


def card_gen(h100: Profile, text: str, **pcie: Any) -> list[Pin]:
    """pcie.gpu.gen of the capture's node; the simulated (HGX) lspci is left out."""
    edit = {**CARDS, "pcie": {**CARDS["pcie"], **pcie}}
    vs = run(h100, replace={"nvsmi": (0, text), "lspci": (1, "")}, prof_edit=edit)
    return pins(vs, "pcie.gpu.gen")


def test_idle_pcie_card_link_below_max_is_judged_by_max(h100):
    text = (CORPUS / IDLE_CARDS).read_text()
    names = [c for c, *_ in card_gen(h100, text)]
    assert len(names) == 8
    rule = "an idle GPU's link may run below Max, Max judged (profile: idle from P8)"
    msg = f"PCIe Max Gen4, Gen1 now (nvidia-smi 1) at idle P8: {rule}"
    assert card_gen(h100, text) == [(n, "pass", 4, 4, msg) for n in names]
    # Without idle_pstate (the SXM profiles) the current link is judged: the old reading.
    reseat = [(n, "fail", 1, 4, "PCIe Gen1 (nvidia-smi 1), expected Gen4") for n in names]
    assert card_gen(h100, text, idle_pstate=None) == reseat
    # A busy GPU (P0) below Max is degraded; a Max below the profile fails on the Max.
    pstate = "    Performance State                     : P"
    busy = text.replace(f"{pstate}8\n", f"{pstate}0\n", 1)
    assert card_gen(h100, busy)[0] == reseat[0]
    assert card_gen(h100, busy)[1:] == card_gen(h100, text)[1:]
    gen_max = "                Max                       : "
    slow = text.replace(f"{gen_max}4\n", f"{gen_max}3\n", 1)
    assert card_gen(h100, slow)[0] == (
        names[0], "fail", 3, 4,
        f"PCIe Max Gen3, Gen1 now (nvidia-smi 1) at idle P8: {rule}, expected Gen4",
    )  # fmt: skip


def test_idle_pstate_is_an_optional_profile_threshold(tmp_path):
    def idle(value: Any) -> Threshold | None:
        return STAGE.profile_of(load_profile_file(_write_variant(tmp_path, value))).pcie_idle_pstate

    assert idle({}) is None  # the shipped SXM profiles: current link judged
    assert idle({"pcie.idle_pstate": None}) is None
    assert idle({"pcie.idle_pstate": {"min": 8, "unit": "pstate"}}) == Threshold("min", 8, "pstate")
    with pytest.raises(ConfigError, match=r"pcie_gpu.pcie.idle_pstate: .* not valid under"):
        idle({"pcie.idle_pstate": {"max": 8}})
