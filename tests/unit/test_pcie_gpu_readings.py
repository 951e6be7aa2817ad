"""pcie_gpu readings of issue #26 (items 5-8), each on the real capture that showed it: idle
PCIe links, interleaved NVSwitch SXid lines, DCGM 3.x compact results, NVML errors on stdout.
Exact verdicts (component, status, observed, expected, message) of the check concerned."""

from __future__ import annotations

from typing import Any

import pytest
from nodegate.core.values import Verdict
from nodegate.profiles import Profile, load_profile_file

from tests.unit.test_pcie_gpu_checks import CORPUS, REPO, run

PROFILES = REPO / "inventories" / "profiles"
SXID_LOG = "dmesg__sxid-22013-nvswitch-nonfatal-link-60.txt"
SXID_WANT = "no NVSwitch SXid needing action in the last 24 h"
Pin = tuple[str, str, Any, Any, str]


@pytest.fixture(scope="module")
def h100() -> Profile:
    return load_profile_file(PROFILES / "generic-hgx-h100.yaml")


def pins(vs: list[Verdict], check: str) -> list[Pin]:
    return [
        (v.component, v.status.value, v.observed, v.expected, v.message)
        for v in vs
        if v.check == check
    ]


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
