"""Allure results above 256 nodes: one result per check, its bad verdicts folded by text with
the nodes that have them, the passes and the nodes not run one step each, evidence linked."""

from __future__ import annotations

import json

from nodegate.reports.allure import write_results

from tests.unit.test_html_report import BW, EVIL, large_run


def test_above_256_nodes_each_check_is_one_result_with_its_failures_folded(tmp_path):
    (tmp_path / "run").mkdir()
    d = large_run(tmp_path / "run")
    doc = json.loads((d / "admission.json").read_text())
    doc["checks"].append("ib_pairs.cleanup")  # judged on no node: not run everywhere
    for n in ("n001", "n002"):
        (d / "raw" / n).mkdir(parents=True)
        (d / "raw" / n / "ib_pairs.json").write_text("{}")
    out = tmp_path / "allure"
    assert write_results(out, doc, json.loads((d / "verdicts.json").read_text()), d) == 2
    results = [json.loads(p.read_text()) for p in out.glob("*-result.json")]
    assert sorted(p.name.rsplit("-", 1)[1] for p in out.iterdir()) == ["result.json"] * 2
    by_name = {r["name"]: r for r in results}
    assert sorted(by_name) == ["ib_pairs.cleanup (300 nodes)", f"{BW} (300 nodes)"]
    bw = by_name[f"{BW} (300 nodes)"]
    slow = "[mlx5_3 port 1 (rail 3)] FAIL: 231.6 Gb/s (expected >= 360 Gb/s)"
    evil = "[mlx5_3 port 1 (rail 3)] FAIL: </script><b onmouseover='x'> (observed 231.6 Gb/s, expected >= 360 Gb/s)"  # noqa: E501
    assert [(s["name"], s["status"]) for s in bw["steps"]] == [
        (f"{slow} on 279 nodes: n[001-008] +271 more (verdicts.jsonl.gz)", "failed"),
        (f"{evil} on 1 node: {EVIL}", "failed"),
        ("passed on 20 nodes: n[280-287] +12 more (verdicts.jsonl.gz)", "passed"),
    ]
    assert (bw["status"], bw["fullName"]) == ("failed", f"nodegate.ib_pairs.{BW}")
    assert bw["statusDetails"]["message"] == "\n".join(s["name"] for s in bw["steps"][:2])
    # the evidence of the first nodes that did not pass, where it exists: linked, not copied
    assert [link["name"] for link in bw["links"]] == [
        "raw/n001/ib_pairs.json",
        "raw/n002/ib_pairs.json",
    ]  # noqa: E501
    cleanup = by_name["ib_pairs.cleanup (300 nodes)"]
    assert [(s["name"], s["status"]) for s in cleanup["steps"]] == [
        (f"not run or no verdict on 300 nodes: n[001-007],{EVIL} +292 more (admission.json)",
         "broken"),
    ]  # fmt: skip
    assert {(lab["name"], lab["value"]) for lab in bw["labels"]} == {
        ("parentSuite", "nodegate"), ("suite", "ib_pairs"), ("feature", "ib_pairs"), ("story", BW),
    }  # fmt: skip
