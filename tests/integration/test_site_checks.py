"""Site-written checks: `node.run()` over the run's connection, counted by the gate."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

SITE = """
def test_kernel_is_jammy_hwe_or_ga(node):
    r = node.run("uname -r")
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith("5.15."), f"{node.name}: {r.stdout.strip()}"
"""


def test_site_check_gates_nodes(sim_fleet, tmp_path):
    fleet = sim_fleet(base_model(3, overrides={"gpu002": {"kernel": "6.8.0-40-generic"}}))
    site = tmp_path / "site"
    site.mkdir()
    (site / "test_site_rules.py").write_text(SITE)
    run = fleet.run(tests=site)
    assert run.rc == 1, run.stdout
    doc = run.admission
    check = "site.test_site_rules.test_kernel_is_jammy_hwe_or_ga"
    assert doc["checks"] == [check]
    assert run.passed() == ["gpu001", "gpu003"]  # the profile's checks did not run (#13)
    (reason,) = run.rejected()["gpu002"]
    assert reason["check"] == check and "6.8.0-40-generic" in reason["message"]
    # the site check reused the run's connection: one per node
    assert run.verdicts["connections"] == 3


def test_allure_results_are_one_per_node_and_stage(sim_fleet, tmp_path):
    # Adapted for #14: one result per node x stage (not per item); a passing stage links to
    # its evidence, a failing one attaches it (tests/integration/test_html_report.py).
    fleet = sim_fleet(base_model(2))
    allure_dir = tmp_path / "allure"
    run = fleet.run("-k", "kernel_version", f"--alluredir={allure_dir}")
    assert run.rc == 6, run.stdout  # a diagnostic run: not qualified (#13)
    results = [json.loads(p.read_text()) for p in allure_dir.glob("*-result.json")]
    assert sorted((r["name"], r["status"]) for r in results) == [
        ("gpu001 reach", "passed"),
        ("gpu002 reach", "passed"),
    ]
    assert [s["name"] for s in results[0]["steps"]] == ["reach.kernel.version: 1/1 passed"]
    links = sorted(lk["name"] for r in results for lk in r["links"])
    # not rejected: their evidence stays compressed, and the link names that file
    assert links == ["raw/gpu001/reach.json.gz", "raw/gpu002/reach.json.gz"]
    labels = {(lab["name"], lab["value"]) for r in results for lab in r["labels"]}
    assert {("feature", "reach"), ("host", "gpu001"), ("host", "gpu002")} <= labels
