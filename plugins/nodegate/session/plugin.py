"""pytest plugin (entry point `nodegate.session.plugin`): options, hooks and wiring; no logic
of its own.

One test item per (check, node). Flow: configure (settings, inventory, node selection,
profiles, run directory: `state`) -> collection (`items`) -> the engine runs the stages needed
by the selected items on the controller, before any item runs (`controller`) -> items assert
their verdicts -> the gate writes admission.json and hands it to `pytest_nodegate_admission`
(`reporting`). The hooks nodegate adds are documented in `nodegate.session.hookspecs`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from nodegate.actions.registry import make_actions
from nodegate.compare.abmode import ABMode
from nodegate.compare.outliers import OutlierSummary, validate_policies
from nodegate.core.errors import ConfigError
from nodegate.core.results import JUNIT_FILE
from nodegate.core.safetext import printable_lines
from nodegate.core.settings import OPTIONS, Settings, build_settings
from nodegate.reports.junit import JunitStream
from nodegate.session import (
    check_items,
    collection,
    display,
    finish,
    history,
    hookspecs,
    report_wiring,
    run_stages,
    transports,
)
from nodegate.session.finish import LatestLink, Recorder
from nodegate.session.history import history_url
from nodegate.session.interrupts import InterruptGuard
from nodegate.session.run_stages import XdistController
from nodegate.session.state import STATE, build_state
from nodegate.session.transports import known_transports
from nodegate.stages.registry import STAGE_MARKERS, checks_by_id

# Modules with hooks and fixtures, registered with this plugin (and only with it), in this
# order. Not `pytest_plugins`: this module imports them, and pytest asked to import one it has
# already imported warns that it cannot rewrite its asserts (under an editable install, where
# it does not mark the package for rewriting at start).
PLUGINS: tuple[ModuleType, ...] = (
    transports,
    check_items,
    collection,
    run_stages,
    finish,
    display,
    report_wiring,
    history,
)

GUARD = pytest.StashKey[InterruptGuard]()


@pytest.hookimpl(trylast=True)
def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    """Once this plugin is registered, its modules: where `pytest_plugins` would have been."""
    if plugin is not sys.modules[__name__]:
        return
    for mod in PLUGINS:
        if manager.get_plugin(mod.__name__) is None and not manager.is_blocked(mod.__name__):
            manager.register(mod, mod.__name__)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nodegate", "nodegate cluster qualification")
    for o in OPTIONS:
        if o.kind == "flag":
            group.addoption(o.flag, dest=o.dest, help=o.help, action="store_true")
        else:
            action = "append" if o.kind == "append" else "store"
            group.addoption(o.flag, dest=o.dest, help=o.help, metavar=o.metavar, action=action)
        parser.addini(o.dest, o.help + f" (ini twin of {o.flag})", default=None)


def settings_from_config(config: pytest.Config) -> Settings:
    """The run's settings: command line first, then the ini twins; raises ConfigError."""
    return build_settings(
        {o.dest: config.getoption(o.dest) for o in OPTIONS},
        {o.dest: config.getini(o.dest) for o in OPTIONS},
        known_transports=known_transports(config.hook),
        rootpath=config.rootpath,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for m in STAGE_MARKERS:
        config.addinivalue_line("markers", f"{m}: nodegate stage {m}")
    workerinput = getattr(config, "workerinput", None)
    try:
        settings = settings_from_config(config)
        if settings.inventory is None:
            return  # not a nodegate run; a suite that needs one says so at collection
        state = build_state(config, settings, workerinput)
        if workerinput is None:
            # Built now, connecting to nothing: a bad ssh_config entry or plugin setting is a
            # usage error before collection, not an internal error once the run has started.
            state.transport = state.open_transport()
            actions = make_actions(settings, state.action_failures)
        validate_policies(state.profiles.values(), checks_by_id())
        ab_mode = (
            ABMode.configure(settings, state.profiles, history_url(state))
            if workerinput is None
            else None
        )
    except ConfigError as exc:
        raise pytest.UsageError(f"nodegate: {printable_lines(exc)}") from None
    config.stash[STATE] = state
    if workerinput is None:
        # Ctrl-C and SIGTERM: the run cleans up and writes its reports (session.interrupts).
        config.stash[GUARD] = InterruptGuard()
        config.stash[GUARD].install()
        # The run directory is made when the engine starts (`controller`): a usage error or
        # --collect-only leaves none behind.
        if not config.option.collectonly:
            xmlpath = config.option.xmlpath or str(state.run_dir / JUNIT_FILE)
            if state.settings.per_check(len(state.nodes)):
                # One item per check: junit.xml keeps a test case per (check, node), written
                # by nodegate (`finish.Recorder`) instead of pytest's junitxml.
                state.junit = JunitStream(Path(xmlpath))
                xmlpath = None
            config.option.xmlpath = xmlpath
        pm = config.pluginmanager
        pm.register(Recorder(state), "nodegate-recorder")
        pm.register(LatestLink(), "nodegate-latest-link")
        pm.register(OutlierSummary(), "nodegate-outliers")
        if ab_mode is not None:  # registered last: its trylast section prints last
            pm.register(ab_mode, "nodegate-ab-mode")
        for name, action in actions.items():
            pm.register(action, f"nodegate-act-{name}")
        if pm.hasplugin("xdist"):
            pm.register(XdistController(state), "nodegate-xdist-controller")


def pytest_unconfigure(config: pytest.Config) -> None:
    guard = config.stash.get(GUARD, None)
    if guard is not None:
        guard.uninstall()
