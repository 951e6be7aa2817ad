"""Allure results, one per node x stage (not per test item), the stage's evidence attached once.

With `--alluredir DIR`, a nodegate run writes its own results into DIR when the decision is
made (a `pytest_nodegate_admission` consumer) and takes allure-pytest's per-item listener out
of the run: per item, 32 nodes made 7,020 files (88 MB) with the same evidence file attached to
every check of a stage. A result holds one step per check (bad verdicts as sub-steps with
observed and expected); a stage that did not pass on a node attaches that node's
`raw/<node>/<stage>.json` once, a passing one links to it (attaching every passing node's
evidence would cost ~400 KB per node), and so does a failing one past the evidence budget
(`--evidence-nodes`: its `.json.gz` only, `nodegate.reports.expanded`). View: `allure serve
DIR` (Allure commandline).
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
from nodegate.reports.folding import group_of, observed_expected
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
    subs = [
        TestStepResult(
            name=printable(
                (f"[{v['component']}] " if v.get("component") else "")
                + f"{v['status'].upper()}: {v['message']}{observed_expected(v)}"
            ),
            status=ALLURE_STATUS.get(v["status"], "broken"),
        )
        for v in bad
    ]
    details = StatusDetails(message=subs[0].name) if subs else None
    return TestStepResult(name=name, status=status, steps=subs, statusDetails=details)


def write_results(alluredir: Path, doc: Mapping[str, Any], vdoc: Mapping[str, Any],
                  run_dir: Path) -> int:  # fmt: skip
    """Write one result per (node, stage) of the run into `alluredir`; returns how many."""
    from allure_commons.logger import AllureFileLogger
    from allure_commons.model2 import Attachment, Label, Link, StatusDetails, TestResult

    logger = AllureFileLogger(str(alluredir))  # type: ignore[no-untyped-call]
    verdicts = index_verdicts(vdoc)
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
            key = f"{node}:{stage}"
            result = TestResult(
                uuid=str(uuid.uuid4()),
                historyId=hashlib.md5(key.encode()).hexdigest(),  # noqa: S324 - an id
                testCaseId=hashlib.md5(f"nodegate:{stage}".encode()).hexdigest(),  # noqa: S324
                name=f"{node} {stage}",
                fullName=f"nodegate.{stage}[{node}]",
                status=status,
                steps=steps,
                start=start,
                stop=stop,
                labels=[
                    Label("parentSuite", "nodegate"),
                    Label("suite", stage),
                    Label("subSuite", group_of(d.get("labels") or {})),
                    Label("feature", stage),
                    Label("host", node),
                    Label("tag", node),
                    *([Label("tag", d["profile"])] if d.get("profile") else []),
                ],
            )
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
                    logger.report_attached_file(str(evidence), source)  # type: ignore[no-untyped-call]
                    result.attachments.append(Attachment(ref, source, "application/json"))
                else:
                    result.links.append(Link("link", evidence.resolve().as_uri(), ref))
            logger.report_result(result)  # type: ignore[no-untyped-call]
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
