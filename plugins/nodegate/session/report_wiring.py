"""Registers the reports with the session: the decision screen, report.html and Allure each
consume `pytest_nodegate_admission` on the controller; the reports themselves know nothing of
the session's state (they get what they draw).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from nodegate.reports.allure import AllureWriter
from nodegate.reports.html import ReportWriter
from nodegate.reports.terminal import DecisionScreen, quiet_item_reports
from nodegate.session.history import HISTORY
from nodegate.session.state import STATE


@pytest.hookimpl(trylast=True)  # after the plugin made the run's state, after allure-pytest
def pytest_configure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    alluredir = getattr(config.option, "allure_report_dir", None)
    if alluredir:
        # Per-item results are what made Allure grow with nodes x checks: nodegate writes its own.
        listener = config.pluginmanager.get_plugin("allure_listener")
        if listener is not None:
            config.pluginmanager.unregister(listener)
    if state.is_worker:
        return
    if not state.settings.item_reports:
        quiet_item_reports(config)
    screen = DecisionScreen(state.settings.summary_lines)
    config.pluginmanager.register(screen, "nodegate-decision-screen")

    def past(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
        history = config.stash.get(HISTORY, None)  # registered after this (session.history)
        return history.report_past(doc) if history is not None else None

    report = ReportWriter(lambda: state.result, past)
    config.pluginmanager.register(report, "nodegate-html-report")
    if alluredir:
        writer = AllureWriter(Path(alluredir), state.load_result)
        config.pluginmanager.register(writer, "nodegate-allure")
