"""The evidence budget: which cited nodes' evidence the run directory holds as plain JSON with
a page per stage (`--evidence-nodes N`, default 128).

A cited node is one whose evidence the reports cite: rejected, or with a waived failure. Each
costs ~500 KB of plain JSON (~340) and pages (~155) at an 8-GPU node (its `.json.gz` ~22 KB),
which at 10,000 nodes with 40 % rejected would be ~200 KB per node of the run directory; 128
of them are ~6.4 KB per node there. So at most N cited nodes are expanded, chosen so that a
reader finds an example of every cause:

1. one node per failing check and status (`pcie.gpu.width fail`), by node name;
2. then one per (check, status, component) not covered yet (`... [GPU3]`), by node name;
3. then the others by node name, until N.

A node's causes are its failures, else its errors, else its other reasons (`folding.causes`),
and its waived failures. Below the budget (every cited node fits) every cited node is
expanded, as before the budget existed. The others keep their `.json.gz` only; every evidence
reference (verdicts.jsonl.gz, admission.json) names the file that exists
(`transport.evidence.existing_refs`), and report.html links a page where one was written, the
compressed document elsewhere. admission.json's `evidence` says what was chosen.

    >>> expanded_nodes(doc, 2)
    ['gpu005', 'gpu013']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nodegate.core.results import RAW_DIR
from nodegate.reports.folding import causes
from nodegate.reports.html.view import evidence_nodes
from nodegate.transport.evidence import existing_refs, expand_evidence

Key = tuple[str, ...]


def _causes(d: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(causes(d["reasons"]) if d["reasons"] else ()), *(d.get("waived") or ())]


def _by_check(d: Mapping[str, Any]) -> set[Key]:
    return {(r["check"], r["status"]) for r in _causes(d)}


def _by_component(d: Mapping[str, Any]) -> set[Key]:
    return {(r["check"], r["status"], r.get("component") or "") for r in _causes(d)}


def expanded_nodes(
    doc: Mapping[str, Any], budget: int, cited: list[str] | None = None
) -> list[str]:
    """The cited nodes of admission document `doc` (`cited`: already listed) whose evidence is
    expanded, at most `budget` of them (module docstring), sorted by name."""
    cited = sorted(evidence_nodes(doc) if cited is None else cited)
    if len(cited) <= budget:
        return cited
    picked: dict[str, None] = {}
    tiers: tuple[Callable[[Mapping[str, Any]], set[Key]], ...] = (_by_check, _by_component)
    for keys in tiers:
        covered = {k for n in picked for k in keys(doc["nodes"][n])}
        for node in cited:
            if len(picked) >= budget:
                break
            new = keys(doc["nodes"][node]) - covered
            if new and node not in picked:
                picked[node] = None
                covered |= new
    for node in cited:
        if len(picked) >= budget:
            break
        picked.setdefault(node, None)
    return sorted(picked)


def evidence_section(doc: Mapping[str, Any], budget: int) -> dict[str, Any]:
    """admission.json's `evidence`: the budget, how many nodes are cited, those expanded."""
    cited = evidence_nodes(doc)
    return {"budget": budget, "cited": len(cited), "expanded": expanded_nodes(doc, budget, cited)}


def apply_budget(run_dir: Path, doc: dict[str, Any], budget: int) -> Callable[[str], str]:
    """At the run's end: record the budget's choice as `doc["evidence"]`, expand those nodes'
    evidence, rename `doc`'s references to the files that hold them; the renaming, for the
    verdicts (`RunResult.rename_evidence`)."""
    doc["evidence"] = evidence_section(doc, budget)
    expand_evidence(run_dir / RAW_DIR, doc["evidence"]["expanded"])
    rename = existing_refs(run_dir)
    rename_refs(doc, rename)
    return rename


def rename_refs(doc: dict[str, Any], rename: Callable[[str], str]) -> int:
    """Rename every evidence reference of admission document `doc` in place (its nodes'
    reasons and waived failures, the infrastructure repair list); how many changed."""
    lists: list[list[Any]] = []
    for d in doc["nodes"].values():
        lists += [r["evidence"] for r in (*d["reasons"], *(d.get("waived") or ()))]
    lists += [item["evidence"] for item in doc.get("infrastructure") or ()]
    return sum(_rename(refs, rename) for refs in lists)


def _rename(refs: list[Any], rename: Callable[[str], str]) -> int:
    changed = 0
    for i, ref in enumerate(refs):
        new = rename(ref) if isinstance(ref, str) else ref
        if new != ref:
            refs[i] = new
            changed += 1
    return changed
