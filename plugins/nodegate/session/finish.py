"""The run's outcome: each item's result (controller side), admission.json at session end,
handed to `pytest_nodegate_admission` implementations: reports/latest here, the terminal
summary (`nodegate.reports.terminal`), report.html (`nodegate.reports.html`) and Allure results
(`nodegate.reports.allure`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _pytest.junitxml import xml_key

from nodegate.admission.gate import admission_doc, decide, level_reason, write_admission
from nodegate.admission.guard import drain_bound, find_systemic, mark_systemic
from nodegate.admission.infrastructure import infrastructure_items
from nodegate.admission.remediation import table_of
from nodegate.compare.outliers import find_outliers, reject_blocking
from nodegate.core.results import RunResult
from nodegate.core.settings import REPLAY_TRANSPORT
from nodegate.core.values import Status, Verdict
from nodegate.reports.expanded import apply_budget
from nodegate.reports.junit import case_names
from nodegate.session.check_items import JUDGED, node_outcomes
from nodegate.session.collection import FAILED, SITE_PREFIX, SKIPPED, XFAILED, item_key
from nodegate.session.history import HISTORY
from nodegate.session.run_stages import ITEMS, STARTING
from nodegate.session.state import STATE, RunState, now
from nodegate.stages.reach import SESSION_CHECK
from nodegate.stages.registry import checks_by_id

# Exit codes (README "Exit codes"): pytest's own, plus 1 whenever a node is rejected, 6 when
# no node is rejected but some are not qualified (a run that did not cover their admission
# policy: -k, -m), 8 when an --act action failed (actions.json says which). 7 is kept for
# the CI A/B mode's "regressed".
EXIT_ADMITTED, EXIT_REJECTED, EXIT_NOT_QUALIFIED, EXIT_REGRESSED, EXIT_ACTION_FAILED = 0, 1, 6, 7, 8


class Recorder:
    """Controller-side record of each item's outcome (xdist forwards workers' reports); with
    per-check items (`--items check`), each (check, node)'s, and its junit.xml test case."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
            return  # not the item's outcome
        self.state.reported.add(report.nodeid)
        key = item_key(report.nodeid)
        if key is not None and key[1] == "":
            self._per_check(key[0], report)
            return
        if self.state.junit is not None:
            self.state.junit.case(*case_names(report.nodeid), *_report_case(report))
        if key is None:
            return
        self.state.item_outcomes[key] = report.outcome
        if key[0].startswith(SITE_PREFIX):
            self.state.site_verdicts.append(_site_verdict(key, report))

    def _per_check(self, check: str, report: pytest.TestReport) -> None:
        """A per-check item: each node's outcome as its per-node item's would be, judged again
        here from the verdicts (an xdist worker sends one report); an item that did not get
        to judge (a skip mark, a crash) gives its own outcome to every node."""
        state = self.state
        classname, name = case_names(report.nodeid)
        test = name.rpartition("[")[0]
        where = f"{report.location[0]}:1"
        if getattr(report, JUDGED, False):
            cases = (
                (node, outcome, *_case_texts(outcome, text, where))
                for node, outcome, text in node_outcomes(state, check)
            )
        else:
            same = _report_case(report)
            cases = ((n.name, *same) for n in state.nodes)
        for node, outcome, message, text in cases:
            # A waived failure's per-node item reports "skipped" (xfail), as pytest's does.
            state.item_outcomes[(check, node)] = SKIPPED if outcome == XFAILED else outcome
            if state.junit is not None:
                state.junit.case(classname, f"{test}[{node}]", outcome, message, text)


def _case_texts(outcome: str, text: str, where: str) -> tuple[str, str]:
    """A judged (check, node)'s junit message and text, as pytest's junitxml writes its item's
    (`pytest.fail(text, pytrace=False)`, `pytest.skip(text)`, `pytest.xfail(text)`)."""
    if outcome == FAILED:
        return f"Failed: {text}", text
    if outcome == SKIPPED:
        return text, f"{where}: {text}"
    return text, ""


def _report_case(report: pytest.TestReport) -> tuple[str, str, str]:
    """Any other item's junit outcome, message and text, as pytest's junitxml writes them."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = str(getattr(crash, "message", "") or report.longreprtext)
    if hasattr(report, "wasxfail"):
        return XFAILED, str(report.wasxfail).removeprefix("reason: "), ""
    if report.skipped and isinstance(report.longrepr, tuple):
        path, line, why = report.longrepr
        why = why.removeprefix("Skipped: ")
        return SKIPPED, why, f"{path}:{line}: {why}"
    if report.failed and report.when == "setup":
        return "error", f'failed on setup with "{message}"', report.longreprtext
    if report.failed:
        return FAILED, message, report.longreprtext
    return report.outcome, "", ""


def _site_verdict(key: tuple[str, str], report: pytest.TestReport) -> Verdict:
    status = {"passed": Status.PASS, "skipped": Status.SKIP}.get(report.outcome, Status.FAIL)
    if status is Status.PASS:
        return Verdict(key[0], key[1], status, component="site")
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(getattr(crash, "message", "") or report.longreprtext).strip()
    if crash is None:  # a failure text nodegate escaped (`items`): its `E   ` lines say why
        errors = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
        text = errors[0] if errors else text
    msg = text.splitlines()[0] if text else report.outcome
    # A site check judges in its own code: what it saw is its outcome, what it wanted a pass.
    return Verdict(key[0], key[1], status, "site", report.outcome, "passed", message=msg)


@pytest.hookimpl(tryfirst=True)  # before junitxml writes junit.xml: it gets the unrun items
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None or state.is_worker:
        return
    try:
        if state.ran:
            result = state.result = state.result or RunResult(interrupted=STARTING)
            if result.interrupted is None and exitstatus == pytest.ExitCode.INTERRUPTED:
                result.interrupted = ITEMS
            for v in state.site_verdicts:
                prof = state.profiles.get(v.node)
                result.add(table_of(prof.data).classify(v) if prof else v)
            # Final state of the run: site checks' verdicts and every connection opened.
            result.connections = getattr(state.transport, "connections_opened", 0)
            try:
                doc = _admission(state, result)
                try:
                    # The evidence people open (report.html, Allure, a shell), plain: a
                    # rejected node's, a waived failure's, as far as the evidence budget goes.
                    rename = apply_budget(state.run_dir, doc, state.settings.evidence_nodes)
                finally:
                    write_admission(state.run_dir, doc)
                result.rename_evidence(rename)
            finally:  # what was measured is kept, whatever the decision did
                result.write(state.run_dir)
            if result.interrupted is not None:
                _junit_not_run(
                    session.config, state, f"run interrupted during {result.interrupted}"
                )
            if state.junit is not None:
                state.junit.close()
            if session.exitstatus == EXIT_ADMITTED:
                session.exitstatus = _exit_for(doc)
            session.config.hook.pytest_nodegate_admission(doc=doc, run_dir=state.run_dir)
            if state.action_failures and session.exitstatus in (
                EXIT_ADMITTED,
                EXIT_REJECTED,
                EXIT_NOT_QUALIFIED,
                EXIT_REGRESSED,
            ):
                session.exitstatus = EXIT_ACTION_FAILED
    finally:
        if state.loop is not None and state.transport is not None:
            state.loop.call(state.transport.close(), timeout=30)
        if state.loop is not None:
            state.loop.stop()


def _exit_for(doc: dict[str, Any]) -> int:
    """A run pytest saw pass: 1 if a node is rejected or a check is systemic, else 6 if one is
    not qualified."""
    if doc["summary"]["rejected"] or doc.get("systemic"):
        return EXIT_REJECTED
    if doc["summary"]["not_qualified"]:
        return EXIT_NOT_QUALIFIED
    return EXIT_ADMITTED


def _admission(state: RunState, result: RunResult) -> dict[str, Any]:
    decisions = decide(
        state.selected,
        result,
        {n: p.name for n, p in state.profiles.items()},
        {n.name: dict(n.labels) for n in state.nodes},
        state.item_outcomes,
        result.interrupted,
        required=state.required(),
        waivers=state.waivers,
    )
    for node, prof in state.profiles.items():
        why = state.policies[prof.name].level_shortfall(state.settings.level)
        if why is not None and node in decisions:
            decisions[node].reasons.append(level_reason(why))
    # A check erroring on most nodes is a tool or controller problem: its nodes are not
    # qualified rather than rejected (admission.guard); an interrupted run admits nobody anyway.
    systemic = (
        []
        if result.interrupted
        else find_systemic(decisions, result, state.profiles, SESSION_CHECK.id)
    )
    mark_systemic(decisions, systemic)
    # The second tier (fleet-relative outliers).
    found = None if result.interrupted else find_outliers(result, state.profiles)
    if found is not None:
        reject_blocking(decisions, found)
    # The third tier: each node against its own past (profile `history:` rules; as data).
    recorder = state.config.stash.get(HISTORY, None)
    judged = None if recorder is None else recorder.judge(decisions, result)
    meta = {
        "run_id": state.run_id,
        "started_at": state.started_at,
        "finished_at": now(),
        "inventory": state.inventory.source,
        "transport": state.settings.transport,
        "level": state.settings.level,
        "stages": result.stages_run,
        **({"interrupted": result.interrupted} if result.interrupted else {}),
        **({"outliers": found.to_json()} if found is not None else {}),
        **_infrastructure(result),
        **({"history": judged} if judged is not None else {}),
    }
    return admission_doc(
        decisions,
        [n.name for n in state.nodes],
        meta,
        (c for c, _ in state.selected),
        policies=state.policies,
        waivers=state.waivers if state.settings.waivers is not None else None,
        allow_incomplete=state.settings.allow_incomplete,
        systemic=systemic,
        guard=drain_bound(
            state.settings.max_drain,
            state.inventory.settings.max_drain,
            state.profiles,
            len(decisions),
        ),
    )


def _infrastructure(result: RunResult) -> dict[str, Any]:
    """admission.json's repair list, when a stage with infrastructure checks ran."""
    infra = {c for c, (_s, check) in checks_by_id().items() if check.infrastructure}
    if not any(check in infra for check, _node in result.verdicts):
        return {}
    verdicts = (v for (check, _n), vs in result.verdicts.items() if check in infra for v in vs)
    return {"infrastructure": infrastructure_items(verdicts, infra)}


def _junit_not_run(config: pytest.Config, state: RunState, why: str) -> None:
    """Items that never reported go into junit.xml as errors, so that an interrupted run's
    file cannot read as an empty success (`tests="0" failures="0"`)."""
    xml = config.stash.get(xml_key, None)
    message = f"not run: {why}"
    for nodeid in (n for n in state.nodeids if n not in state.reported):
        if state.junit is not None:  # per-check items: each of its nodes' test case
            classname, name = case_names(nodeid)
            key = item_key(nodeid)
            test = name.rpartition("[")[0]
            names = [f"{test}[{n.name}]" for n in state.nodes] if key and not key[1] else [name]
            for n in names:
                state.junit.case(
                    classname, n, "error", f'failed on setup with "{message}"', message
                )
            continue
        if xml is None:
            return
        where = (nodeid.partition("::")[0], None, nodeid)
        error = pytest.TestReport(nodeid, where, {}, "failed", message, "setup")
        done = pytest.TestReport(nodeid, where, {}, "passed", None, "teardown")
        xml.pytest_runtest_logreport(error)
        xml.pytest_runtest_logreport(done)


class LatestLink:
    """`reports/latest` -> the newest actionable run directory (a `pytest_nodegate_admission`
    consumer): complete, or --allow-incomplete; an interrupted run leaves it where it was, and
    so does a replay (it re-judges a captured bundle: the fleet's latest state is elsewhere)."""

    @pytest.hookimpl
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        if not doc["actionable"] or doc.get("transport") == REPLAY_TRANSPORT:
            return
        link = run_dir.parent / "latest"
        try:
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(run_dir.name)
        except OSError:
            pass  # a convenience only
