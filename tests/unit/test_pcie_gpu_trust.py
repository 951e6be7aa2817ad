"""pcie_gpu judgement of issue #9: DCGM test-level results and dcgmi's exit, kernel-log events
(falls off the bus, NVSwitch SXids, the fabric manager's NVSwitch errors) and the per-GPU fabric
state of GPU generations without one. Exact verdicts (component, status, observed, expected,
message) of the check concerned."""

from __future__ import annotations

import json
from typing import Any

import pytest
from nodegate.core.values import Status, Verdict
from nodegate.profiles import Profile, load_profile_file
from nodegate.sim.fleet_model import Fault

from tests.unit.test_pcie_gpu_checks import CORPUS, REPO, not_passing, run, sim_outputs

PROFILES = REPO / "inventories" / "profiles"
DCGM_WANT = "diag -r 1: every test Pass or Skip"
XID_WANT = "no Xid needing action in the last 24 h"
SXID_WANT = "no NVSwitch SXid needing action in the last 24 h"
FALLEN = "dmesg__fallen-off-bus-at-probe-no-xid-l40-open-driver570.158.01.txt"
SXID_LOG = "dmesg__sxid-22013-nvswitch-nonfatal-link-60.txt"
FM_SXID = (
    "systemctl-status-nvidia-fabricmanager__"
    "hgx-8gpu-driver590.48.01-start-script-nvswitch-nonfatal-22013-journal.txt"
)
# NVIDIA/DCGM#254: a test failing by itself while no GPU does.
INTERNAL = (
    "There was an internal error during the test: 'A child process (2378806) exited with "
    "non-zero status 1' Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
    "Rerun diagnostics."
)
Pin = tuple[str, str, Any, Any, str]


@pytest.fixture(scope="module")
def h100() -> Profile:
    return load_profile_file(PROFILES / "generic-hgx-h100.yaml")


@pytest.fixture(scope="module")
def a100() -> Profile:
    return load_profile_file(PROFILES / "nd-a100-v4.yaml")


@pytest.fixture(scope="module")
def gpus(h100: Profile) -> list[str]:
    """The simulated node's GPU component names, GPU0..GPU7."""
    return [v.component for v in run(h100) if v.check == "gpu.persistence"]


def pins(vs: list[Verdict], check: str) -> list[Pin]:
    return [
        (v.component, v.status.value, v.observed, v.expected, v.message)
        for v in vs
        if v.check == check
    ]


def dcgm_doc(h100: Profile, summary: dict[str, Any]) -> str:
    """The healthy node's `dcgmi diag -r 1 -j` with its one test's summary replaced."""
    doc = json.loads(sim_outputs(h100)["dcgm"].stdout)
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"] = summary
    return json.dumps(doc)


def gpu_passes(gpus: list[str]) -> list[Pin]:
    return [(g, "pass", "Pass", DCGM_WANT, "software Pass") for g in gpus]


@pytest.mark.parametrize("rc", [226, 0])
def test_dcgm_test_level_fail_with_every_gpu_row_pass_fails(h100, gpus, rc):
    text = dcgm_doc(h100, {"status": "Fail", "warnings": [{"warning": INTERNAL}]})
    vs = run(h100, replace={"dcgm": (rc, text)})
    failed = f"software Fail: {INTERNAL}"
    assert pins(vs, "gpu.dcgm") == [
        ("dcgmi diag", "fail", failed, DCGM_WANT, failed),
        *gpu_passes(gpus),
    ]
    assert not_passing(vs) == {("gpu.dcgm", "fail")}


@pytest.mark.parametrize("rc", [226, 1])
def test_dcgmi_nonzero_exit_the_document_does_not_explain_is_an_error(h100, gpus, rc):
    healthy = sim_outputs(h100)["dcgm"].stdout
    vs = run(h100, replace={"dcgm": (rc, healthy)})
    why = f"dcgmi exited {rc} but no test in its diag document failed"
    assert pins(vs, "gpu.dcgm") == [
        *gpu_passes(gpus),
        ("dcgmi diag", "error", None, DCGM_WANT, why),
    ]
    assert not_passing(run(h100, replace={"dcgm": (0, healthy)})) == set()


def test_a100_fabric_state_na_passes_when_the_fabric_manager_runs(h100, a100, gpus):
    nvsmi = sim_outputs(h100)["nvsmi"].stdout
    na = nvsmi.replace(
        "        State                             : Completed\n"
        "        Status                            : Success\n",
        "        State                             : N/A\n"
        "        Status                            : N/A\n",
    )
    assert na.count(": N/A\n        Status") == 8
    want = "N/A (no per-GPU fabric state before Hopper)"
    msg = "no per-GPU fabric state on this GPU generation (profile: per_gpu_state false)"
    fm = ("nvidia-fabricmanager", "pass", "active (running)", "active (running)")
    running = "nvidia-fabricmanager.service active (running)"
    assert pins(run(a100, replace={"nvsmi": (0, na)}), "gpu.fabric") == [
        (*fm, running),
        *[(g, "pass", "N/A", want, msg) for g in gpus],
    ]
    # Hopper reports a fabric state: N/A there is still not judged a pass.
    why = "no Fabric state (N/A): no NVSwitch fabric seen by the driver, or driver too old"
    assert pins(run(h100, replace={"nvsmi": (0, na)}), "gpu.fabric") == [
        (*fm, running),
        *[(g, "error", None, "Completed/Success", why) for g in gpus],
    ]
    # A state an A100 does print is judged as on Hopper.
    pad = "        Status                            : N/A\n"
    one = na.replace(f": N/A\n{pad}", f": In Progress\n{pad}", 1)
    got = pins(run(a100, replace={"nvsmi": (0, one)}), "gpu.fabric")
    judged = (gpus[0], "fail", "In Progress/None", "Completed/Success", "fabric In Progress/None")
    assert got[1] == judged
    assert [p[1] for p in got[2:]] == ["pass"] * 7


def test_fallen_off_bus_without_xid_is_judged_as_xid_79(h100, gpus):
    text = (CORPUS / FALLEN).read_text()
    vs = run(h100, replace={"kernel_log": (0, text)})
    msg = "fallen off the bus x1 without an Xid (as Xid 79, GPU has fallen off the bus: drain_rma)"
    assert pins(vs, "gpu.xid") == [
        ("GPU PCI:0000:b3:00.0", "fail", "fallen off the bus", XID_WANT, msg)
    ]
    (bad,) = [v for v in vs if v.status is not Status.PASS]
    assert bad.remediation == "drain the node and open an RMA for the GPU/baseboard"
    # With its Xid 79 logged too, the fall is that Xid, not a second event.
    both = sim_outputs(h100, (Fault("xid", "79"),))["kernel_log"].stdout + text.replace(
        "0000:b3:00.0", "0000:5d:00.0"
    )
    assert pins(run(h100, replace={"kernel_log": (0, both)}), "gpu.xid") == [
        (gpus[3], "fail", "79", XID_WANT, "Xid 79 x1 (GPU has fallen off the bus: drain_rma)")
    ]


def test_sxids_in_the_kernel_log_judged_by_the_profile_table(h100):
    text = (CORPUS / SXID_LOG).read_text()
    ignore = "SXid 22013 (Minion link DLREQ interrupt, non-fatal: ignore): kernel log x1"
    assert pins(run(h100, replace={"kernel_log": (0, text)}), "gpu.nvswitch") == [
        ("NVSwitch 0000:08:00.0", "pass", "22013", SXID_WANT, ignore)
    ]
    fatal = text.replace("22013, Non-fatal", "22013, Fatal")
    vs = run(h100, replace={"kernel_log": (0, fatal)})
    msg = "SXid 22013 (Minion link DLREQ interrupt, fatal: reboot): kernel log x1"
    assert pins(vs, "gpu.nvswitch") == [("NVSwitch 0000:08:00.0", "fail", "22013", SXID_WANT, msg)]
    assert not_passing(vs) == {("gpu.nvswitch", "fail")}
    unknown = text.replace("22013", "31337")
    msg = "SXid 31337 (not in the profile's SXid table, non-fatal: reset): kernel log x1"
    assert pins(run(h100, replace={"kernel_log": (0, unknown)}), "gpu.nvswitch") == [
        ("NVSwitch 0000:08:00.0", "fail", "31337", SXID_WANT, msg)
    ]


def test_fabric_manager_journal_nvswitch_errors_of_the_running_instance(h100):
    fm = (CORPUS / FM_SXID).read_text()
    klog = (CORPUS / SXID_LOG).read_text()
    vs = run(h100, replace={"fabricmanager": (0, fm), "kernel_log": (0, klog)})
    both = (
        "SXid 22013 (Minion link DLREQ interrupt, non-fatal: ignore): "
        "kernel log x1, fabric manager x1"
    )
    assert pins(vs, "gpu.nvswitch") == [("NVSwitch 0000:08:00.0", "pass", "22013", SXID_WANT, both)]
    reset = fm.replace("error 22013", "error 12028")
    msg = (
        "SXid 12028 (egress non-posted PRIV error (NVLink traffic stalls), non-fatal: reset): "
        "fabric manager x1"
    )
    vs = run(h100, replace={"fabricmanager": (0, reset)})
    assert pins(vs, "gpu.nvswitch") == [("NVSwitch 0000:08:00.0", "fail", "12028", SXID_WANT, msg)]
    assert not_passing(vs) == {("gpu.nvswitch", "fail")}
    # Logged by an earlier fabric manager (another pid): not the running fabric's state.
    old = reset.replace("nv-fabricmanager[5183]: detected", "nv-fabricmanager[4000]: detected")
    none = "no SXid in the kernel log of the last 24 h; none from the fabric manager (pid 5183)"
    assert pins(run(h100, replace={"fabricmanager": (0, old)}), "gpu.nvswitch") == [
        ("NVSwitches", "pass", "none", SXID_WANT, none)
    ]
    # Its status unreadable: gpu.fabric is the ERROR; the kernel log still holds every SXid.
    vs = run(h100, replace={"fabricmanager": (124, "")})
    unread = (
        "no SXid in the kernel log of the last 24 h; "
        "fabric manager journal not read (see gpu.fabric)"
    )
    assert pins(vs, "gpu.nvswitch") == [("NVSwitches", "pass", "none", SXID_WANT, unread)]
    assert not_passing(vs) == {("gpu.fabric", "error")}


@pytest.mark.parametrize(
    ("fault", "check", "component"),
    [
        (Fault("dcgm_test_fail"), "gpu.dcgm", "dcgmi diag"),
        (Fault("sxid", "12028"), "gpu.nvswitch", "NVSwitch 0000:83:00.0"),
        (Fault("sxid", "22013:fatal"), "gpu.nvswitch", "NVSwitch 0000:83:00.0"),
        (Fault("fallen_off_bus", "2"), "gpu.xid", "GPU2 0000:4c:00.0"),
    ],
    ids=str,
)
def test_new_sim_faults_fail_their_check_and_component_only(h100, fault, check, component):
    bad = [v for v in run(h100, (fault,)) if v.status is not Status.PASS]
    assert [(v.check, v.status.value, v.component.split(" serial")[0]) for v in bad] == [
        (check, "fail", component)
    ]
    assert all(v.remediation and v.evidence for v in bad)
    assert not_passing(run(h100, (Fault("sxid", "22013"),))) == set()
