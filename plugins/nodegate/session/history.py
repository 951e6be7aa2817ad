"""The run's history (`--history URL`, ini twin `nodegate_history`, inventory
`settings: {history: URL}`; default `sqlite:///<reports-dir>/history.sqlite`; `off`: none).

At configure the database is opened (and migrated) before any node is connected to: a bad
URL, an unreachable or locked database or a newer schema stops the run with exit 4. The
rules (profile `history:`) judge the run from its nodes' past before admission.json is
written (`judge`, called by `finish`); the run is written when its decision is made, after
the actions; a failed write keeps the run directory and exits 8 with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from nodegate.admission.gate import NodeDecision
from nodegate.core.errors import ConfigError
from nodegate.core.results import ACTIONS_FILE, RunResult
from nodegate.core.safetext import printable, printable_lines
from nodegate.history import queries, rules
from nodegate.history.ingest import Written, write_run
from nodegate.history.judge import judge_run
from nodegate.history.store import (
    OFF,
    HistoryError,
    Store,
    default_url,
    open_store,
    shown_url,
)
from nodegate.session.state import STATE, RunState
from nodegate.stages.registry import checks_by_id

HISTORY = pytest.StashKey["HistoryRecorder"]()
EXIT_HISTORY_FAILED = 8  # README "Exit codes": like a failed action, the run's files are kept
KEPT_EXITS = (0, 1, 6, 7)  # outcomes a failed write overrides (not 2, 3, 4, 5)


def history_url(state: RunState) -> str | None:
    """The URL this run writes to (None: off): option or ini, else inventory, else default."""
    given = state.settings.history or getattr(state.inventory.settings, "history", None)
    if given is not None and given.strip().lower() == OFF:
        return None
    return given.strip() if given else default_url(state.settings.reports_dir.resolve())


class HistoryRecorder:
    """Judges the run by its nodes' past, then records it (a `pytest_nodegate_admission`
    consumer that writes at session finish, when the exit status is known)."""

    def __init__(self, url: str, store: Store | None, state: RunState) -> None:
        self.url, self._store, self.state = url, store, state
        self.rules = {n: rules.rules_of(p.data) for n, p in state.profiles.items()}
        self.doc: dict[str, Any] | None = None
        self.written: Written | None = None
        self.failure: str | None = None
        self.flags: list[rules.Flag] = []

    @property
    def store(self) -> Store:
        """The store, opened now if configure left it (a default file not made yet)."""
        if self._store is None:
            self._store = open_store(self.url)
        return self._store

    def judge(
        self, decisions: Mapping[str, NodeDecision], result: RunResult
    ) -> dict[str, Any] | None:
        """admission.json's `history` section (None when no rule is on); the flags applied."""
        if not any(r.enabled for r in self.rules.values()):
            return None
        self.state.run_dir.mkdir(parents=True, exist_ok=True)  # the default file's folder
        try:
            self.flags = judge_run(self.store, self.state.run_id, decisions, result, self.rules)
        except HistoryError as exc:
            self.failure = str(exc)
        except Exception as exc:  # noqa: BLE001 - the rules cannot judge: the write says why
            self.failure = str(self.store.fail("reading the nodes' history", exc))
        if self.failure is not None:
            return {"store": self.shown, "flags": [], "error": self.failure}
        return {"store": self.shown, "flags": [f.to_json() for f in self.flags]}

    def report_past(self, doc: Mapping[str, Any]) -> dict[str, Any] | None:
        """report.html's history of the rejected nodes (None when it cannot be read: the
        page is written without it; the write at the end says what is wrong)."""
        try:
            with self.store.reading() as conn:
                return queries.node_past(conn, doc)
        except Exception:  # noqa: BLE001 - a report without history, never no report
            return None

    @property
    def shown(self) -> str:
        return self._store.shown if self._store is not None else shown_url(self.url)

    @pytest.hookimpl(trylast=True)  # after the actions wrote actions.json
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        self.doc = doc

    @pytest.hookimpl(trylast=True)  # after finish: the exit status is the run's
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.doc is None:
            return
        if self.failure is not None:  # the rules could not read it: nothing more is tried
            session.exitstatus = (
                EXIT_HISTORY_FAILED if int(session.exitstatus) in KEPT_EXITS else session.exitstatus
            )
            return
        result = self.state.result or RunResult()
        actions = _json(self.state.run_dir / ACTIONS_FILE)
        try:
            self.written = write_run(
                self.store, self.doc, (v for vs in result.verdicts.values() for v in vs),
                actions=actions, flags=[f.to_json() for f in self.flags],
                exit_code=int(session.exitstatus),
            )  # fmt: skip
        except HistoryError as exc:
            self.failure = str(exc)
        except Exception as exc:  # noqa: BLE001 - any driver error: the run's files are kept
            self.failure = str(self.store.fail(f"writing run {self.state.run_id}", exc))
        finally:
            if self._store is not None:
                self._store.close()
        if self.failure is not None and int(session.exitstatus) in KEPT_EXITS:
            session.exitstatus = EXIT_HISTORY_FAILED

    @pytest.hookimpl(trylast=True)  # one line, no section of its own: the decision stays last
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.failure is not None:
            terminalreporter.write_line(
                printable(f"HISTORY WRITE FAILED (exit 8; {self.state.run_dir} is kept, "
                          f"`nodegate history import` it later): {self.failure}"), red=True,
            )  # fmt: skip
        elif self.written is not None:
            w = self.written
            terminalreporter.write_line(
                printable(f"history: run {w.run_id} ({w.state}) recorded in {self.shown}: "
                          f"{w.verdicts} verdicts, {w.measurements} measurements")
            )  # fmt: skip


def _json(path: Path) -> dict[str, Any] | None:
    import json

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


@pytest.hookimpl(trylast=True)  # after the plugin built the run's state
def pytest_configure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or state.is_worker or config.option.collectonly:
        return
    url = history_url(state)
    try:
        rules.validate_metrics(state.profiles.values(), checks_by_id())
    except ConfigError as exc:
        raise pytest.UsageError(f"nodegate: {printable_lines(exc)}") from None
    asked = any(r.enabled for r in (rules.rules_of(p.data) for p in state.profiles.values()))
    if url is None:
        if asked:
            raise pytest.UsageError(
                "nodegate: --history off: the profiles' history rules need a history "
                "(turn them off in the profile's history: section, or give --history URL)"
            )
        return
    default = default_url(state.settings.reports_dir.resolve())
    # The default file is made with the run directory, not before (a usage error found later
    # leaves nothing behind); one that is there is checked now, as any URL given.
    store = None
    if url != default or Path(url.removeprefix("sqlite:///")).exists():
        try:
            store = open_store(url)
        except ConfigError as exc:
            raise pytest.UsageError(f"nodegate: {printable_lines(exc)}") from None
    recorder = HistoryRecorder(url, store, state)
    config.stash[HISTORY] = recorder
    config.pluginmanager.register(recorder, "nodegate-history")
