"""The evidence budget (`--evidence-nodes`, `nodegate.reports.expanded`): which cited nodes'
evidence is expanded (one per failing check and status, then per component, then by name),
every reference naming a file that exists, pages and report.html links only where the files
are; admission.json written one line per node, valid against its schema."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

from nodegate.admission.gate import write_admission
from nodegate.core import schemas
from nodegate.core.results import RunResult
from nodegate.core.settings import DEFAULT_EVIDENCE_NODES
from nodegate.core.values import Status, Verdict
from nodegate.reports.expanded import apply_budget, expanded_nodes
from nodegate.reports.html import write_report
from nodegate.transport.evidence import evidence_file

from tests.unit.test_evidence_pages import session_doc

WIDTH, FW, SSH, OS, XID = (
    "pcie.gpu.width", "hca.firmware.version", "reach.ssh", "reach.os.release", "gpu.xid"
)  # fmt: skip


def reason(check: str, status: str, component: str = "", node: str = "") -> dict[str, Any]:
    unjudged = status == "error" and check == OS
    return {
        "check": check, "status": status, "component": component, "observed": None,
        "expected": None, "unit": None, "remediation": None, "remediation_class": None,
        "message": "not judged: node session failed" if unjudged else f"{check} {status}",
        "evidence": [f"raw/{node}/pcie_gpu.json#kernel_log"] if node else [],
    }  # fmt: skip


def node(state: str, reasons: list[dict[str, Any]], waived: list[dict[str, Any]] = ()) -> Any:
    return {
        "admitted": state == "admitted", "state": state, "profile": "p", "labels": {},
        "checks_passed": 0, "checks_total": 1, "reasons": reasons,
        "waived": [{**w, "waiver": {"index": 1, "check": w["check"], "nodes": "w1",
                                     "component": None, "reason": "r", "owner": "o",
                                     "expires": "2027-01-01"}} for w in waived],
    }  # fmt: skip


def fleet(evidence: bool = False) -> dict[str, Any]:
    """Seven cited nodes (six rejected, one admitted with a waived failure), two others."""

    def r(check: str, status: str, component: str, name: str) -> dict[str, Any]:
        return reason(check, status, component, name if evidence else "")

    nodes = {
        "a1": node("rejected", [r(WIDTH, "fail", "GPU3", "a1")]),
        "a2": node("rejected", [r(WIDTH, "fail", "GPU3", "a2")]),
        "a3": node("rejected", [r(WIDTH, "fail", "GPU5", "a3")]),
        "b1": node("rejected", [r(FW, "fail", "mlx5_0", "b1")]),
        # A failed session's echoes (`not judged:` errors) are no cause of their own.
        "b2": node("rejected", [r(SSH, "fail", "", "b2"), r(OS, "error", "", "b2")]),
        "c1": node("rejected", [r(WIDTH, "fail", "GPU3", "c1")]),
        "ok": node("admitted", []),
        "q1": node("not_qualified", [reason("gpu.dcgm", "out_of_scope")]),
        "w1": node("admitted", [], [r(XID, "fail", "GPU2", "w1")]),
    }
    states = [d["state"] for d in nodes.values()]
    return {
        "schema_version": 1, "run_id": "r1", "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00", "inventory": "inv.yaml",
        "transport": "replay", "stages": ["pcie_gpu"], "checks": [WIDTH, FW, SSH, OS, XID],
        "summary": {"nodes": len(nodes), **{s: states.count(s)
                    for s in ("admitted", "rejected", "not_qualified")}},
        "nodes": nodes,
    }  # fmt: skip


def test_the_budget_keeps_one_node_per_cause_first_then_components_then_names() -> None:
    doc = fleet()
    chosen = {n: expanded_nodes(doc, n) for n in range(9)}
    assert chosen == {
        0: [],
        1: ["a1"],  # by name, the first cause seen
        2: ["a1", "b1"],
        3: ["a1", "b1", "b2"],  # b2's reach.ssh: its `not judged` error is no cause
        4: ["a1", "b1", "b2", "w1"],  # every (check, status) has its example
        5: ["a1", "a3", "b1", "b2", "w1"],  # then pcie.gpu.width on another GPU
        6: ["a1", "a2", "a3", "b1", "b2", "w1"],  # then by name
        7: ["a1", "a2", "a3", "b1", "b2", "c1", "w1"],  # every cited node: as before
        8: ["a1", "a2", "a3", "b1", "b2", "c1", "w1"],
    }


def run_dir(tmp: Path) -> tuple[dict[str, Any], RunResult]:
    doc = fleet(evidence=True)
    result = RunResult()
    for name in doc["nodes"]:
        d = tmp / "raw" / name
        d.mkdir(parents=True)
        text = json.dumps(session_doc(name)).encode()
        (d / "pcie_gpu.json.gz").write_bytes(gzip.compress(text))
        ref = f"raw/{name}/pcie_gpu.json#kernel_log"
        result.add(Verdict(WIDTH, name, Status.PASS, "GPU0", evidence=(ref,)))
    return doc, result


def refs_of(doc: dict[str, Any], result: RunResult) -> set[str]:
    reasons = [r for d in doc["nodes"].values() for r in (*d["reasons"], *d["waived"])]
    return {e for r in reasons for e in r["evidence"]} | {
        e for vs in result.verdicts.values() for v in vs for e in v.evidence
    }


def test_past_the_budget_compressed_only_and_every_reference_names_a_file(tmp_path: Path) -> None:
    doc, result = run_dir(tmp_path)
    result.rename_evidence(apply_budget(tmp_path, doc, 4))
    write_admission(tmp_path, doc)
    result.write(tmp_path)
    assert doc["evidence"] == {"budget": 4, "cited": 7, "expanded": ["a1", "b1", "b2", "w1"]}
    files = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "raw").rglob("*.json*"))
    plain = {"a1", "b1", "b2", "w1"}
    assert files == sorted(
        f"raw/{n}/pcie_gpu.json" + ("" if n in plain else ".gz") for n in doc["nodes"]
    )
    refs = refs_of(doc, RunResult.read(tmp_path))
    assert all((tmp_path / r.partition("#")[0]).is_file() for r in refs)
    assert {r for r in refs if r.startswith(("raw/a2/", "raw/a1/"))} == {
        "raw/a1/pcie_gpu.json#kernel_log",
        "raw/a2/pcie_gpu.json.gz#kernel_log",
    }
    # admission.json: as the document, valid, one line per node.
    text = (tmp_path / "admission.json").read_text()
    assert json.loads(text) == doc
    schemas.validate("admission", json.loads(text))
    lines = text.splitlines()
    assert lines[lines.index(' "nodes": {') + 1 :] == [
        f"  {json.dumps(n)}: {json.dumps(d, separators=(',', ':'))}" + ("," if n != "w1" else "")
        for n, d in doc["nodes"].items()
    ] + [" }", "}"]
    # Pages for the expanded nodes only; report.html links a page or the file that exists.
    write_report(tmp_path, doc, {"verdicts": []})
    pages = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "raw").rglob("*.html"))
    assert pages == [f"raw/{n}/pcie_gpu.html" for n in sorted(plain)]
    html = (tmp_path / "report.html").read_text()
    links = set(re.findall(r'class="(?:evidence|json)" href="(raw/[^"#]+)', html))
    assert links == {
        *(f"raw/{n}/pcie_gpu.html" for n in ("a1", "b1", "b2", "w1")),
        *(f"raw/{n}/pcie_gpu.json" for n in ("a1", "b1", "b2", "w1")),
        *(f"raw/{n}/pcie_gpu.json.gz" for n in ("a2", "a3", "c1")),
        "raw/q1/pcie_gpu.json.gz",  # not qualified: its row names its stage's file, as before
    }
    assert all(evidence_file(tmp_path / link) for link in links)


def test_within_the_budget_every_cited_node_is_expanded_as_before(tmp_path: Path) -> None:
    doc, result = run_dir(tmp_path)
    result.rename_evidence(apply_budget(tmp_path, doc, DEFAULT_EVIDENCE_NODES))
    assert doc["evidence"]["expanded"] == ["a1", "a2", "a3", "b1", "b2", "c1", "w1"]
    gz = sorted(p.parent.name for p in (tmp_path / "raw").rglob("*.json.gz"))
    assert gz == ["ok", "q1"]  # neither rejected nor waived: compressed, as before
    refs = refs_of(doc, result)
    assert {r for r in refs if r.endswith(".gz#kernel_log")} == {
        "raw/ok/pcie_gpu.json.gz#kernel_log",
        "raw/q1/pcie_gpu.json.gz#kernel_log",
    }


def test_allure_attaches_expanded_evidence_and_links_the_rest(tmp_path: Path) -> None:
    from nodegate.reports.allure import write_results

    doc, result = run_dir(tmp_path)
    apply_budget(tmp_path, doc, 4)
    verdicts = [
        {**r, "node": n}
        for n, d in doc["nodes"].items()
        for r in (*d["reasons"], *d["waived"])
        if r["check"] == WIDTH
    ]
    verdicts.append({**reason(WIDTH, "pass", "GPU0", "ok"), "node": "ok"})
    doc["checks"] = [WIDTH]
    out = tmp_path / "allure"
    assert write_results(out, doc, {"verdicts": verdicts}, tmp_path) == len(doc["nodes"])
    kept = {}
    for p in out.glob("*-result.json"):
        r = json.loads(p.read_text())
        kept[r["name"].split()[0]] = (
            r["status"],
            [a["name"] for a in r.get("attachments", [])],
            [link["name"] for link in r.get("links", [])],
        )
    assert {n: v for n, v in kept.items() if n in ("a1", "a2", "ok")} == {
        "a1": ("failed", ["raw/a1/pcie_gpu.json"], []),  # expanded: attached
        "a2": ("failed", [], ["raw/a2/pcie_gpu.json.gz"]),  # past the budget: linked
        "ok": ("passed", [], ["raw/ok/pcie_gpu.json.gz"]),  # admitted: linked, as before
    }
