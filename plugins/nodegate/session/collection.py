"""Test items: one per (check, node), the fixtures they take, and what a check item asserts.

`nodegate_check` (registered checks) shows an item its verdicts, computed once per run by the
engine; `node` (site checks) runs commands over the run's connection.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NoReturn

import pytest
from _pytest.junitxml import xml_key

from nodegate.admission.waivers import WaiverSet
from nodegate.core.safetext import printable, printable_lines
from nodegate.core.values import CommandResult, CommandSpec, Shell, Status, Verdict
from nodegate.core.words import plural
from nodegate.session.engine import LoopThread
from nodegate.session.state import STATE, RunState
from nodegate.stages.registry import STAGE_MARKERS, checks_by_test

NODE_PARAM = "nodegate_node"
COLLECTION_USAGE_ERROR = pytest.StashKey[str]()
USAGE_ERROR_ID = "nodegate-usage-error"  # the parameter of items that cannot be collected
SITE_PREFIX = "site."


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    uses_check = "nodegate_check" in metafunc.fixturenames
    # Only our `node` fixture: a suite of someone else's with its own `node` is left alone.
    node_defs = metafunc._arg2fixturedefs.get("node") or ()
    uses_node = bool(node_defs) and node_defs[-1].func is _node_fixture_func()
    if not (uses_check or uses_node):
        return
    state = metafunc.config.stash.get(STATE, None)
    entry = checks_by_test().get(metafunc.function.__name__) if uses_check else None
    marks = [getattr(pytest.mark, entry[0].name)] if entry is not None else []
    if state is None or (uses_check and entry is None):
        # Said once, as a usage error, when collection ends: raised here, pytest would print
        # a collection error with a traceback for every module.
        nodeid = metafunc.definition.nodeid
        metafunc.config.stash.setdefault(COLLECTION_USAGE_ERROR, _usage_message(state, nodeid))
        metafunc.parametrize(NODE_PARAM, [pytest.param(None, id=USAGE_ERROR_ID, marks=marks)])
        return
    params = [pytest.param(n.name, id=n.name, marks=marks) for n in state.nodes]
    metafunc.parametrize(NODE_PARAM, params)


def _usage_message(state: RunState | None, nodeid: str) -> str:
    """Why the item `nodeid` (without its parameter) cannot be collected."""
    if state is None:
        return (
            f"nodegate: --inventory: missing; {nodeid} needs the nodes to qualify (a nodegate "
            "YAML, Ansible INI or Ansible YAML inventory; ini twin nodegate_inventory)"
        )
    func = nodeid.rpartition("::")[2]
    return (
        f"nodegate: {nodeid}: {func} is not a registered nodegate check "
        "(see nodegate.stages.registry)"
    )


# A `-m` expression's words as pytest's own scanner cuts them (`_pytest/mark/expression.py`):
# quoted strings, identifiers, and single characters (parentheses, `=`, `,`).
_MARK_TOKEN = re.compile(r"""'[^']*'|"[^"]*"|(?:\w|:|\+|-|\.|\[|\]|\\|/)+|\S""")
_MARK_WORDS = frozenset({"and", "or", "not"})


def marker_names(expr: str) -> list[str]:
    """The markers a `-m` expression names, in order, without its keyword arguments.

    >>> marker_names("reach and not (pcie_gpu or device(serial='1'))")
    ['reach', 'pcie_gpu', 'device']
    """
    tokens = _MARK_TOKEN.findall(expr)
    out = []
    for i, t in enumerate(tokens):
        if t in _MARK_WORDS or t[0] in "'\"" or not re.fullmatch(r"[^()=,\s]+", t):
            continue
        after_eq = i > 0 and tokens[i - 1] == "="
        before_eq = i + 1 < len(tokens) and tokens[i + 1] == "="
        if not (after_eq or before_eq) and t not in out:
            out.append(t)
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """An `-m` naming no marker these suites know selects nothing and says nothing: stop with
    the stage markers before any item is collected or any run directory made (exit 4)."""
    config = session.config
    expr = config.option.markexpr
    if not expr or config.stash.get(STATE, None) is None or hasattr(config, "workerinput"):
        return
    known = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}
    unknown = [m for m in marker_names(expr) if m not in known]
    if not unknown:
        return
    xml = config.stash.get(xml_key, None)
    if xml is not None:  # its report would make the run directory this error must not leave
        config.pluginmanager.unregister(xml)
        del config.stash[xml_key]
    names = ", ".join(repr(m) for m in unknown)
    _stop(
        config,
        f"nodegate: -m: {names} in {expr!r} is no marker of these suites; the stage markers: "
        f"{', '.join(STAGE_MARKERS)} (every registered marker: pytest --markers)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """A serial run (or the xdist controller, below) stops with the usage error found while
    collecting; a worker reports its items and lets the controller say it."""
    message = session.config.stash.get(COLLECTION_USAGE_ERROR, None)
    if message is not None and not hasattr(session.config, "workerinput"):
        _stop(session.config, message)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    marker = f"[{USAGE_ERROR_ID}]"
    bad = next((i for i in ids if i.endswith(marker)), None)
    if bad is not None:
        state = node.config.stash.get(STATE, None)
        _stop(node.config, _usage_message(state, bad.removesuffix(marker)))


def _stop(config: pytest.Config, message: str) -> NoReturn:
    """A usage error once collection has begun: the error line is all the run has to say."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:  # its session summary would only add "no tests ran in 0.02s"
        config.pluginmanager.unregister(reporter)
    raise pytest.UsageError(printable(message))


def item_key(nodeid: str) -> tuple[str, str] | None:
    """`suites/test_reach.py::test_kernel_version[gpu017]` -> ('reach.kernel.version', 'gpu017');
    a per-check item (`[1024 nodes]`, `check_param`) -> ('reach.kernel.version', '')."""
    if not nodeid.endswith("]") or "[" not in nodeid:
        return None
    head, _, param = nodeid[:-1].rpartition("[")
    func = head.rpartition("::")[2]
    entry = checks_by_test().get(func)
    if entry is not None:
        return entry[1].id, "" if _CHECK_PARAM.fullmatch(param) else param
    module = Path(head.partition("::")[0]).stem
    return f"{SITE_PREFIX}{module}.{func}", param


# A per-check item's parameter: no node name has a space (`nodegate.core.names`).
_CHECK_PARAM = re.compile(r"\d+ nodes?")


def check_param(nodes: int) -> str:
    """A per-check item's parameter: `1024 nodes`."""
    return plural(nodes, "node")


def item_keys(nodeid: str, nodes: list[str]) -> list[tuple[str, str]]:
    """The (check, node) pairs an item stands for: its own, or a per-check item's `nodes`."""
    key = item_key(nodeid)
    if key is None:
        return []
    return [(key[0], n) for n in nodes] if key[1] == "" else [key]


PASSED, FAILED, SKIPPED, XFAILED = "passed", "failed", "skipped", "xfailed"


def judge_item(
    check: str, node: str, verdicts: list[Verdict], waivers: WaiverSet
) -> tuple[str, str]:
    """A (check, node) item's outcome and its text (escaped): passed, failed (fail closed on
    no verdict), skipped (every non-pass a skip), xfailed (every non-pass waived)."""
    if not verdicts:
        return FAILED, f"{check} on {node}: no verdict (did not run) - fail closed"
    bad = [v for v in verdicts if v.status is not Status.PASS]
    if not bad:
        return PASSED, ""
    if all(v.status is Status.SKIP for v in bad):
        return SKIPPED, printable(bad[0].message)
    waived = [(v, waivers.match(v.check, v.node, v.component, v.status.value)) for v in bad]
    if all(w is not None for _, w in waived):
        # Reported as an expected failure: the gate admits on the waiver (`gate.decide`).
        return XFAILED, "; ".join(
            printable(f"waived {v.check} [{v.component}]: {w.describe()}: {w.reason}")
            for v, w in waived
            if w is not None
        )
    return FAILED, "\n".join(_describe(v) for v, w in waived if w is None)


# What a per-check item's failure text quotes (`judge_check`): node names, verdict texts.
FAILED_NAMES_SHOWN = 10
FAILED_TEXTS_SHOWN = 3


def judge_check(check: str, judged: list[tuple[str, str, str]]) -> tuple[str, str]:
    """A per-check item's outcome from its nodes' (`judge_item`'s (node, outcome, text)):
    failed if one failed (naming the failed nodes, the first few's texts), else xfailed if
    one is waived, else skipped if none passed, else passed. Bounded text at any fleet size."""
    by: dict[str, list[tuple[str, str]]] = {}
    for node, outcome, text in judged:
        by.setdefault(outcome, []).append((node, text))
    total = len(judged)
    for outcome, verb in ((FAILED, "failed"), (XFAILED, "waived")):
        got = by.get(outcome)
        if not got:
            continue
        names = ", ".join(n for n, _ in got[:FAILED_NAMES_SHOWN])
        more = len(got) - FAILED_NAMES_SHOWN
        lines = [
            f"{check}: {verb} on {len(got)} of {plural(total, 'node')}: {names}"
            + (f" (+{more} more)" if more > 0 else ""),
            *(t for _, t in got[:FAILED_TEXTS_SHOWN]),
        ]
        if len(got) > FAILED_TEXTS_SHOWN:
            lines.append(f"(the other {len(got) - FAILED_TEXTS_SHOWN}: junit.xml, admission.json)")
        return outcome, ("\n" if outcome == FAILED else "; ").join(lines)
    if PASSED not in by and SKIPPED in by:
        first = by[SKIPPED][0][1]
        return SKIPPED, f"{check}: skipped on {plural(total, 'node')} (the first: {first})"
    return PASSED, ""


def raise_outcome(outcome: str, text: str) -> None:
    """End a test item as `judge_item` said."""
    __tracebackhide__ = True
    if outcome == SKIPPED:
        pytest.skip(text)
    if outcome == XFAILED:
        pytest.xfail(text)
    if outcome == FAILED:
        pytest.fail(text, pytrace=False)


class CheckView:
    """What a check item sees: its verdicts; `assert_pass()` fails closed."""

    def __init__(
        self, check: str, node: str, verdicts: list[Verdict], waivers: WaiverSet | None = None
    ) -> None:
        self.check = check
        self.node = node
        self.verdicts = verdicts
        self.waivers = waivers or WaiverSet()

    def assert_pass(self) -> None:
        __tracebackhide__ = True
        raise_outcome(*judge_item(self.check, self.node, self.verdicts, self.waivers))


def _describe(v: Verdict) -> str:
    """A verdict for the pytest/JUnit failure text, node text escaped line by line."""
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
    return "\n".join(printable(p) for p in parts)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A site check's failure text may quote node output: escape it like every node text."""
    report = yield
    if report.failed and NODE_PARAM in getattr(item, "fixturenames", ()):
        text = str(report.longrepr)
        if not all(line.isprintable() for line in text.split("\n")):
            report.longrepr = printable_lines(text)
    return report


@pytest.fixture
def nodegate_check(request: pytest.FixtureRequest, nodegate_node: str) -> CheckView:
    """The verdicts of this item's (check, node), computed once for the whole run."""
    state: RunState = request.config.stash[STATE]
    _stage, spec = checks_by_test()[request.function.__name__]
    verdicts = state.load_result().for_item(spec.id, nodegate_node)
    # Allure results are one per node x stage, written from the decision (allure_results).
    return CheckView(spec.id, nodegate_node, verdicts, state.waivers)


class NodeHandle:
    """A node for site-written checks: `node.run("cmd")` over the run's connection."""

    def __init__(self, state: RunState, name: str) -> None:
        self.state = state
        self.name = name

    def run(self, cmd: str, timeout_s: float = 30.0) -> CommandResult:
        st = self.state
        if st.loop is None:  # xdist worker: its own connection, opened on first use
            st.loop = LoopThread()
            st.transport = st.open_transport()
        assert st.transport is not None
        out = st.loop.call(
            # The site's own shell line (written in its conftest, as trusted as nodegate's).
            st.transport.run_node(self.name, "site", [CommandSpec("cmd", (Shell(cmd),), timeout_s)])
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
