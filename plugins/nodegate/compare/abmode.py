"""CI A/B mode in a run: `--save-baseline DIR` and `--compare-to DIR` (a
`pytest_nodegate_admission` consumer), `compare.json`, the terminal section and exit code 7.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ClusterShell.NodeSet import NodeSet

from nodegate.compare.abtest import FLEET, Change, Comparison, compare
from nodegate.compare.baseline import load_baseline, run_baseline, save_baseline
from nodegate.compare.from_history import history_baseline, is_history_ref
from nodegate.compare.jobs import JobChange
from nodegate.compare.regression import RegressionRules, regression_rules
from nodegate.core import schemas
from nodegate.core.errors import ConfigError
from nodegate.core.results import COMPARE_FILE
from nodegate.core.safetext import printable
from nodegate.core.settings import DEFAULT_LEVEL, Settings
from nodegate.core.words import plural
from nodegate.profiles import Profile
from nodegate.stages.registry import checks_by_id

EXIT_REGRESSED = 7  # README "Exit codes": the comparison found a regression
MAX_CHANGE_LINES = 20  # changes that are not regressions, on the terminal (all in compare.json)


def check_same_fleet(baseline: Mapping[str, Any], profiles: Mapping[str, str], where: Path) -> None:
    """ConfigError when the baseline is of another fleet (no node in common) or profile."""
    b_nodes = baseline["nodes"]
    common = [n for n in profiles if n in b_nodes]
    if not common:
        raise ConfigError(
            f"--compare-to {where}: the baseline's nodes {NodeSet.fromlist(list(b_nodes))} share "
            f"none with this run's {NodeSet.fromlist(list(profiles))} (another fleet)"
        )
    differ = [n for n in common if b_nodes[n]["profile"] != profiles[n]]
    if differ:
        n = differ[0]
        more = f" (and {len(differ) - 1} more nodes)" if len(differ) > 1 else ""
        raise ConfigError(
            f"--compare-to {where}: the baseline is of another profile: {n} is "
            f"{b_nodes[n]['profile']} in the baseline, {profiles[n]} in this run{more}"
        )


def check_same_level(baseline: Mapping[str, Any], level: str, where: Path) -> None:
    """ConfigError when the baseline ran at another --level: a quick run's numbers (shorter
    burns, fewer iterations, checks left out) are not a standard run's."""
    theirs = baseline.get("level", DEFAULT_LEVEL)
    if theirs != level:
        raise ConfigError(
            f"--compare-to {where}: the baseline ran at --level {theirs}, this run at --level "
            f"{level}: compare runs of one level (run --level {theirs}, or save a baseline at "
            f"--level {level})"
        )


def comparison_doc(cmp: Comparison, run_id: str, baseline_dir: Path) -> dict[str, Any]:
    """compare.json's content, validated against schemas/compare.schema.json."""
    regressed_nodes = sorted({c.scope for c in cmp.regressions if c.scope != FLEET})
    doc = {
        "schema_version": 1,
        "run_id": run_id,
        "baseline": {"run_id": cmp.baseline_run, "dir": str(baseline_dir)},
        "regressed": cmp.regressed,
        "summary": {
            "nodes_compared": len(cmp.nodes_compared),
            "changes": len(cmp.changes) + len(cmp.jobs),
            "regressions": len(cmp.regressions) + len(cmp.job_regressions),
            "regressed_nodes": regressed_nodes,
            "regressed_jobs": sorted({j.name for j in cmp.job_regressions}),
        },
        "nodes_only_in_baseline": cmp.only_in_baseline,
        "nodes_only_in_run": cmp.only_in_run,
        "checks_only_in_baseline": cmp.checks_only_in_baseline,
        "checks_only_in_run": cmp.checks_only_in_run,
        "changes": [c.to_json() for c in cmp.changes],
        "jobs": [j.to_json() for j in cmp.jobs],
    }
    schemas.validate("compare", doc)
    return doc


def _folded(changes: list[Change]) -> list[str]:
    """One line per distinct change, naming the folded set of nodes (`fleet` for medians)."""
    groups: dict[str, list[str]] = {}
    for c in changes:
        comp = f" [{c.component}]" if c.component else ""
        rule = f" ({c.rule})" if c.rule else ""
        text = c.message if c.kind in ("status", "admission") else f"{c.check}{comp}: {c.message}"
        groups.setdefault(text + rule, []).append(c.scope)
    lines = []
    for text, scopes in groups.items():
        who = FLEET if scopes == [FLEET] else str(NodeSet.fromlist(scopes))
        lines.append(f"{who}: {text}")
    return lines


def _job_line(j: JobChange) -> str:
    """`job gpu[001-008]: nccl.whole.busbw [whole set]: 369.68 GB/s -> ... (rule)`."""
    moved = (
        f" (nodes {j.nodes_before} -> {j.nodes_after})"
        if j.nodes_before and j.nodes_after and j.nodes_before != j.nodes_after
        else ""
    )
    rule = f" ({j.rule})" if j.rule else ""
    return f"job {j.name}: {j.check} [{j.component}]: {j.message}{moved}{rule}"


def summary_lines(cmp: Comparison, baseline_dir: Path, path: str) -> list[str]:
    """The terminal's "nodegate A/B comparison" section, one escaped line per entry."""
    regs, job_regs = cmp.regressions, cmp.job_regressions
    verdict = (
        f"REGRESSED: {len(regs) + len(job_regs)} regressions"
        + (
            f" on {NodeSet.fromlist(sorted({c.scope for c in regs if c.scope != FLEET}))}"
            if any(c.scope != FLEET for c in regs)
            else ""
        )
        + (f" ({len(job_regs)} of jobs)" if job_regs else "")
        if regs or job_regs
        else "no regression"
    )
    lines = [
        f"compared with baseline {cmp.baseline_run} ({baseline_dir}): "
        f"{plural(len(cmp.nodes_compared), 'node')}, "
        f"{plural(len(cmp.changes) + len(cmp.jobs), 'change')}, {verdict}"
    ]
    lines += ["  REGRESSION " + _job_line(j) for j in job_regs]
    lines += ["  REGRESSION " + ln for ln in _folded(regs)]
    others = [_job_line(j) for j in cmp.jobs if not j.regression]
    others += _folded([c for c in cmp.changes if not c.regression])
    lines += ["  changed " + ln for ln in others[:MAX_CHANGE_LINES]]
    if len(others) > MAX_CHANGE_LINES:
        lines.append(f"  ... {len(others) - MAX_CHANGE_LINES} more changes in {path}")
    for what, names in (
        ("only in the baseline (not compared)", cmp.only_in_baseline),
        ("only in this run (not compared)", cmp.only_in_run),
    ):
        if names:
            lines.append(f"  {what}: {NodeSet.fromlist(names)}")
    for what, checks in (
        ("out of this run's scope", cmp.checks_only_in_baseline),
        ("not in the baseline's scope", cmp.checks_only_in_run),
    ):
        if checks:
            lines.append(f"  {len(checks)} checks {what}, not compared (listed in {path})")
    lines.append(f"compare: {path}")
    return [printable(ln) for ln in lines]


class ABMode:
    """`--save-baseline` and `--compare-to` for one run, on the controller."""

    def __init__(
        self,
        save_to: Path | None,
        compare_to: Path | None,
        baseline: Mapping[str, Any] | None,
        rules: Mapping[str, RegressionRules],
    ) -> None:
        self.save_to, self.compare_to = save_to, compare_to
        self.baseline, self.rules = baseline, rules
        self.session: pytest.Session | None = None
        self.lines: list[str] = []
        self.regressed = False

    @classmethod
    def configure(
        cls, settings: Settings, profiles: Mapping[str, Profile], history: str | None = None
    ) -> ABMode | None:
        """None when neither option is given; ConfigError for a baseline this run cannot use
        (unreadable, another fleet or profile, a profile without `regression:`).
        `history`: the run history's URL, for `--compare-to history:<run>`."""
        if settings.save_baseline is None and settings.compare_to is None:
            return None
        baseline, rules, where = None, {}, settings.compare_to
        if where is not None:
            if is_history_ref(where):
                baseline, where = history_baseline(str(where), history)
            else:
                baseline = load_baseline(where)
            check_same_fleet(baseline, {n: p.name for n, p in profiles.items()}, where)
            check_same_level(baseline, settings.level, where)
            known = set(checks_by_id())
            rules = {p.name: regression_rules(p, known) for p in profiles.values()}
        return cls(settings.save_baseline, where, baseline, rules)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        if doc.get("interrupted"):
            self.lines = ["interrupted run: no comparison made, no baseline saved"]
            return
        current = run_baseline(run_dir)
        if self.baseline is not None and self.compare_to is not None:
            cmp = compare(self.baseline, current, self.rules)
            out = run_dir / COMPARE_FILE
            out.write_text(
                json.dumps(comparison_doc(cmp, doc["run_id"], self.compare_to), indent=1) + "\n",
                encoding="utf-8",
            )
            self.lines += summary_lines(cmp, self.compare_to, os.path.relpath(out))
            self.regressed = cmp.regressed
            session = self.session
            # Regressed wins over admitted (0), rejected (1) and not qualified (6); an action
            # failure (8) is set after this hook and wins over it.
            if self.regressed and session is not None and session.exitstatus in (0, 1, 6):
                session.exitstatus = EXIT_REGRESSED
        if self.save_to is not None:
            if not current["complete"]:
                self.lines.append(
                    f"baseline NOT saved to {self.save_to}: the run did not cover every check "
                    "its profiles need (a diagnostic run)"
                )
            else:
                self.lines.append(f"baseline saved: {save_baseline(current, self.save_to)}")

    @pytest.hookimpl(trylast=True)  # after the admission section
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.section("nodegate A/B comparison")
            for line in self.lines:
                terminalreporter.write_line(line)
