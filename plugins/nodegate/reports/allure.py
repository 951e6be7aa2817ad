"""Allure results: one per node x stage (not per test item), the stage's evidence attached
once; above NODE_RESULTS nodes, one per check over the run's nodes, its failures folded.

With `--alluredir DIR`, a nodegate run writes its own results into DIR when the decision is
made (a `pytest_nodegate_admission` consumer) and takes allure-pytest's per-item listener out
of the run: per item, 32 nodes made 7,020 files (88 MB) with the same evidence file attached to
every check of a stage. A result holds one step per check (bad verdicts as sub-steps with
observed and expected); a stage that did not pass on a node attaches that node's
`raw/<node>/<stage>.json` once, a passing one links to it (attaching every passing node's
evidence would cost ~400 KB per node), and so does a failing one past the evidence budget
(`--evidence-nodes`: its `.json.gz` only, `nodegate.reports.expanded`). Past NODE_RESULTS
nodes (as `--items auto`), node x stage results with their evidence copied grow with the fleet
(10,000 nodes, half rejected: 609 MB), so each check is one result: a step per distinct bad
verdict naming its nodes, the nodes not run and the nodes passed as one step each, links to the
first nodes' evidence (`check_results`). View: `allure serve DIR` (Allure commandline).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from nodegate.core.results import RunResult
from nodegate.core.safetext import printable
from nodegate.core.settings import AUTO_NODE_ITEMS
from nodegate.reports.folding import FIRST_NODES, group_of, nodeset, observed_expected
from nodegate.reports.html.view import check_order, index_verdicts
from nodegate.stages.registry import checks_by_id
from nodegate.transport.evidence import GZ_SUFFIX, evidence_file

# Allure's statuses, worst first, for nodegate's.
ALLURE_STATUS = {
    "fail": "failed",
    "error": "broken",
    "not_run": "broken",
    "out_of_scope": "skipped",
    "skip": "skipped",
    "pass": "passed",
}
_RANK = {"failed": 3, "broken": 2, "skipped": 1, "passed": 0}
SITE_STAGE = "site"
# Up to this many nodes, one result per (node, stage); above, one per check (as --items auto).
NODE_RESULTS = AUTO_NODE_ITEMS
STEPS = 50  # a per-check result's steps of distinct bad verdicts (then one for the rest)
VERDICTS, ADMISSION = "verdicts.jsonl.gz", "admission.json"  # where a cut nodeset's rest is


def stage_of(check: str) -> str:
    entry = checks_by_id().get(check)
    return entry[0].name if entry is not None else SITE_STAGE


def _millis(stamp: str | None) -> int | None:
    if not stamp:
        return None
    return int(dt.datetime.fromisoformat(stamp).timestamp() * 1000)


def _worst(statuses: Iterable[str]) -> str:
    return max(statuses, key=_RANK.__getitem__, default="broken")


def _step(check: str, found: Sequence[Mapping[str, Any]]) -> Any:
    """One check on one node: its worst status; each bad verdict as a sub-step."""
    from allure_commons.model2 import StatusDetails, TestStepResult

    statuses = [ALLURE_STATUS.get(v["status"], "broken") for v in found]
    status = _worst(statuses) if found else "broken"
    bad = [v for v in found if v["status"] != "pass"]
    ok = len(found) - len(bad)
    name = f"{check}: {ok}/{len(found)} passed" if found else f"{check}: no verdict"
    subs = [TestStepResult(name=_text(v), status=ALLURE_STATUS.get(v["status"], "broken"))
            for v in bad]  # fmt: skip
    details = StatusDetails(message=subs[0].name) if subs else None
    return TestStepResult(name=name, status=status, steps=subs, statusDetails=details)


def _text(v: Mapping[str, Any]) -> str:
    """A bad verdict as a step names it, its node left out."""
    return printable(
        (f"[{v['component']}] " if v.get("component") else "")
        + f"{v['status'].upper()}: {v['message']}{observed_expected(v)}"
    )


def _some(nodes: Sequence[str], where: str) -> str:
    """The first FIRST_NODES nodes as a nodeset, and how many more (folding 10,000 names takes
    seconds; a step names a few, as the terminal's summary does)."""
    more = len(nodes) - FIRST_NODES
    some = nodeset(nodes[:FIRST_NODES]) + (f" +{more} more ({where})" if more > 0 else "")
    return f"{len(nodes)} node{'s' if len(nodes) > 1 else ''}: {some}"


def write_results(alluredir: Path, doc: Mapping[str, Any], vdoc: Mapping[str, Any],
                  run_dir: Path) -> int:  # fmt: skip
    """Write the run's results into `alluredir`: one per (node, stage) up to NODE_RESULTS
    nodes, one per check above (`check_results`); returns how many."""
    from allure_commons.logger import AllureFileLogger

    logger = AllureFileLogger(str(alluredir))  # type: ignore[no-untyped-call]
    verdicts = index_verdicts(vdoc)
    if len(doc["nodes"]) > NODE_RESULTS:
        return check_results(logger, doc, verdicts, run_dir)
    return node_results(logger, doc, verdicts, run_dir)


def check_results(logger: Any, doc: Mapping[str, Any],
                  verdicts: Mapping[tuple[str, str], list[Mapping[str, Any]]],
                  run_dir: Path) -> int:  # fmt: skip
    """One result per check over the run's nodes (as `--items check`'s items): its status the
    worst node's; a step per distinct bad verdict (its text without the node) naming its
    nodes, the first STEPS of them by count, then one step for the rest; a step for the nodes
    it did not run on and one for the nodes that passed; links to the evidence of the first
    FIRST_NODES nodes with a bad verdict (then of those not run), nothing attached (every
    verdict is in verdicts.jsonl.gz). 100 checks over 10,000 nodes: ~100 results, not 90,000
    node x stage results with their evidence copied (README "Allure")."""
    from allure_commons.model2 import Label, Link, StatusDetails, TestStepResult

    start, stop = _millis(doc.get("started_at")), _millis(doc.get("finished_at"))
    not_run = {
        (r["check"], node)
        for node, d in doc["nodes"].items()
        for r in d["reasons"]
        if r["status"] in ("not_run", "out_of_scope")
    }
    written = 0
    for c in check_order(doc["checks"]):
        stage = stage_of(c)
        passed: list[str] = []
        missing: list[str] = []  # not run, or no verdict
        bad: dict[tuple[str, str], list[str]] = {}  # (allure status, text) -> nodes
        failed: list[str] = []  # nodes with a bad verdict, in the run's order
        for node in doc["nodes"]:
            found = verdicts.get((c, node), [])
            if (c, node) in not_run or not found:
                missing.append(node)
                continue
            worse = [v for v in found if v["status"] != "pass"]
            if not worse:
                passed.append(node)
                continue
            failed.append(node)
            for text in dict.fromkeys((ALLURE_STATUS.get(v["status"], "broken"), _text(v))
                                      for v in worse):  # fmt: skip
                bad.setdefault(text, []).append(node)
        ranked = sorted(bad.items(), key=lambda kv: (-_RANK[kv[0][0]], -len(kv[1]), kv[0][1]))
        steps = [
            TestStepResult(name=f"{text} on {_some(ns, VERDICTS)}",
                           status=status)
            for (status, text), ns in ranked[:STEPS]
        ]  # fmt: skip
        rest = ranked[STEPS:]
        if rest:
            some = {n for _, ns in rest for n in ns}
            nodes = [n for n in doc["nodes"] if n in some]
            steps.append(TestStepResult(
                name=f"{len(rest)} more distinct verdicts on {_some(nodes, VERDICTS)}",
                status=_worst(status for (status, _), _ in rest),
            ))  # fmt: skip
        if missing:
            steps.append(TestStepResult(
                name=f"not run or no verdict on {_some(missing, ADMISSION)}",
                status=ALLURE_STATUS["not_run"],
            ))  # fmt: skip
        if passed:
            steps.append(TestStepResult(
                name=f"passed on {_some(passed, VERDICTS)}",
                status="passed",
            ))  # fmt: skip
        status = _worst(st.status for st in steps)
        result = _result(
            f"check:{c}", c, f"{c} ({len(doc['nodes'])} nodes)", f"nodegate.{stage}.{c}",
            status, steps, (start, stop),
            [Label("suite", stage), Label("feature", stage), Label("story", c)],
        )  # fmt: skip
        if status != "passed":
            result.statusDetails = StatusDetails(
                message="\n".join(st.name for st in steps if st.status != "passed")
            )
        for node in failed[:FIRST_NODES] + missing[:FIRST_NODES]:  # the failed nodes' first
            evidence = evidence_file(run_dir / "raw" / node / f"{stage}.json")
            if evidence is not None and len(result.links) < FIRST_NODES:
                ref = f"raw/{node}/{evidence.name}"
                result.links.append(Link("link", evidence.resolve().as_uri(), ref))
        logger.report_result(result)
        written += 1
    return written


def _result(
    history: str,
    case: str,
    name: str,
    full_name: str,
    status: str,
    steps: list[Any],
    span: tuple[int | None, int | None],
    labels: list[Any],
) -> Any:
    """An Allure TestResult under the `nodegate` parent suite: its history id from `history`
    (one per result across runs), its test case id from `case` (`nodegate:<case>`)."""
    from allure_commons.model2 import Label, TestResult

    return TestResult(
        uuid=str(uuid.uuid4()),
        historyId=hashlib.md5(history.encode()).hexdigest(),  # noqa: S324 - an id
        testCaseId=hashlib.md5(f"nodegate:{case}".encode()).hexdigest(),  # noqa: S324
        name=name, fullName=full_name, status=status, steps=steps,
        start=span[0], stop=span[1], labels=[Label("parentSuite", "nodegate"), *labels],
    )  # fmt: skip


def node_results(logger: Any, doc: Mapping[str, Any],
                 verdicts: Mapping[tuple[str, str], list[Mapping[str, Any]]],
                 run_dir: Path) -> int:  # fmt: skip
    """One result per (node, stage): a step per check, its bad verdicts as sub-steps; a stage
    that did not pass attaches the node's evidence file once, a passing one links to it."""
    from allure_commons.model2 import Attachment, Label, Link, StatusDetails

    checks = check_order(doc["checks"])
    by_stage: dict[str, list[str]] = {}
    for c in checks:
        by_stage.setdefault(stage_of(c), []).append(c)
    start, stop = _millis(doc.get("started_at")), _millis(doc.get("finished_at"))
    written = 0
    for node, d in doc["nodes"].items():
        reasons = {(r["check"], r["status"]) for r in d["reasons"]}
        for stage, stage_checks in by_stage.items():
            steps = []
            for c in stage_checks:
                found = verdicts.get((c, node), [])
                step = _step(c, found)
                if any(ck == c and st in ("not_run", "out_of_scope") for ck, st in reasons):
                    step.status = ALLURE_STATUS["not_run"]
                steps.append(step)
            status = _worst(s.status for s in steps)
            result = _result(
                f"{node}:{stage}", stage, f"{node} {stage}", f"nodegate.{stage}[{node}]",
                status, steps, (start, stop),
                [
                    Label("suite", stage),
                    Label("subSuite", group_of(d.get("labels") or {})),
                    Label("feature", stage),
                    Label("host", node),
                    Label("tag", node),
                    *([Label("tag", d["profile"])] if d.get("profile") else []),
                ],
            )  # fmt: skip
            bad = [s for s in steps if s.status != "passed"]
            if bad:
                result.statusDetails = StatusDetails(
                    message="\n".join(sub.name for s in bad for sub in s.steps) or bad[0].name
                )
            evidence = evidence_file(run_dir / "raw" / node / f"{stage}.json")
            if evidence is not None:  # an admitted node's stays compressed (transport.evidence)
                ref = f"raw/{node}/{evidence.name}"
                if status in ("failed", "broken") and not evidence.name.endswith(GZ_SUFFIX):
                    source = f"{uuid.uuid4()}-attachment.json"
                    logger.report_attached_file(str(evidence), source)
                    result.attachments.append(Attachment(ref, source, "application/json"))
                else:
                    result.links.append(Link("link", evidence.resolve().as_uri(), ref))
            logger.report_result(result)
            written += 1
    return written


class AllureWriter:
    """The `pytest_nodegate_admission` consumer that writes the Allure results."""

    def __init__(self, alluredir: Path, load_result: Callable[[], RunResult]) -> None:
        self.alluredir = alluredir
        self.load_result = load_result

    @pytest.hookimpl
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        result = self.load_result()  # in memory on the controller: verdicts.jsonl.gz's
        write_results(self.alluredir, doc, result.to_json(), run_dir)
