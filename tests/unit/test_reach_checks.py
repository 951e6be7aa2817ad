"""reach evaluation (pure: command outcomes + typed profile -> verdicts), every check's paths."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.core.values import CommandResult, NodeOutcome, Reach, Status, Verdict
from nodegate.core.versions import VersionRule
from nodegate.profiles import ProfileLibrary, load_profile_file
from nodegate.sim.tools.reach import nvidia_version, os_release
from nodegate.stages.reach import STAGE
from nodegate.stages.reach.checks import CHECKS
from nodegate.stages.reach.facts import ReachFacts
from nodegate.stages.reach.profile import ReachProfile
from nodegate.transport.script import command_line

REPO = Path(__file__).resolve().parents[2]
LIB = ProfileLibrary([REPO / "inventories" / "profiles"])
H100 = STAGE.profile_of(LIB.get("generic-hgx-h100"))
UBUNTU = {"ID": "ubuntu", "VERSION_ID": "22.04", "PRETTY_NAME": "Ubuntu 22.04.4 LTS"}
HEALTHY = {
    "os_release": (0, os_release(UBUNTU), ""),
    "kernel": (0, "5.15.0-105-generic\n", ""),
    "nvidia_driver": (0, nvidia_version("535.161.08", False, "12.3.0"), ""),
    "ofed": (0, "MLNX_OFED_LINUX-23.10-1.1.9.0:\n", ""),
}
NO_DRIVER = (1, "", "cat: /proc/driver/nvidia/version: No such file or directory\n")
NO_OFED = (127, "", "bash: line 1: ofed_info: command not found\n")


def outcome(
    node: str = "gpu001", detail: str = "", **answers: tuple[int, str, str] | None
) -> NodeOutcome:
    """What `node` answered to the stage's commands; an answer of None: the command never ran."""
    got = {**HEALTHY, **answers}
    results = {}
    for spec in STAGE.commands(None, None):  # type: ignore[arg-type]
        a = got[spec.id]
        if a is not None:
            results[spec.id] = CommandResult(
                spec.id,
                command_line(spec.argv),
                a[0],
                a[1],
                a[2],
                0.01,
                evidence=f"raw/{node}/reach.json#{spec.id}",
            )
    return NodeOutcome(node, Reach.OK, results, detail)


def facts(
    node: str = "gpu001", detail: str = "", **answers: tuple[int, str, str] | None
) -> ReachFacts:
    return STAGE.facts(outcome(node, detail, **answers), H100)


def row(v: Verdict) -> tuple[object, ...]:
    return (v.check, v.status, v.component, v.observed, v.expected, v.message, v.remediation)


def by_check(verdicts: list[Verdict]) -> dict[str, tuple[object, ...]]:
    return {v.check: row(v) for v in verdicts}


def test_healthy_node_passes_every_node_check() -> None:
    got = CHECKS.judge_node("gpu001", facts(), H100)
    assert [row(v) for v in got] == [
        ("reach.ssh", Status.PASS, "ssh", "ok", "ok", "session ran 4 of 4 commands", None),
        ("reach.os.release", Status.PASS, "os", "ubuntu 22.04",
         "ID in ['ubuntu'], VERSION_ID in ['22.04', '24.04']", "Ubuntu 22.04.4 LTS", None),
        ("reach.kernel.version", Status.PASS, "kernel", "5.15.0-105-generic",
         "one of 5.15.0-*-generic, 6.8.0-*-generic and >= 5.15.0-88",
         "kernel 5.15.0-105-generic", None),
        ("reach.driver.version", Status.PASS, "nvidia driver", "535.161.08", ">= 535.104.05",
         "nvidia driver 535.161.08", None),
        ("reach.ofed.version", Status.PASS, "OFED", "23.10-1.1.9.0", ">= 23.10",
         "OFED 23.10-1.1.9.0", None),
    ]  # fmt: skip
    assert got[2].evidence == ("raw/gpu001/reach.json#kernel",)


def test_ssh_counts_the_stage_commands_and_fails_a_session_cut_short() -> None:
    assert facts().commands_total == len(STAGE.commands(None, None)) == 4  # type: ignore[arg-type]
    cut = facts(detail="session deadline 30 s passed", nvidia_driver=None, ofed=None)
    assert by_check(CHECKS.judge_node("gpu001", cut, H100))["reach.ssh"] == (
        "reach.ssh", Status.FAIL, "ssh", "2/4 commands", "every command reports",
        "session deadline 30 s passed", "node session cut short; check node load and sshd",
    )  # fmt: skip
    # every command reported: a detail alone does not fail the session
    said = facts(detail="slow")
    assert by_check(CHECKS.judge_node("gpu001", said, H100))["reach.ssh"][1] is Status.PASS


def test_unreachable_node_fails_ssh_and_errors_the_rest() -> None:
    out = NodeOutcome("gpu003", Reach.UNREACHABLE, detail="connect to 127.0.0.3:2222 refused")
    got = STAGE.unreachable(out)
    assert [(v.check, v.status, v.observed, v.expected) for v in got] == [
        ("reach.ssh", Status.FAIL, "unreachable", "ok")
    ] + [(c, Status.ERROR, "unreachable", None) for c in CHECKS.ids()[1:]]
    assert got[0].message == "unreachable: connect to 127.0.0.3:2222 refused"
    assert got[1].message == "not judged: node session failed (unreachable: connect to "\
        "127.0.0.3:2222 refused)"  # fmt: skip


def test_wrong_os_and_versions_fail_with_the_rule_as_expected() -> None:
    rhel = os_release({"ID": "rhel", "VERSION_ID": "9.4"})
    f = facts(
        os_release=(0, rhel, ""),
        kernel=(0, "5.15.0-87-generic\n", ""),
        nvidia_driver=(0, nvidia_version("525.147.05", True, "12.3.0"), ""),
    )
    got = by_check(CHECKS.judge_node("gpu001", f, H100))
    assert got["reach.os.release"] == (
        "reach.os.release", Status.FAIL, "os", "rhel 9.4",
        "ID in ['ubuntu'], VERSION_ID in ['22.04', '24.04']", "rhel 9.4",
        "reimage the node with a qualified OS release",
    )  # fmt: skip
    want = "one of 5.15.0-*-generic, 6.8.0-*-generic and >= 5.15.0-88"
    assert got["reach.kernel.version"] == (
        "reach.kernel.version", Status.FAIL, "kernel", "5.15.0-87-generic", want,
        f"kernel 5.15.0-87-generic, expected {want}", f"install a qualified kernel ({want})",
    )  # fmt: skip
    assert got["reach.driver.version"][1:5] == (
        Status.FAIL,
        "nvidia driver",
        "525.147.05",
        ">= 535.104.05",
    )


def test_absent_parts_fail_when_required_pass_when_optional() -> None:
    f = facts(nvidia_driver=NO_DRIVER, ofed=NO_OFED)
    got = by_check(CHECKS.judge_node("gpu001", f, H100))
    assert got["reach.ofed.version"] == (
        "reach.ofed.version", Status.FAIL, "OFED", "not installed", ">= 23.10",
        "OFED not installed (`ofed_info -s` exited 127: bash: line 1: ofed_info: command not "
        "found)", "install the qualified OFED",
    )  # fmt: skip
    optional = dataclasses.replace(H100, nvidia_driver=VersionRule(required=False, min="535"))
    got = by_check(CHECKS.judge_node("gpu001", f, optional))
    assert got["reach.driver.version"] == (
        "reach.driver.version", Status.PASS, "nvidia driver", "not installed", "optional",
        "not installed; profile does not require it", None,
    )  # fmt: skip


def test_unreadable_output_is_an_error_never_a_pass() -> None:
    f = facts(os_release=(0, "\x1b[31m#!%@ segfault??\n", ""), kernel=(2, "", "uname: boom\n"))
    got = by_check(CHECKS.judge_node("gpu001", f, H100))
    assert got["reach.os.release"] == (
        "reach.os.release", Status.ERROR, "os", None,
        "ID in ['ubuntu'], VERSION_ID in ['22.04', '24.04']",
        "unrecognized output of `cat /etc/os-release`: line 1 is not KEY=value: "
        "'\\x1b[31m#!%@ segfault??'", None,
    )  # fmt: skip
    assert got["reach.kernel.version"] == (
        "reach.kernel.version", Status.ERROR, "kernel", None,
        "one of 5.15.0-*-generic, 6.8.0-*-generic and >= 5.15.0-88",
        "`uname -r` exited 2: uname: boom", None,
    )  # fmt: skip


def _fleet(kernels: dict[str, str | None], profiles: dict[str, ReachProfile]) -> list[Verdict]:
    fs = {n: facts(n, kernel=None if k is None else (0, k + "\n", "")) for n, k in kernels.items()}
    got = CHECKS.judge_fleet(fs, profiles)
    return [v for v in got if v.check == "reach.kernel.uniform"]


def test_uniform_majority_per_profile_tie_and_missing() -> None:
    a100 = dataclasses.replace(H100, name="other")
    kernels = {"n1": "5.15.0-105-generic", "n2": "5.15.0-105-generic", "n3": "5.15.0-91-generic",
               "n4": "5.15.0-91-generic", "n5": None}  # fmt: skip
    got = _fleet(kernels, {"n1": H100, "n2": H100, "n3": H100, "n4": a100, "n5": H100})
    assert [(v.node, *row(v)[1:]) for v in got] == [
        ("n1", Status.PASS, "kernel", "5.15.0-105-generic", "5.15.0-105-generic",
         "kernel 5.15.0-105-generic = fleet majority (2/3)", None),
        ("n2", Status.PASS, "kernel", "5.15.0-105-generic", "5.15.0-105-generic",
         "kernel 5.15.0-105-generic = fleet majority (2/3)", None),
        ("n3", Status.FAIL, "kernel", "5.15.0-91-generic", "5.15.0-105-generic",
         "kernel 5.15.0-91-generic differs from fleet 5.15.0-105-generic (2/3 nodes)",
         "align kernel with the fleet (5.15.0-105-generic)"),
        # alone in its profile: its own majority
        ("n4", Status.PASS, "kernel", "5.15.0-91-generic", "5.15.0-91-generic",
         "kernel 5.15.0-91-generic = fleet majority (1/1)", None),
        ("n5", Status.ERROR, "kernel", None, "fleet majority",
         "no kernel value to compare: command kernel did not run", None),
    ]  # fmt: skip
    tie = _fleet({"n1": "6.8.0-1-generic", "n2": "5.15.0-105-generic"}, {"n1": H100, "n2": H100})
    assert [(v.node, v.status, v.expected, v.message, v.remediation) for v in tie] == [
        (n, Status.FAIL, "fleet majority",
         "no kernel majority in the fleet: 5.15.0-105-generic (1), 6.8.0-1-generic (1)",
         "align kernel across the fleet")
        for n in ("n1", "n2")
    ]  # fmt: skip


def test_uniform_not_required_passes_and_still_counts_for_its_profile() -> None:
    loose = dataclasses.replace(H100, uniform=frozenset({"ofed"}))
    kernels = {"n1": "6.8.0-1-generic", "n2": "5.15.0-105-generic", "n3": "5.15.0-105-generic"}
    got = _fleet(kernels, {"n1": loose, "n2": H100, "n3": H100})
    assert [(v.node, v.status, v.expected, v.message) for v in got] == [
        ("n1", Status.PASS, "not required",
         "profile generic-hgx-h100 does not require a uniform kernel"),
        ("n2", Status.PASS, "5.15.0-105-generic",
         "kernel 5.15.0-105-generic = fleet majority (2/3)"),
        ("n3", Status.PASS, "5.15.0-105-generic",
         "kernel 5.15.0-105-generic = fleet majority (2/3)"),
    ]  # fmt: skip


def test_typed_profile_built_once_from_the_extended_profile() -> None:
    prof = LIB.get("nd-h200-v5")
    typed = STAGE.profile_of(prof)
    assert STAGE.profile_of(prof) is typed
    assert typed == ReachProfile(
        name="nd-h200-v5",
        os_id=Threshold("one_of", ("ubuntu",)),
        os_version_id=Threshold("one_of", ("22.04", "24.04")),
        kernel=VersionRule(True, ("5.15.0-*-azure", "6.5.0-*-azure", "6.8.0-*-azure")),
        nvidia_driver=VersionRule(True, min="550.54.14"),
        ofed=VersionRule(True, min="23.10"),
        uniform=frozenset({"kernel", "nvidia_driver", "ofed"}),
    )


@pytest.mark.parametrize(
    ("os_section", "msg"),
    [
        # a bare number would never equal the text of /etc/os-release
        ({"id": {"one_of": ["ubuntu"]}, "version_id": {"one_of": [22.04]}},
         "reach.os.version_id.one_of.0: 22.04 is not of type 'string'"),
        ({"id": {"equal": "ubuntu"}, "version_id": {"one_of": ["22.04"]}},
         "reach.os.id: 'one_of' is a required property"),
    ],
)  # fmt: skip
def test_os_release_values_are_one_of_text(tmp_path: Path, os_section: dict, msg: str) -> None:
    base = yaml.safe_load((REPO / "inventories/profiles/generic-hgx-h100.yaml").read_text())
    doc = {**base, "name": "site", "reach": {**base["reach"], "os": os_section}}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as exc:
        load_profile_file(tmp_path / "site.yaml")
    assert str(exc.value).splitlines()[1:] == [f"  {msg}"]
