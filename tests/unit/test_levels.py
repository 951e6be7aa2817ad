"""Qualification levels (issue #28): --level and its ini twin, each profile's `levels:` overlaid
and validated, the admission policy's min_level, and the level in the terminal, the baseline
and the A/B refusal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nodegate.admission.policy import policy_of
from nodegate.compare.abmode import check_same_level
from nodegate.core.errors import ConfigError
from nodegate.core.settings import DEFAULT_LEVEL, LEVELS, build_settings
from nodegate.profiles import Profile, ProfileLibrary, at_level, validate_profile
from nodegate.reports.terminal import Paths, decision_lines
from nodegate.stages.gpu_load.profile import gpu_load_profile
from nodegate.stages.ib_pairs.profile import ib_pairs_profile
from nodegate.stages.nccl.profile import nccl_profile
from nodegate.stages.pcie_gpu.profile import pcie_gpu_profile
from nodegate.stages.reach.stage import STAGE as REACH
from nodegate.stages.registry import STAGES

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "inventories" / "profiles"


def settings(cli: dict[str, object], ini: dict[str, object] | None = None):
    return build_settings(cli, ini or {}, known_transports={"ssh"}, rootpath=REPO)


def test_level_defaults_to_standard_and_has_an_ini_twin() -> None:
    assert settings({}).level == DEFAULT_LEVEL == "standard"
    assert settings({"nodegate_level": "quick"}).level == "quick"
    assert settings({}, {"nodegate_level": " extended "}).level == "extended"
    assert settings({"nodegate_level": "quick"}, {"nodegate_level": "extended"}).level == "quick"


@pytest.mark.parametrize(
    ("cli", "ini", "message"),
    [
        ({"nodegate_level": "deep"}, {},
         "--level: got 'deep', expected one of quick, standard, extended"),
        ({}, {"nodegate_level": "fast"},
         "--level (from ini nodegate_level): got 'fast', expected one of quick, standard, "
         "extended"),
    ],
)  # fmt: skip
def test_a_bad_level_names_the_option(cli, ini, message) -> None:
    with pytest.raises(ConfigError) as exc:
        settings(cli, ini)
    assert str(exc.value) == message


@pytest.mark.parametrize("name", ["generic-hgx-h100", "nd-h100-v5", "nd-h200-v5", "nd-a100-v4"])
def test_each_shipped_profile_runs_less_at_quick_and_more_at_extended(name: str) -> None:
    p = ProfileLibrary([SHIPPED]).get(name)
    quick, std, ext = (at_level(p, lv) for lv in LEVELS)
    assert (quick.level, std.level, ext.level) == LEVELS
    assert std.data is p.data  # standard: the profile as written
    g = {lv: gpu_load_profile(x).run for lv, x in zip(LEVELS, (quick, std, ext), strict=True)}
    assert g["quick"].dcgm_level is None and g["quick"].dcgm_plugins == ()
    # quick runs the four copies as standard does (it rejects the same slow HBM or NVLink), and
    # no NCCL single-node jobs (the whole set first: nvbandwidth's device copies judge NVLink)
    assert g["quick"].testcases == g["standard"].testcases == g["extended"].testcases == (
        "host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
        "device_to_device_memcpy_read_ce", "device_local_copy",
    )  # fmt: skip
    singles = [nccl_profile(x).single_node_jobs for x in (quick, std, ext)]
    assert singles == [False, True, True]
    assert (g["standard"].dcgm_level, g["extended"].dcgm_level) == (3, 4)
    assert (
        "pulse_test" in g["extended"].dcgm_plugins
        and "pulse_test" not in g["standard"].dcgm_plugins
    )
    assert g["quick"].burn_s < g["standard"].burn_s < g["extended"].burn_s
    assert [pcie_gpu_profile(x).dcgm.level for x in (quick, std, ext)] == [1, 1, 2]
    # quick gives each reach command 3 s, standard and extended the default 10 s: what the node's
    # script runs under `timeout` (a hung `uname` costs its deadline once at every level)
    reach = [{c.timeout_s for c in REACH.commands(None, x)} for x in (quick, std, ext)]
    assert reach == [{3.0}, {10.0}, {10.0}]
    # quick reads no fabric (switch side, cabling, subnet manager: what an image or firmware
    # change on the nodes does not touch); standard and extended read it as written
    assert [x.data.get("fabric") is None for x in (quick, std, ext)] == [
        True, p.data.get("fabric") is None, p.data.get("fabric") is None
    ]  # fmt: skip
    iters = [ib_pairs_profile(x).method.iterations for x in (quick, std, ext)]
    assert iters == sorted(iters) and len(set(iters)) == 3
    # the floors are the profile's at every level: a level changes what runs, not the bar
    assert {str(gpu_load_profile(x).floors) for x in (quick, std, ext)} == {
        str(gpu_load_profile(p).floors)
    }


def test_a_level_overlay_is_validated_whole_and_names_the_level(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "name: p\ndescription: x\nextends: generic-hgx-h100\n"
        "levels: {quick: {gpu_load: {run: {dcgm_level: 2}}}, standard: {}, extended: {}}\n"
    )
    p = ProfileLibrary([tmp_path, SHIPPED]).get("p")
    assert at_level(p, "standard").data is p.data
    with pytest.raises(ConfigError, match=r"p.yaml \(at level quick: levels.quick\):\n  "
                       r"gpu_load.run.dcgm_level: 2 is not one of \[None, 3, 4\]"):  # fmt: skip
        at_level(p, "quick")


@pytest.mark.parametrize(
    ("levels", "why"),
    [
        ({"quick": {}}, "levels: 'standard' is a required property"),
        ({"quick": {"name": {}}, "standard": {}, "extended": {}},
         "levels.quick: 'name' should not be valid"),
        ({"quick": {}, "standard": {}, "extended": {}, "deep": {}},
         "levels: Additional properties are not allowed ('deep' was unexpected)"),
    ],
)  # fmt: skip
def test_levels_name_all_three_and_only_sections(levels: dict[str, object], why: str) -> None:
    doc = dict(ProfileLibrary([SHIPPED]).get("generic-hgx-h100").data)
    doc["levels"] = levels
    with pytest.raises(ConfigError, match=re.escape(why)):
        validate_profile(doc, "x.yaml")


def test_a_level_may_leave_out_an_optional_section_but_not_a_required_one() -> None:
    doc = dict(ProfileLibrary([SHIPPED]).get("generic-hgx-h100").data)
    doc["levels"] = {"quick": {"fabric": None}, "standard": {}, "extended": {}}
    assert at_level(Profile("p", "p.yaml", doc), "quick").data["fabric"] is None
    doc["levels"] = {"quick": {"reach": None}, "standard": {}, "extended": {}}
    with pytest.raises(ConfigError) as exc:
        at_level(Profile("p", "p.yaml", doc), "quick")
    assert str(exc.value) == (
        "invalid profile p.yaml (at level quick: levels.quick):\n"
        "  reach: None is not of type 'object'"
    )


def test_a_profile_without_levels_runs_as_written_at_every_level() -> None:
    p = Profile("p", "p.yaml", {"name": "p", "description": "x"})
    assert [at_level(p, lv).data for lv in LEVELS] == [p.data] * 3


def test_min_level_keeps_a_shallower_run_from_admitting(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(
        "name: b\ndescription: bring-up\nextends: generic-hgx-h100\n"
        "admission: {min_level: extended}\n"
    )
    pol = policy_of(ProfileLibrary([tmp_path, SHIPPED]).get("b"), STAGES)
    assert pol.to_json()["min_level"] == "extended"
    assert pol.level_shortfall("extended") is None
    assert pol.level_shortfall("standard") == (
        "--level standard is below this profile's admission.min_level extended: "
        "run --level extended to admit"
    )
    plain = policy_of(ProfileLibrary([SHIPPED]).get("generic-hgx-h100"), STAGES)
    assert "min_level" not in plain.to_json() and plain.level_shortfall("quick") is None


def test_the_terminal_says_which_level_ran() -> None:
    doc = {
        "run_id": "r1",
        "level": "quick",
        "stages": ["reach", "gpu_load"],
        "summary": {"nodes": 1, "admitted": 1, "rejected": 0},
        "nodes": {"gpu001": {"admitted": True, "reasons": []}},
    }
    paths = Paths("reports/r1/admission.json")
    assert decision_lines(doc, paths, 30)[0] == (
        "nodegate run r1: 1 node, 1 admitted, 0 rejected (level quick; stages: reach, gpu_load)"
    )


def test_ab_refuses_a_baseline_of_another_level(tmp_path: Path) -> None:
    check_same_level({"level": "quick"}, "quick", tmp_path)
    check_same_level({}, "standard", tmp_path)  # a baseline from before levels: standard
    with pytest.raises(ConfigError) as exc:
        check_same_level({"level": "extended"}, "quick", tmp_path)
    assert str(exc.value) == (
        f"--compare-to {tmp_path}: the baseline ran at --level extended, this run at --level "
        "quick: compare runs of one level (run --level extended, or save a baseline at "
        "--level quick)"
    )


def test_the_baseline_keeps_the_runs_level() -> None:
    from nodegate.compare.baseline import baseline_doc
    from nodegate.core.results import RunResult

    adm = {"run_id": "r", "finished_at": "t", "inventory": "i", "transport": "ssh",
           "level": "extended", "stages": [], "checks": [], "nodes": {}}  # fmt: skip
    assert baseline_doc(adm, RunResult())["level"] == "extended"
    del adm["level"]
    assert "level" not in baseline_doc(adm, RunResult())


def test_report_html_says_which_level_ran(tmp_path: Path) -> None:
    import json

    from nodegate.reports.html import write_report

    doc = {
        "schema_version": 1, "run_id": "r1", "level": "extended",
        "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:01:00+00:00",
        "inventory": "inv.yaml", "transport": "ssh", "stages": ["gpu_load"], "checks": [],
        "summary": {"nodes": 0, "admitted": 0, "rejected": 0}, "nodes": {},
    }  # fmt: skip
    (tmp_path / "verdicts.json").write_text(json.dumps({"verdicts": []}))
    (tmp_path / "admission.json").write_text(json.dumps(doc))
    page = write_report(tmp_path, doc).read_text()
    assert "transport ssh · level <b>extended</b> · stages gpu_load" in page
    del doc["level"]
    assert "level" not in write_report(tmp_path, doc).read_text().split("stages gpu_load")[0]
