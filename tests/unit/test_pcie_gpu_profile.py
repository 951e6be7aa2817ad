"""The typed pcie_gpu profile section: thresholds and tables from the shipped profiles, the
schema's refusals, the commands it plans, and what a threshold's direction changes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Status
from nodegate.profiles import ProfileLibrary, load_profile_file
from nodegate.sim.fleet_model import Fault
from nodegate.stages.pcie_gpu import STAGE
from nodegate.stages.pcie_gpu.profile import PcieGpuProfile, XidRule
from nodegate.transport.script import command_line

from tests.unit.test_pcie_gpu_checks import REPO, run

PROFILES = REPO / "inventories" / "profiles"


def typed(name: str) -> PcieGpuProfile:
    return STAGE.profile_of(load_profile_file(PROFILES / f"{name}.yaml"))


def test_generic_hgx_h100_typed_section() -> None:
    p = typed("generic-hgx-h100")
    assert (p.gpu_count, p.pcie_gen, p.pcie_width) == (
        Threshold("equal", 8, "GPUs"),
        Threshold("min", 5, "gen"),
        Threshold("min", 16, "lanes"),
    )
    assert (p.ecc_volatile_uncorrectable, p.retired_pages) == (
        Threshold("max", 0, "errors"),
        Threshold("max", 60, "pages"),
    )
    assert p.nvlink is not None
    assert (p.nvlink.links_per_gpu, p.nvlink.speed) == (
        Threshold("equal", 18, "links"),
        Threshold("min", 26.562, "GB/s"),
    )
    assert (p.pci_device_ids, p.switch_ports, p.ecc_enabled, p.persistence_mode) == (
        ("10de:2330",),
        True,
        True,
        True,
    )
    assert p.clock_fail_reasons == (
        "hw_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "sw_thermal_slowdown",
    )
    assert (p.dcgm.level, p.dcgm.timeout_s, p.dcgm.required, p.dcgm.allow_warn) == (
        1,
        300.0,
        True,
        False,
    )
    assert p.driver.judge("535.104.05") == (True, ">= 535.104.05")
    assert p.driver.judge("535.86.10") == (False, ">= 535.104.05")


def test_xid_table_comes_from_the_shared_fragment() -> None:
    lib = ProfileLibrary([PROFILES])
    tables = {n: STAGE.profile_of(lib.get(n)).xid for n in lib.available()}
    assert set(tables) == {
        *("generic-hgx-h100", "hgx-h100-roce", "nd-a100-v4", "nd-h100-v5", "nd-h200-v5")
    }
    for name, xid in tables.items():
        assert (xid.window_hours, xid.unknown_action, len(xid.codes)) == (24, "reset", 22), name
        assert xid.codes[79] == XidRule("GPU has fallen off the bus", "drain_rma")
        assert xid.codes[13].action == "ignore" and list(xid.codes) == sorted(xid.codes)


def test_sxid_table_and_per_gpu_fabric_state_per_generation() -> None:
    lib = ProfileLibrary([PROFILES])
    typed_all = {n: STAGE.profile_of(lib.get(n)) for n in lib.available()}
    assert {n: p.fabric_per_gpu_state for n, p in typed_all.items()} == {
        "generic-hgx-h100": True,
        "hgx-h100-roce": True,
        "nd-a100-v4": False,  # Ampere: Fabric State N/A
        "nd-h100-v5": True,
        "nd-h200-v5": True,
    }
    for name, p in typed_all.items():
        sx = p.sxid
        assert (sx.fatal_action, sx.unknown_action, len(sx.codes)) == ("reboot", "reset", 30), name
        assert sx.codes[22013] == XidRule("Minion link DLREQ interrupt", "ignore")
    sx = typed_all["generic-hgx-h100"].sxid
    assert sx.action(22013, False) == ("ignore", "Minion link DLREQ interrupt")
    assert sx.action(22013, True) == ("reboot", "Minion link DLREQ interrupt")  # logged Fatal
    assert sx.action(19084, False) == ("reboot", "AN1 heartbeat timeout")  # worse than fatal's
    assert sx.action(4242, False) == ("reset", "not in the profile's SXid table")


def test_h200_inherits_every_threshold_but_the_model() -> None:
    h100, h200 = typed("nd-h100-v5"), typed("nd-h200-v5")
    assert h200.pci_device_ids == ("10de:2335",)
    assert h200.driver.judge("550.54.13") == (False, ">= 550.54.14")
    same = ("gpu_count", "pcie_gen", "pcie_width", "nvlink", "xid", "sxid", "dcgm", "switch_ports")
    assert all(getattr(h100, k) == getattr(h200, k) for k in same)


def test_commands_read_the_typed_section() -> None:
    prof = load_profile_file(PROFILES / "generic-hgx-h100.yaml")
    got = STAGE.commands(None, prof)  # type: ignore[arg-type]
    assert [(c.id, command_line(c.argv), c.timeout_s) for c in got] == [
        ("nvsmi", "nvidia-smi -q", 60.0),
        ("lspci", "lspci -vvv", 60.0),
        ("nvlink", "nvidia-smi nvlink -s", 60.0),
        ("kernel_log", "journalctl -k --since -24h -o short-iso --no-pager", 60.0),
        ("fabricmanager", "systemctl status nvidia-fabricmanager --no-pager", 60.0),
        ("dcgm", "dcgmi diag -r 1 -j", 300.0),
    ]


def _write_variant(tmp_path: Path, edit: dict[str, Any]) -> Path:
    """nd-h100-v5's own file with parts of its pcie_gpu section replaced."""
    doc = yaml.safe_load((PROFILES / "nd-h100-v5.yaml").read_text())
    sec = doc["pcie_gpu"]
    for key, value in edit.items():
        head, _, leaf = key.partition(".")
        if leaf:
            sec[head][leaf] = value
        else:
            sec[head] = value
    doc["name"] = "variant"
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"gpu.count": 8}, r"pcie_gpu.gpu.count: 8 is not of type 'object'"),
        ({"gpu.count": {"min": 8}}, r"pcie_gpu.gpu.count: 'equal' is a required property"),
        ({"pcie.gen": {"max": 5}}, r"pcie_gpu.pcie.gen: .* is not valid under any of the given"),
        ({"pcie.width": {"min": 12}}, r"pcie_gpu.pcie.width.min: 12 is not one of \[1, 2, 4"),
        ({"ecc.volatile_uncorrectable": {"equal": 0}}, r"'max' is a required property"),
        ({"retired_pages": {"max_total": 60}}, r"pcie_gpu.retired_pages: 'total' is a required"),
        ({"xid.codes": {"079": {"meaning": "x", "action": "reset"}}}, r"'079' does not match"),
        ({"fabric": {"manager": True}}, r"pcie_gpu.fabric: 'per_gpu_state' is a required"),
        ({"sxid": {"fatal_action": "panic"}}, r"pcie_gpu.sxid.fatal_action: 'panic' is not one of"),
        (
            {"nvlink": {"links_per_gpu": {"equal": 18}, "speed_gbps": 26.5}},
            r"pcie_gpu.nvlink: .* not valid under",
        ),
    ],
    ids=[
        "bare-count",
        "count-min",
        "gen-max",
        "odd-width",
        "ecc-equal",
        "old-key",
        "xid-0",
        "fabric-gen",
        "sxid-action",
        "nvl",
    ],  # fmt: skip
)
def test_schema_refuses_what_the_checks_cannot_judge(tmp_path, edit, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_profile_file(_write_variant(tmp_path, edit))


def _section(edit: dict[str, Any]) -> dict[str, Any]:
    prof = load_profile_file(PROFILES / "generic-hgx-h100.yaml")
    sec = copy.deepcopy(dict(prof.section("pcie_gpu")))
    for key, value in edit.items():
        head, leaf = key.split(".")
        sec[head] = {**sec[head], leaf: value}
    return sec


def test_link_direction_is_the_profiles_choice() -> None:
    prof = load_profile_file(PROFILES / "generic-hgx-h100.yaml")

    def link_statuses(edit: dict[str, Any]) -> set[tuple[str, Status]]:
        sec = _section(edit)
        vs = run(prof, prof_edit={"pcie": sec["pcie"]})
        return {(v.check, v.status) for v in vs if v.check.startswith("pcie.")}

    # The simulated GPUs and switch ports train at Gen5 x16.
    below = {"pcie.gen": {"min": 4, "unit": "gen"}}
    assert link_statuses(below) == {(c, Status.PASS) for c in _PCIE}
    exactly = {"pcie.gen": {"equal": 4, "unit": "gen"}}  # a link trained above now fails
    assert link_statuses(exactly) == {(c, Status.FAIL) for c in ("pcie.gpu.gen", _SWITCH)} | {
        ("pcie.gpu.width", Status.PASS)
    }
    vs = run(prof, prof_edit={"pcie": _section(exactly)["pcie"]})
    gen = next(v for v in vs if v.check == "pcie.gpu.gen")
    assert (gen.observed, gen.expected, gen.unit) == (5, 4, "gen")
    assert gen.message == "PCIe Gen5 (nvidia-smi 5, lspci LnkSta 5), expected Gen4"


_SWITCH = "pcie.switch.link"
_PCIE = ("pcie.gpu.gen", "pcie.gpu.width", _SWITCH)


def test_nvlink_speed_slack_only_absorbs_print_rounding() -> None:
    prof = load_profile_file(PROFILES / "generic-hgx-h100.yaml")
    # nvidia-smi prints 26.562 for the links: a profile 5e-7 above still passes, 1e-3 fails.
    for speed, want in ((26.5620005, Status.PASS), (26.563, Status.FAIL)):
        sec = _section({"nvlink.speed": {"min": speed, "unit": "GB/s"}})
        vs = [v for v in run(prof, prof_edit={"nvlink": sec["nvlink"]}) if v.check == "gpu.nvlink"]
        assert {v.status for v in vs} == {want}, speed
    vs = run(prof, (Fault("nvlink_down"),))
    down = [v for v in vs if v.check == "gpu.nvlink" and v.status is Status.FAIL]
    assert [(v.observed, v.expected) for v in down] == [
        ("17/18 active", "18 links active at >= 26.562 GB/s")
    ]
