"""Registered checks are CheckItems (cheap: no fixtures, no capture), with the ids, markers
and outcomes a pytest Function would have; marks that change how an item runs send it
through pytest's own protocol, and so does a check test that takes other fixtures."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from nodegate.session.collection import FAILED, PASSED, SKIPPED, XFAILED, judge_check
from nodegate.stages.registry import checks_by_id, stage

REPO = Path(__file__).resolve().parents[2]
INVENTORY = """\
version: 1
defaults: {profile: generic-hgx-h100}
nodes: {"n[1-2]": {}}
"""


BUNDLE = REPO / "tests" / "fixtures" / "bundles" / "demo-3nodes"  # INDEX.md: where it is from


def run(
    tmp: Path,
    *args: str,
    suites: Path | None = None,
    inventory: str = INVENTORY,
    bundle: Path | None = None,
    run_id: str = "r1",
) -> subprocess.CompletedProcess[str]:
    """pytest over the suites, every node answered from a capture bundle (by default an empty
    one: no session)."""
    (tmp / "inv.yaml").write_text(inventory)
    (tmp / "bundle").mkdir(exist_ok=True)
    cmd = [
        sys.executable, "-m", "pytest", str(suites or REPO / "suites" / "test_reach.py"),
        f"--inventory={tmp / 'inv.yaml'}", "--transport=replay",
        f"--replay={bundle or tmp / 'bundle'}", f"--reports-dir={tmp / 'reports'}",
        f"--run-id={run_id}", f"--rootdir={REPO}", "-p", "no:cacheprovider", "-q",
        "-W", "ignore::pytest.PytestAssertRewriteWarning", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp)


def cases(path: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """(classname, name) -> (outcome, message) of each test case of a junit.xml: passed,
    failure, error, skipped or xfail; each case exactly once."""
    import xml.etree.ElementTree as ET

    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        key = (case.attrib["classname"], case.attrib["name"])
        assert key not in out, f"{key} twice in {path}"
        kinds = [c for c in case if c.tag in ("failure", "skipped", "error")]
        if not kinds:
            out[key] = ("passed", "")
            continue
        tag = "xfail" if kinds[0].attrib.get("type") == "pytest.xfail" else kinds[0].tag
        out[key] = (tag, kinds[0].attrib["message"])
    return out


def junit(tmp: Path) -> dict[str, str]:
    """name -> outcome (passed / failure / skipped / error) from the run's junit.xml."""
    got = cases(tmp / "reports" / "r1" / "junit.xml").items()
    return {name: "skipped" if kind == "xfail" else kind for (_c, name), (kind, _m) in got}


def test_items_have_the_ids_and_stage_markers_of_parametrized_tests(tmp_path: Path) -> None:
    p = run(tmp_path, "--collect-only", "-m", "reach", "-k", "kernel")
    assert p.returncode == 0, p.stdout + p.stderr
    ids = [ln for ln in p.stdout.splitlines() if "::" in ln]
    assert ids == [
        f"suites/test_reach.py::{t}[{n}]"
        for t in ("test_kernel_version", "test_kernel_uniform")
        for n in ("n1", "n2")
    ]
    p = run(tmp_path, "--collect-only", "-m", "hca", "-k", "kernel")
    assert (p.returncode, [ln for ln in p.stdout.splitlines() if "::" in ln]) == (5, [])


def test_a_check_item_fails_with_its_verdict_and_the_gate_sees_it(tmp_path: Path) -> None:
    p = run(tmp_path, "-k", "ssh_reachable", "-rf")
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    failed = sorted(ln.split("::")[1].split(" ")[0] for ln in lines if ln.startswith("FAILED"))
    assert failed == ["test_ssh_reachable[n1]", "test_ssh_reachable[n2]"]
    why = (
        f"  n1: reach.ssh FAIL [ssh]: error: no capture of stage 'reach' for n1 in "
        f"{tmp_path / 'bundle'} (expected ok) (fix_config)"
    )
    assert why in lines
    assert junit(tmp_path) == {
        "test_ssh_reachable[n1]": "failure",
        "test_ssh_reachable[n2]": "failure",
    }
    doc = json.loads((tmp_path / "reports" / "r1" / "admission.json").read_text())
    assert {n: d["state"] for n, d in doc["nodes"].items()} == {"n1": "rejected", "n2": "rejected"}


SKIPPING_CONFTEST = """\
import pytest
from nodegate.session.collection import FAILED, PASSED, SKIPPED, XFAILED, judge_check
from nodegate.stages.registry import checks_by_id, stage

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "test_ssh_reachable[n2]":
            item.add_marker(pytest.mark.skip(reason="site: n2 in maintenance"))
"""


def test_an_item_marked_skip_takes_pytests_own_protocol(tmp_path: Path) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_reach.py").write_text((REPO / "suites" / "test_reach.py").read_text())
    (suites / "conftest.py").write_text(SKIPPING_CONFTEST)
    p = run(tmp_path, "-k", "ssh_reachable", "-rs", suites=suites)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "SKIPPED [1] suites/test_reach.py: site: n2 in maintenance" in p.stdout.splitlines()
    assert junit(tmp_path) == {
        "test_ssh_reachable[n1]": "failure",
        "test_ssh_reachable[n2]": "skipped",
    }


OWN_FIXTURE_SUITE = """\
import pytest
from nodegate.session.collection import FAILED, PASSED, SKIPPED, XFAILED, judge_check
from nodegate.stages.registry import checks_by_id, stage

@pytest.fixture
def site_note():
    return "checked"

def test_ssh_reachable(nodegate_check, site_note):
    assert site_note == "checked"
    nodegate_check.assert_pass()
"""


@pytest.mark.parametrize("body", [OWN_FIXTURE_SUITE])
def test_a_check_test_with_other_fixtures_is_a_pytest_function(tmp_path: Path, body: str) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_reach.py").write_text(body)
    p = run(tmp_path, "--collect-only", suites=suites)
    assert [ln.split("::")[1] for ln in p.stdout.splitlines() if "::" in ln] == [
        "test_ssh_reachable[n1]",
        "test_ssh_reachable[n2]",
    ]
    p = run(tmp_path, "-rf", suites=suites)
    assert p.returncode == 1, p.stdout + p.stderr
    assert junit(tmp_path) == {
        "test_ssh_reachable[n1]": "failure",
        "test_ssh_reachable[n2]": "failure",
    }


# --items check (one item per check over the run's nodes) on the stored demo bundle: gpu001
# healthy, gpu003 unreachable (its reach checks but reach.ssh waived), gpu024 on an old driver.
DEMO_INVENTORY = """\
version: 1
defaults: {profile: generic-hgx-h100}
nodes: {gpu001: {}, gpu003: {}, gpu024: {}}
"""
WAIVED = ("os.release", "kernel.version", "kernel.uniform", "driver.uniform", "ofed.version",
          "ofed.uniform")  # fmt: skip
WAIVERS = "waivers:\n" + "".join(
    f"  - {{check: reach.{c}, nodes: gpu003, reason: rack power, owner: ops@example.com, "
    "expires: 2099-12-31}\n"
    for c in WAIVED
)
HCA_TESTS = [c.test for c in stage("hca").checks]


def demo_run(tmp: Path, run_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp / "waivers.yaml").write_text(WAIVERS)
    return run(
        tmp, "--waivers", str(tmp / "waivers.yaml"), *args,
        suites=REPO / "suites", inventory=DEMO_INVENTORY, bundle=BUNDLE, run_id=run_id,
    )  # fmt: skip


def outcomes(p: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Item name -> outcome from `-rA`'s short summary lines."""
    out = {}
    for ln in p.stdout.splitlines():
        word, _, rest = ln.partition(" ")
        if word in ("PASSED", "FAILED", "XFAIL", "SKIPPED") and "::" in rest:
            out[rest.split("::")[1].split(" - ")[0]] = word
    return out


def counts(p: subprocess.CompletedProcess[str]) -> str:
    """pytest's closing counts line, without its time: `3 failed, 15 passed`."""
    found = re.findall(r"^(\d+ \w+(?:, \d+ \w+)*) in [\d.]+s$", p.stdout, re.M)
    assert len(found) == 1, p.stdout
    return found[0]


def test_per_check_items_pass_fail_xfail_and_junit_per_check_and_node(tmp_path: Path) -> None:
    stages = ("-m", "reach or hca", "-rA")
    check = demo_run(tmp_path, "check", "--items", "check", *stages)
    assert check.returncode == 1, check.stdout + check.stderr
    assert outcomes(check) == {
        **{f"test_{t}[3 nodes]": "FAILED" for t in ("ssh_reachable", "driver_version")},
        # gpu003 waived, gpu001 and gpu024 differ (no majority): not every non-pass waived
        "test_driver_uniform[3 nodes]": "FAILED",
        **{
            f"test_{c.replace('.', '_')}[3 nodes]": "XFAIL" for c in WAIVED if c != "driver.uniform"
        },
        # gpu003 skipped (not reachable), the others passed
        **{f"{t}[3 nodes]": "PASSED" for t in HCA_TESTS},
    }
    others = len(checks_by_id()) - 8 - len(HCA_TESTS)  # the other stages' checks
    assert counts(check) == f"3 failed, 15 passed, {others} deselected, 5 xfailed"
    # the expected failure names its waived nodes and their waivers
    assert re.search(
        r"^XFAIL \S+/suites/test_reach\.py::test_kernel_version\[3 nodes\] - "
        r"reach\.kernel\.version: waived on 1 of 3 nodes: gpu003; waived reach\.kernel\.version "
        r"\[ssh\]: waiver 2 \(reach\.kernel\.version on gpu003, owner ops@example\.com\): "
        r"rack power$",
        check.stdout,
        re.M,
    ), check.stdout
    node = demo_run(tmp_path, "node", "--items", "node", *stages)
    assert node.returncode == 1, node.stdout + node.stderr
    # junit.xml: the same test case per (check, node) in both modes, same outcome and message
    per_check = cases(tmp_path / "reports" / "check" / "junit.xml")
    assert per_check == cases(tmp_path / "reports" / "node" / "junit.xml")
    bad = {k[1]: v[0] for k, v in per_check.items() if v[0] != "passed"}
    assert bad == {
        "test_ssh_reachable[gpu003]": "failure",
        "test_driver_version[gpu003]": "failure",  # not waived
        "test_driver_version[gpu024]": "failure",
        "test_driver_uniform[gpu001]": "failure",
        "test_driver_uniform[gpu024]": "failure",
        **{f"test_{c.replace('.', '_')}[gpu003]": "xfail" for c in WAIVED},
        **{f"{t}[gpu003]": "skipped" for t in HCA_TESTS},
    }
    assert len(per_check) == 3 * (8 + len(HCA_TESTS))
    # the gate decides from the verdicts: the same admission.json but for the run's id and times
    docs = [
        json.loads((tmp_path / "reports" / r / "admission.json").read_text())
        for r in ("check", "node")
    ]
    for d in docs:
        del d["run_id"], d["started_at"], d["finished_at"]
    assert docs[0] == docs[1]
    assert {n: d["state"] for n, d in docs[0]["nodes"].items()} == {
        "gpu001": "rejected", "gpu003": "rejected", "gpu024": "rejected"  # driver.uniform
    }  # fmt: skip


def test_per_check_items_select_by_k_m_nodes_and_run_under_xdist(tmp_path: Path) -> None:
    sel = ("--items", "check", "--nodes", "gpu003", "-m", "reach or hca",
           "-k", "ssh or (hca and (firmware or count))")  # fmt: skip
    chosen = [t for t in HCA_TESTS if "firmware" in t or "count" in t]
    p = demo_run(tmp_path, "ids", *sel, "--collect-only")
    assert [ln for ln in p.stdout.splitlines() if "::" in ln] == [
        *(f"suites/test_hca.py::{t}[1 node]" for t in chosen),
        "suites/test_reach.py::test_ssh_reachable[1 node]",
    ]
    p = demo_run(tmp_path, "x", *sel, "-n", "2", "-rs")
    assert p.returncode == 1, p.stdout + p.stderr
    assert counts(p) == f"1 failed, {len(chosen)} skipped"  # xdist: the workers deselect
    assert re.search(
        r"^SKIPPED \[1\] \S+: hca\.count: skipped on 1 node \(the first: "
        r"not run: node not reachable \(unreachable\)\)$",
        p.stdout,
        re.M,
    ), p.stdout
    skipped = ("skipped", "not run: node not reachable (unreachable)")
    assert {k[1]: v[0] for k, v in cases(tmp_path / "reports" / "x" / "junit.xml").items()} == {
        "test_ssh_reachable[gpu003]": "failure",
        **{f"{t}[gpu003]": "skipped" for t in chosen},
    }
    assert {
        v for k, v in cases(tmp_path / "reports" / "x" / "junit.xml").items() if "hca" in k[1]
    } == {skipped}


def test_a_per_check_items_text_is_bounded_at_any_fleet_size() -> None:
    judged = [(f"n{i:05d}", FAILED if i % 2 else PASSED, f"FAIL c n{i:05d}" if i % 2 else "")
              for i in range(10_000)]  # fmt: skip
    outcome, text = judge_check("c", judged)
    first = ", ".join(f"n{i:05d}" for i in range(1, 20, 2))
    assert (outcome, text.splitlines()) == (
        FAILED,
        [
            f"c: failed on 5000 of 10000 nodes: {first} (+4990 more)",
            "FAIL c n00001", "FAIL c n00003", "FAIL c n00005",
            "(the other 4997: junit.xml, admission.json)",
        ],
    )  # fmt: skip
    # no failure: waived if one is, else skipped only when none passed
    mixed = [("a", PASSED, ""), ("b", XFAILED, "waived c [x]: w"), ("c", SKIPPED, "off")]
    assert judge_check("c", mixed) == (XFAILED, "c: waived on 1 of 3 nodes: b; waived c [x]: w")
    assert judge_check("c", [("a", PASSED, ""), ("c", SKIPPED, "off")]) == (PASSED, "")
    assert judge_check("c", [("a", SKIPPED, "off"), ("b", SKIPPED, "other")]) == (
        SKIPPED, "c: skipped on 2 nodes (the first: off)"
    )  # fmt: skip
