"""pytest plugin: one test item per (check, node); the fleet is gathered once, on the controller.

Flow: configure (inventory, node selection, profiles, run directory) -> collection (items per
registered check x selected node) -> the engine runs the stages needed by the selected items
on the controller, before any item runs (under xdist: when workers report their collection,
before scheduling) -> items assert their verdicts -> the gate writes admission.json.
Workers never open fleet connections for registered checks; they read verdicts.json.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nodegate import bundled
from nodegate.engine import Engine, LoopThread, RunResult
from nodegate.errors import ConfigError
from nodegate.gate import admission_doc, decide, write_admission
from nodegate.inventory import Inventory, Node, load_inventory
from nodegate.model import CommandResult, CommandSpec, Status, Verdict
from nodegate.profiles import Profile, ProfileLibrary
from nodegate.report import summary_lines
from nodegate.stages.registry import STAGE_MARKERS, checks_by_test
from nodegate.transport.base import Transport
from nodegate.transport.evidence import EvidenceWriter, resolve_evidence

STATE = pytest.StashKey["RunState"]()
NODE_PARAM = "nodegate_node"
SITE_PREFIX = "site."

# Exit codes (README "Exit codes"): pytest's own, plus 1 whenever a node is rejected.
EXIT_ADMITTED, EXIT_REJECTED = 0, 1


@dataclass
class RunState:
    config: pytest.Config
    inventory: Inventory
    nodes: list[Node]
    profiles: dict[str, Profile]
    run_dir: Path
    run_id: str
    transport_kind: str
    is_worker: bool
    started_at: str = ""
    loop: LoopThread | None = None
    transport: Transport | None = None
    result: RunResult | None = None
    selected: list[tuple[str, str]] = field(default_factory=list)
    item_outcomes: dict[tuple[str, str], str] = field(default_factory=dict)
    site_verdicts: list[Verdict] = field(default_factory=list)
    ran: bool = False

    def load_result(self) -> RunResult:
        if self.result is None:
            self.result = RunResult.read(self.run_dir)
        return self.result


# -- options -----------------------------------------------------------------------------
OPTIONS: list[tuple[str, dict[str, Any], str]] = [
    ("--inventory", {"metavar": "PATH"}, "inventory file (nodegate YAML, Ansible INI or YAML)"),
    ("--nodes", {"metavar": "EXPR"}, "select nodes: names, nodeset gpu[001-004], @group, ! & ^"),
    ("--profile", {"metavar": "NAME"}, "use this profile for every selected node"),
    ("--profiles-dir", {"metavar": "DIR", "action": "append"}, "extra profile directory"),
    ("--fanout", {"type": int, "metavar": "N"}, "concurrent node sessions (default 256)"),
    ("--connect-timeout", {"type": float, "metavar": "S"}, "SSH connect deadline in seconds"),
    (
        "--accept-new-hostkeys",
        {"action": "store_true"},
        "trust unknown host keys (never mismatches)",
    ),
    ("--transport", {"choices": ["ssh", "local", "replay"]}, "how to reach nodes (default ssh)"),
    ("--replay", {"metavar": "DIR"}, "bundle to answer from with --transport replay"),
    ("--reports-dir", {"metavar": "DIR"}, "where run directories go (default reports/)"),
    ("--run-id", {"metavar": "ID"}, "run directory name (default: timestamp + random)"),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nodegate", "nodegate cluster qualification")
    for flag, kw, help_ in OPTIONS:
        name = "nodegate_" + flag[2:].replace("-", "_")
        group.addoption(flag, dest=name, help=help_, **kw)
        parser.addini(name, help_ + f" (ini twin of {flag})", default=None)


def _opt(config: pytest.Config, flag: str, default: Any = None) -> Any:
    name = "nodegate_" + flag[2:].replace("-", "_")
    val = config.getoption(name)
    if val in (None, False, []):
        ini = config.getini(name)
        val = ini if ini not in (None, "", []) else default
    return val


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for m in STAGE_MARKERS:
        config.addinivalue_line("markers", f"{m}: nodegate stage {m}")
    inv_path = _opt(config, "--inventory")
    if not inv_path:
        return
    workerinput = getattr(config, "workerinput", None)
    try:
        state = _build_state(config, str(inv_path), workerinput)
    except ConfigError as exc:
        raise pytest.UsageError(f"nodegate: {exc}") from None
    config.stash[STATE] = state
    if workerinput is None:
        state.run_dir.mkdir(parents=True, exist_ok=True)
        if not config.option.xmlpath:
            config.option.xmlpath = str(state.run_dir / "junit.xml")
        config.pluginmanager.register(_Recorder(state), "nodegate-recorder")
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_XdistController(state), "nodegate-xdist-controller")


def _build_state(config: pytest.Config, inv_path: str, workerinput: Any) -> RunState:
    inventory = load_inventory(inv_path)
    nodes = list(inventory.select(_opt(config, "--nodes")))
    if not nodes:
        raise ConfigError(f"{inv_path}: the node selection is empty")
    extra = _opt(config, "--profiles-dir") or []
    if isinstance(extra, str):  # the ini twin: whitespace-separated directories
        extra = extra.split()
    lib = ProfileLibrary([*extra, str(bundled.profiles_dir())])
    forced = _opt(config, "--profile")
    profiles: dict[str, Profile] = {}
    for n in nodes:
        name = forced or n.profile
        if not name:
            raise ConfigError(f"{inv_path}: node {n.name} has no profile (set one, or --profile)")
        profiles[n.name] = lib.get(name)
    if workerinput is not None:
        run_dir = Path(workerinput["nodegate_run_dir"])
        run_id = run_dir.name
    else:
        default_reports = bundled.default_reports_dir(Path(config.rootpath))
        reports = Path(_opt(config, "--reports-dir", str(default_reports)))
        run_id = _opt(config, "--run-id") or (
            dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        )
        run_dir = reports / run_id
    transport = _opt(config, "--transport", "ssh")
    if transport == "replay" and not _opt(config, "--replay"):
        raise ConfigError(
            "--transport replay needs --replay DIR (a capture bundle or a run's raw/)"
        )
    return RunState(
        config,
        inventory,
        nodes,
        profiles,
        run_dir.resolve(),
        run_id,
        transport,
        workerinput is not None,
    )


# -- collection --------------------------------------------------------------------------
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    uses_check = "nodegate_check" in metafunc.fixturenames
    # Only our `node` fixture: a suite of someone else's with its own `node` is left alone.
    node_defs = metafunc._arg2fixturedefs.get("node") or ()
    uses_node = bool(node_defs) and node_defs[-1].func is _node_fixture_func()
    if not (uses_check or uses_node):
        return
    state = metafunc.config.stash.get(STATE, None)
    if state is None:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: nodegate checks need --inventory (or the "
            "nodegate_inventory ini option)"
        )
    marks: list[pytest.MarkDecorator] = []
    if uses_check:
        entry = checks_by_test().get(metafunc.function.__name__)
        if entry is None:
            raise pytest.UsageError(
                f"{metafunc.definition.nodeid}: {metafunc.function.__name__} is not a registered "
                "nodegate check (see nodegate.stages.registry)"
            )
        marks.append(getattr(pytest.mark, entry[0].name))
    params = [pytest.param(n.name, id=n.name, marks=marks) for n in state.nodes]
    metafunc.parametrize(NODE_PARAM, params)


def item_key(nodeid: str) -> tuple[str, str] | None:
    """`suites/test_reach.py::test_kernel_version[gpu017]` -> ('reach.kernel.version', 'gpu017')."""
    if not nodeid.endswith("]") or "[" not in nodeid:
        return None
    head, _, param = nodeid[:-1].rpartition("[")
    func = head.rpartition("::")[2]
    entry = checks_by_test().get(func)
    if entry is not None:
        return entry[1].id, param
    module = Path(head.partition("::")[0]).stem
    return f"{SITE_PREFIX}{module}.{func}", param


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None or state.is_worker or session.config.option.collectonly:
        return
    if (
        getattr(session.config.option, "numprocesses", None)
        or getattr(session.config.option, "dist", "no") != "no"
    ):
        return  # xdist controller: runs from pytest_xdist_node_collection_finished
    _run_engine(state, [i.nodeid for i in session.items])


def _run_engine(state: RunState, nodeids: Iterable[str]) -> None:
    if state.ran:
        return
    state.ran = True
    keys = [k for k in (item_key(n) for n in nodeids) if k is not None]
    state.selected = keys
    engine_keys = [k for k in keys if not k[0].startswith(SITE_PREFIX)]
    state.started_at = _now()
    state.loop = LoopThread()
    state.transport = _make_transport(state)
    names = {n for _, n in keys}
    reporter = state.config.pluginmanager.get_plugin("terminalreporter")
    options = {
        "fanout": int(_opt(state.config, "--fanout", 256)),
        # Active stages show their plan as they go (the plan is also in the run directory).
        "log": (lambda line: reporter.write_line(f"nodegate: {line}")) if reporter else None,
    }
    engine = Engine(
        [n for n in state.nodes if n.name in names],
        state.profiles,
        state.transport,
        state.run_dir,
        options=options,
    )
    state.result = state.loop.call(engine.run(engine_keys))
    state.result.write(state.run_dir)


def _make_transport(state: RunState) -> Transport:
    cfg = state.config
    ev = EvidenceWriter(state.run_dir / "raw", state.transport_kind)
    fanout = int(_opt(cfg, "--fanout", 256))
    if state.transport_kind == "local":
        from nodegate.transport.local import LocalTransport

        return LocalTransport(fanout=fanout, evidence=ev)
    if state.transport_kind == "replay":
        from nodegate.transport.local import ReplayTransport

        return ReplayTransport(_opt(cfg, "--replay"), evidence=ev)
    from nodegate.transport.ssh import SSHTransport

    ct = _opt(cfg, "--connect-timeout")
    return SSHTransport(
        state.nodes,
        fanout=fanout,
        connect_timeout_s=float(ct) if ct else None,
        accept_new_hostkeys=bool(_opt(cfg, "--accept-new-hostkeys", False)),
        evidence=ev,
    )


class _XdistController:
    """Hooks only the xdist controller gets: hand workers the run dir, run the engine once."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["nodegate_run_dir"] = str(self.state.run_dir)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        _run_engine(self.state, ids)


# -- items -------------------------------------------------------------------------------
class CheckView:
    """What a check item sees: its verdicts; `assert_pass()` fails closed."""

    def __init__(
        self, check: str, node: str, verdicts: list[Verdict], allure_to: tuple[str, Path] | None
    ) -> None:
        self.check = check
        self.node = node
        self.verdicts = verdicts
        self._allure_to = allure_to  # (stage, run dir) when --alluredir is given

    def assert_pass(self) -> None:
        __tracebackhide__ = True
        if self._allure_to is not None:  # in the test body, so Allure files it with the test
            _allure_attach(self, *self._allure_to)
        if not self.verdicts:
            pytest.fail(
                f"{self.check} on {self.node}: no verdict (did not run) - fail closed",
                pytrace=False,
            )
        bad = [v for v in self.verdicts if v.status is not Status.PASS]
        if bad and all(v.status is Status.SKIP for v in bad):
            pytest.skip(bad[0].message)
        if bad:
            pytest.fail("\n".join(_describe(v) for v in bad), pytrace=False)


def _describe(v: Verdict) -> str:
    parts = [
        f"{v.status.value.upper()} {v.check} {v.node}"
        + (f" [{v.component}]" if v.component else "")
    ]
    if v.observed is not None or v.expected is not None:
        unit = f" {v.unit}" if v.unit else ""
        parts.append(f"  observed: {v.observed}{unit}  expected: {v.expected}{unit}")
    if v.message:
        parts.append(f"  {v.message}")
    if v.remediation:
        parts.append(f"  remediation: {v.remediation}")
    for e in v.evidence:
        parts.append(f"  evidence: {e}")
    return "\n".join(parts)


@pytest.fixture
def nodegate_check(request: pytest.FixtureRequest, nodegate_node: str) -> CheckView:
    """The verdicts of this item's (check, node), computed once for the whole run."""
    state: RunState = request.config.stash[STATE]
    stage, spec = checks_by_test()[request.function.__name__]
    allure_to = (
        (stage.name, state.run_dir)
        if getattr(request.config.option, "allure_report_dir", None)
        else None
    )
    verdicts = state.load_result().for_item(spec.id, nodegate_node)
    return CheckView(spec.id, nodegate_node, verdicts, allure_to)


def _allure_attach(view: CheckView, stage: str, run_dir: Path) -> None:
    """With --alluredir: label the item and attach its verdicts and raw evidence."""
    import allure

    allure.dynamic.feature(stage)  # type: ignore[no-untyped-call]
    allure.dynamic.story(view.check)  # type: ignore[no-untyped-call]
    allure.dynamic.tag(view.node)  # type: ignore[no-untyped-call]
    allure.attach(
        json.dumps([v.to_json() for v in view.verdicts], indent=1),
        name="verdicts",
        attachment_type=allure.attachment_type.JSON,
    )
    for ref in sorted({e for v in view.verdicts for e in v.evidence}):
        try:
            doc = resolve_evidence(run_dir, ref)
        except (OSError, KeyError, ValueError):
            continue  # the verdict itself says what is missing
        allure.attach(
            json.dumps(doc, indent=1), name=ref, attachment_type=allure.attachment_type.JSON
        )


class NodeHandle:
    """A node for site-written checks: `node.run("cmd")` over the run's connection."""

    def __init__(self, state: RunState, name: str) -> None:
        self.state = state
        self.name = name

    def run(self, cmd: str, timeout_s: float = 30.0) -> CommandResult:
        st = self.state
        if st.loop is None:  # xdist worker: its own connection, opened on first use
            st.loop = LoopThread()
            st.transport = _make_transport(st)
        assert st.transport is not None
        out = st.loop.call(
            st.transport.run_node(self.name, "site", [CommandSpec("cmd", cmd, timeout_s)])
        )
        r = out.result("cmd")
        if r is None:
            pytest.fail(f"{self.name}: {out.reach.value}: {out.detail}", pytrace=False)
        return r


def _node_fixture_func() -> Any:
    """The function behind our `node` fixture (pytest wraps the decorated name)."""
    return getattr(node, "__wrapped__", node)


@pytest.fixture
def node(request: pytest.FixtureRequest, nodegate_node: str) -> NodeHandle:
    """Site-written checks: the node under test (see README, "Site checks")."""
    return NodeHandle(request.config.stash[STATE], nodegate_node)


# -- reporting ---------------------------------------------------------------------------
class _Recorder:
    """Controller-side record of each item's outcome (xdist forwards workers' reports)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        key = item_key(report.nodeid)
        if key is None:
            return
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.state.item_outcomes[key] = report.outcome
            if key[0].startswith(SITE_PREFIX):
                self.state.site_verdicts.append(_site_verdict(key, report))


def _site_verdict(key: tuple[str, str], report: pytest.TestReport) -> Verdict:
    status = {"passed": Status.PASS, "skipped": Status.SKIP}.get(report.outcome, Status.FAIL)
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(getattr(crash, "message", "") or report.longreprtext).strip()
    msg = "" if status is Status.PASS else (text.splitlines()[0] if text else report.outcome)
    return Verdict(key[0], key[1], status, component="site", message=msg)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None or state.is_worker:
        return
    try:
        if state.ran and state.result is not None:
            for v in state.site_verdicts:
                state.result.add(v)
            # Final state of the run: site checks' verdicts and every connection opened.
            state.result.connections = getattr(state.transport, "connections_opened", 0)
            state.result.write(state.run_dir)
            doc = _admission(state)
            path = write_admission(state.run_dir, doc)
            session.config.stash[_DOC] = (doc, str(path))
            if doc["summary"]["rejected"] and session.exitstatus == EXIT_ADMITTED:
                session.exitstatus = EXIT_REJECTED
            _latest_link(state.run_dir)
    finally:
        if state.loop is not None and state.transport is not None:
            state.loop.call(state.transport.close(), timeout=30)
        if state.loop is not None:
            state.loop.stop()


_DOC = pytest.StashKey[tuple[dict[str, Any], str]]()


def _admission(state: RunState) -> dict[str, Any]:
    assert state.result is not None
    decisions = decide(
        state.selected,
        state.result,
        {n: p.name for n, p in state.profiles.items()},
        {n.name: dict(n.labels) for n in state.nodes},
        state.item_outcomes,
    )
    meta = {
        "run_id": state.run_id,
        "started_at": state.started_at,
        "finished_at": _now(),
        "inventory": state.inventory.source,
        "transport": state.transport_kind,
        "stages": state.result.stages_run,
    }
    return admission_doc(
        decisions, [n.name for n in state.nodes], meta, (c for c, _ in state.selected)
    )


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    got = config.stash.get(_DOC, None)
    if got is None:
        return
    doc, path = got
    terminalreporter.section("nodegate admission")
    for line in summary_lines(doc, os.path.relpath(path)):
        terminalreporter.write_line(line)


def _latest_link(run_dir: Path) -> None:
    link = run_dir.parent / "latest"
    try:
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(run_dir.name)
    except OSError:
        pass  # a convenience only


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
