"""report.html and the Allure results of a real run over a simulated fleet, the page opened in
a real headless Chromium (Debian `chromium`, driven by Playwright): it loads with no console
error, its counts equal admission.json, a rejected node's row links to its evidence.

CI installs chromium (scripts/bootstrap): a missing browser fails these tests, never skips.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from nodegate.core.results import read_verdicts_doc

from tests.integration.conftest import Run, base_model

pytestmark = pytest.mark.integration

FAULTS = {"gpu002": ["unreachable"], "gpu003": [{"gpu_pcie_x8": "5"}]}


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("Debian chromium is needed (scripts/bootstrap installs it)")
    return path


def test_report_and_allure_of_one_run(sim_fleet: Any, tmp_path: Path) -> None:
    fleet = sim_fleet(base_model(4, racks={"nodes_per_rack": 2}, faults=FAULTS))
    allure = tmp_path / "allure"
    r = fleet.run("-m", "reach or pcie_gpu", f"--alluredir={allure}")
    assert r.rc == 1, r.stdout[-3000:]
    check_report_in_chromium(r)
    check_allure(r, allure)


def check_report_in_chromium(r: Run) -> None:
    from playwright.sync_api import sync_playwright

    doc = r.admission
    page_file = r.run_dir / "report.html"
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route("http*://**", lambda route: errors.append(route.request.url))
            page.goto(page_file.as_uri(), wait_until="load")
            counts = {
                k.replace("-", "_"): int(page.inner_text(f"#count-{k}"))
                for k in ("nodes", "admitted", "rejected", "not-qualified")
            }
            rows = {
                row.get_attribute("data-node"): (
                    row.get_attribute("data-state"),
                    row.locator("a.evidence").get_attribute("href")
                    if row.locator("a.evidence").count()
                    else None,
                )
                for row in page.locator("tr.node-row").all()
            }
            plots = page.locator("#distributions .plot h3").all_inner_texts()
            limit_lines = page.locator("#distributions line.limit").count()
            reason_links = page.locator("#node-gpu003 a.evidence").evaluate_all(
                "links => links.map(a => a.getAttribute('href'))"
            )
            json_links = page.locator("#node-gpu003 a.json").evaluate_all(
                "links => links.map(a => a.getAttribute('href'))"
            )
            page.locator('tr[data-node="gpu003"] a.evidence').click()  # the row's link
            page.wait_for_load_state("load")
            evidence_text = page.inner_text("body")
            target = page.evaluate("document.querySelector(':target').id")
        finally:
            browser.close()
    assert errors == []  # no console error, no network request
    # A -m run covers only part of the admission policy: the healthy nodes are not qualified.
    assert counts == doc["summary"] == {
        "nodes": 4, "admitted": 0, "rejected": 2, "not_qualified": 2,
    }  # fmt: skip
    # Two racks of two, each with a rejected node: every node has a row.
    assert rows == {
        "gpu001": ("not_qualified", None),
        "gpu002": ("rejected", "raw/gpu002/reach.html"),
        "gpu003": ("rejected", "raw/gpu003/pcie_gpu.html#nvsmi"),
        "gpu004": ("not_qualified", None),
    }
    assert reason_links == ["raw/gpu003/pcie_gpu.html#nvsmi", "raw/gpu003/pcie_gpu.html#lspci"]
    assert json_links == ["raw/gpu003/pcie_gpu.json#nvsmi", "raw/gpu003/pcie_gpu.json#lspci"]
    # The link opened the node's evidence page at the command the verdict cites.
    assert target == "nvsmi" and "nvidia-smi -q" in evidence_text
    assert evidence_text.startswith("gpu003 · pcie_gpu: evidence")
    check_references_exist(r.run_dir)
    assert plots[:2] == ["pcie.gpu.width (lanes)", "pcie.gpu.gen (gen)"]
    assert limit_lines == len(plots)


def check_references_exist(run_dir: Path) -> None:
    """Every evidence reference in the verdicts and admission.json names a file of the run
    (`.json` for the rejected nodes, `.json.gz` for the others), and its command is in it."""
    from nodegate.transport.evidence import resolve_evidence

    vdoc = read_verdicts_doc(run_dir)
    doc = json.loads((run_dir / "admission.json").read_text())
    refs = {e for v in vdoc["verdicts"] for e in v["evidence"]}
    refs |= {e for d in doc["nodes"].values() for r in d["reasons"] for e in r["evidence"]}
    assert (
        refs
        and {
            ref.partition("#")[0] for ref in refs if not (run_dir / ref.partition("#")[0]).is_file()
        }
        == set()
    )
    assert {ref.partition("#")[0].rsplit(".", 1)[-1] for ref in refs} == {"json", "gz"}
    for ref in refs:
        assert "cmd" in resolve_evidence(run_dir, ref)


def check_allure(r: Run, allure: Path) -> None:
    """One result per node x stage, the evidence of a stage that failed attached once."""
    results = [json.loads(p.read_text()) for p in sorted(allure.glob("*-result.json"))]
    got = {x["name"]: (x["status"], [a["name"] for a in x.get("attachments", [])]) for x in results}
    assert got == {
        "gpu001 reach": ("passed", []),
        "gpu001 pcie_gpu": ("passed", []),
        "gpu002 reach": ("failed", ["raw/gpu002/reach.json"]),
        "gpu002 pcie_gpu": ("skipped", []),
        "gpu003 reach": ("passed", []),
        "gpu003 pcie_gpu": ("failed", ["raw/gpu003/pcie_gpu.json"]),
        "gpu004 reach": ("passed", []),
        "gpu004 pcie_gpu": ("passed", []),
    }
    files = sorted(p.name for p in allure.iterdir())
    attached = [a["source"] for x in results for a in x.get("attachments", [])]
    assert len(files) == len(results) + len(attached) == 10  # nothing per item
    gpu003 = next(x for x in results if x["name"] == "gpu003 pcie_gpu")
    (width,) = [s for s in gpu003["steps"] if s["name"].startswith("pcie.gpu.width")]
    assert width["name"] == "pcie.gpu.width: 7/8 passed"
    assert [s["status"] for s in width["steps"]] == ["failed"]
    assert ("host", "gpu003") in {(lab["name"], lab["value"]) for lab in gpu003["labels"]}
    raw = json.loads((allure / gpu003["attachments"][0]["source"]).read_text())
    assert raw == json.loads((r.run_dir / "raw" / "gpu003" / "pcie_gpu.json").read_text())
