"""`--act slurm`: drain rejected nodes with a structured reason, resume requalified ones.

NHC's rule: a node is resumed only when nodegate drained it (its reason starts with
`nodegate `); a foreign drain or down reason (another tool's, an admin's) is never
overwritten nor resumed. One reason per cause: a node nodegate already drained for the same
main cause (check, component, class; any run) is left as it is, no `scontrol update` issued;
a new cause replaces nodegate's reason, never nests it. Reads with `scontrol show node -o`,
writes with `scontrol update` (argument lists, no shell); dry-run reads and plans only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from nodegate.actions.base import (
    REASON_PREFIX,
    ActionRecord,
    cause_head,
    intent,
    not_actionable,
    quotes_ours,
    reason_text,
    record,
    refusal,
    refuse,
    same_cause,
    summary,
    target_name,
)
from nodegate.core.errors import ConfigError
from nodegate.transport.scontrol import (
    SLURM_NAME_LABEL,
    Scontrol,
    SlurmError,
    SlurmNode,
    parse_show_node,
)

__all__ = ["SLURM_NAME_LABEL", "Scontrol", "SlurmError", "SlurmNode", "parse_show_node"]

# Slurm's accounting keeps a node's reason in a MySQL TINYTEXT column (slurmdbd's node event
# table, `reason tinytext not null`): 255 bytes; longer reasons are cut there.
REASON_MAX = 255


def ours(node: SlurmNode) -> bool:
    """nodegate set this node's reason (NHC's rule: whoever's does not start so is not ours)."""
    return node.reason is not None and node.reason.startswith(REASON_PREFIX)


def plan_node(doc: Mapping[str, Any], node: str, current: SlurmNode | None) -> ActionRecord:
    """What Slurm should do with one node of an actionable decision."""
    d = doc["nodes"][node]
    name = target_name(doc, node, SLURM_NAME_LABEL)
    seen = current.to_json() if current else None
    rec = ActionRecord(node, name, d["state"], "none", "", seen)
    if current is None:
        rec.result, rec.why, rec.error = (
            "failed",
            "not a node of this Slurm cluster",
            (f"scontrol show node has no node {name!r} (inventory label {SLURM_NAME_LABEL}?)"),
        )
        return rec
    want = intent(doc, node)
    if want == "take_out":
        reason = reason_text(doc["run_id"], d["reasons"], REASON_MAX)
        if current.reason is not None and not ours(current):
            rec.result, rec.why = "unchanged", "foreign reason kept (not set by nodegate)"
        elif current.drained and ours(current) and quotes_ours(d["reasons"]):
            # Not judged because our own drain holds it: what it was drained for still stands.
            rec.result, rec.why = "unchanged", "held by nodegate's own drain: its reason kept"
        elif current.drained and same_cause(current.reason, cause_head(d["reasons"])):
            # Idempotent: an earlier run's drain for the same cause keeps its reason and time
            # (no scontrol update); a new cause replaces nodegate's reason, never nests it.
            rec.result, rec.why = "unchanged", "already drained by nodegate for this cause"
        else:
            rec.action, rec.reason, rec.why = "drain", reason, "rejected"
    elif want == "return":
        if not current.out:
            rec.result, rec.why = "unchanged", "admitted and in service"
        elif not ours(current):
            rec.result, rec.why = "unchanged", "foreign drain/down reason kept (not nodegate's)"
            rec.held_by = f"{current.state} ({current.reason or 'no reason'})"
        else:
            rec.action, rec.why = "resume", "admitted; drained by nodegate"
    else:
        rec.result, rec.why = "unchanged", f"{d['state']}: no action"
    return rec


class SlurmAction:
    """`pytest_nodegate_admission` implementation for `--act slurm`."""

    def __init__(self, apply: bool, failures: list[str], scontrol: Scontrol | None = None):
        self.apply = apply
        self.failures = failures
        self.scontrol = scontrol or Scontrol()
        self.lines: list[str] = []

    def check_usable(self) -> None:
        """At configure: scontrol runs and answers (a usage error otherwise)."""
        try:
            self.scontrol.nodes()
        except SlurmError as exc:
            raise ConfigError(f"--act slurm: {exc}") from None

    @pytest.hookimpl
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        skipped = not_actionable(doc)
        if skipped is not None:
            record(run_dir, doc, "slurm", self.apply, [], skipped=skipped)
            self.lines = [f"slurm: {skipped}"]
            return
        try:
            before = self.scontrol.nodes()
        except SlurmError as exc:
            self._failed(run_dir, doc, str(exc))
            return
        recs = [plan_node(doc, n, before.get(target_name(doc, n, SLURM_NAME_LABEL)))
                for n in doc["nodes"]]  # fmt: skip
        drains = [r for r in recs if r.action == "drain"]
        refused = refusal("slurm", "drain", doc, drains)
        if refused is not None:  # past max_drain nothing is drained; resumes still go
            refuse(drains, refused)
            self.failures.append(refused["message"])
        if self.apply:
            self._apply([r for r in recs if r.result != "skipped"])
        record(run_dir, doc, "slurm", self.apply, recs, refused=refused)
        self.failures += [f"slurm {r.node}: {r.error}" for r in recs if r.result == "failed"]
        self.lines = summary("slurm", self.apply, recs)
        if refused is not None:
            self.lines.append(refused["message"])

    def _apply(self, recs: list[ActionRecord]) -> None:
        for r in recs:
            if r.action == "drain":
                assert r.reason is not None
                r.error = self.scontrol.update(r.target, "State=DRAIN", f"Reason={r.reason}")
            elif r.action == "resume":
                r.error = self.scontrol.update(r.target, "State=RESUME")
        unread: str | None = None
        try:
            after = self.scontrol.nodes()
        except SlurmError as exc:
            after, unread = {}, str(exc)
        for r in recs:
            if r.action == "none":
                continue
            now = after.get(r.target)
            r.after = now.to_json() if now else None
            done = now is not None and (
                (r.action == "drain" and now.drained and now.reason == r.reason)
                or (r.action == "resume" and not now.drained)
            )
            r.result = "applied" if r.error is None and done else "failed"
            if r.result == "failed" and r.error is None:
                r.error = unread or f"state after {r.action}: {now and now.to_json()}"

    def _failed(self, run_dir: Path, doc: dict[str, Any], error: str) -> None:
        record(run_dir, doc, "slurm", self.apply, [], error=error)
        self.failures.append(f"slurm: {error}")
        self.lines = [f"slurm: FAILED: {error}"]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.section("nodegate actions")
            for line in self.lines:
                terminalreporter.write_line(line)
