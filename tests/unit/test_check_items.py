"""Registered checks are CheckItems (cheap: no fixtures, no capture), with the ids, markers
and outcomes a pytest Function would have; marks that change how an item runs send it
through pytest's own protocol, and so does a check test that takes other fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INVENTORY = """\
version: 1
defaults: {profile: generic-hgx-h100}
nodes: {"n[1-2]": {}}
"""


def run(tmp: Path, *args: str, suites: Path | None = None) -> subprocess.CompletedProcess[str]:
    """pytest over the suites, every node answered from an empty capture bundle (no session)."""
    (tmp / "inv.yaml").write_text(INVENTORY)
    (tmp / "bundle").mkdir(exist_ok=True)
    cmd = [
        sys.executable, "-m", "pytest", str(suites or REPO / "suites" / "test_reach.py"),
        f"--inventory={tmp / 'inv.yaml'}", "--transport=replay", f"--replay={tmp / 'bundle'}",
        f"--reports-dir={tmp / 'reports'}", "--run-id=r1", f"--rootdir={REPO}",
        "-p", "no:cacheprovider", "-q", "-W", "ignore::pytest.PytestAssertRewriteWarning",
        *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp)


def junit(tmp: Path) -> dict[str, str]:
    """name -> outcome (passed / failure / skipped / error) from the run's junit.xml, which
    must hold each item's test case exactly once."""
    import xml.etree.ElementTree as ET

    root = ET.parse(tmp / "reports" / "r1" / "junit.xml").getroot()
    out = {}
    for case in root.iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "skipped", "error")]
        assert case.attrib["name"] not in out, f"{case.attrib['name']} twice in junit.xml"
        out[case.attrib["name"]] = kinds[0] if kinds else "passed"
    return out


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
