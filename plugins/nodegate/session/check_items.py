"""Registered checks as cheap pytest items: one `CheckItem` per (check, node), same ids.

A registered check's test (`suites/test_<stage>.py::<test>`, made by `nodegate.session.suite`) takes
only `nodegate_check`. pytest would make each of its items a `Function` through parametrize:
fixture closure, signature inspection and a fixture request per item, then setup, call and
teardown each under output capture and log capture. At 1,024 nodes x 59 checks (60,416 items)
that was most of a passive run's controller CPU. A `CheckItem` knows its check and node when
it is made; its protocol (`pytest_runtest_protocol` below) makes the three reports with
pytest's own `CallInfo` and `pytest_runtest_makereport` (so xfail/skip and every report
consumer work as for any item) without fixtures, capture or log capture: the item calls the
test function with the check's view, which prints nothing and reads one dict entry.

A test that takes anything else, an item marked skip/skipif/xfail/usefixtures, and runs with
--pdb, --trace or --setup-only/--setup-plan/--setup-show go through pytest's own protocol.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest

from nodegate.session.collection import (
    CheckView,
    check_param,
    judge_check,
    judge_item,
    raise_outcome,
)
from nodegate.session.state import STATE, RunState
from nodegate.stages.registry import checks_by_test

CHECK_ARG = "nodegate_check"
# A per-check item's call report: True when it judged its nodes (`FleetView`); xdist sends a
# report's attributes to the controller, whose Recorder judges each node again from it.
JUDGED = "nodegate_judged"
# Marks that change how pytest runs an item: such an item takes pytest's own protocol.
_PROTOCOL_MARKS = frozenset({"skip", "skipif", "xfail", "usefixtures", "filterwarnings"})
_PARENT_MARKED = pytest.StashKey[bool]()


def _takes_only_check_view(obj: object) -> bool:
    code = getattr(obj, "__code__", None)
    if code is None or getattr(obj, "__defaults__", None) or code.co_kwonlyargcount:
        return False
    return tuple(code.co_varnames[: code.co_argcount]) == (CHECK_ARG,)


class CheckItem(pytest.Item):
    """One registered check on one node, `<test>[<node>]`, or on every node of the run,
    `<test>[<N> nodes]` (`--items check`); the stage's marker."""

    def __init__(
        self,
        *,
        check_id: str,
        node_name: str | None,
        test: Callable[..., Any],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.check_id = check_id
        self.node_name = node_name  # None: every node of the run
        self.obj = test
        self.judged = False

    def runtest(self) -> None:
        state: RunState = self.config.stash[STATE]
        if self.node_name is None:
            view = FleetView(self.check_id, state)
            try:
                self.obj(view)
            finally:
                self.judged = view.judged
            return
        verdicts = state.load_result().for_item(self.check_id, self.node_name)
        self.obj(CheckView(self.check_id, self.node_name, verdicts, state.waivers))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        # Line 1 of the module: its test functions are made there by nodegate.session.suite from the
        # check table (a skip report needs a line).
        return self.path, 0, self.name


class FleetView:
    """What a per-check item sees: `assert_pass()` judges every node of the run
    (`judge_check`)."""

    def __init__(self, check: str, state: RunState) -> None:
        self.check = check
        self.state = state
        self.judged = False

    def assert_pass(self) -> None:
        __tracebackhide__ = True
        outcome = judge_check(self.check, list(node_outcomes(self.state, self.check)))
        self.judged = True
        raise_outcome(*outcome)


def node_outcomes(state: RunState, check: str) -> Iterator[tuple[str, str, str]]:
    """(node, outcome, text) of `check` on each node of the run, as its per-node item's."""
    result = state.load_result()
    for n in state.nodes:
        yield (n.name, *judge_item(check, n.name, result.for_item(check, n.name), state.waivers))


def per_check(state: RunState) -> bool:
    """Whether this run has one item per check (`--items`, resolved against its nodes)."""
    return state.settings.per_check(len(state.nodes))


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> list[pytest.Item] | None:
    """A registered check's test function -> one CheckItem per selected node, or one for all."""
    if not isinstance(collector, pytest.Module) or not callable(obj):
        return None
    entry = checks_by_test().get(name)
    state = collector.config.stash.get(STATE, None)
    if entry is None or state is None or not _takes_only_check_view(obj):
        return None  # pytest's own items (session.collection says what is wrong, if anything)
    stage, spec = entry
    mark = getattr(pytest.mark, stage.name)
    params: list[tuple[str, str | None]] = (
        [(check_param(len(state.nodes)), None)]
        if per_check(state)
        else [(n.name, n.name) for n in state.nodes]
    )
    items: list[pytest.Item] = []
    for param, node_name in params:
        item = CheckItem.from_parent(
            collector,
            name=f"{name}[{param}]",
            check_id=spec.id,
            node_name=node_name,
            test=obj,
        )
        item.add_marker(mark)
        items.append(item)
    return items


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A per-check item's call report says whether it judged its nodes (`JUDGED`)."""
    report = yield
    if call.when == "call" and isinstance(item, CheckItem) and item.node_name is None:
        setattr(report, JUDGED, item.judged)
    return report


def _own_protocol(item: pytest.Item) -> bool:
    """pytest's own protocol: debugging and setup display options, marks that change runs."""
    opt = item.config.option
    if getattr(opt, "usepdb", False) or getattr(opt, "trace", False):
        return True
    if getattr(opt, "setuponly", False) or getattr(opt, "setupplan", False):
        return True
    if getattr(opt, "setupshow", False):
        return True
    if any(m.name in _PROTOCOL_MARKS for m in item.own_markers):
        return True
    # The parents' marks (module pytestmark, conftest-added): the same for every item of a
    # module, looked up once per module.
    parent = item.parent
    if parent is None:
        return False
    marked = parent.stash.get(_PARENT_MARKED, None)
    if marked is None:
        marked = any(m.name in _PROTOCOL_MARKS for m in parent.iter_markers())
        parent.stash[_PARENT_MARKED] = marked
    return marked


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """setup, call and teardown reports for a CheckItem, without fixtures or capture.

    The call goes through `pytest_runtest_makereport` (xfail, a plugin's report wrapper); the
    setup and teardown around it do nothing, so their passing reports are made directly,
    sharing the item's keywords (pytest copies them into every report it makes)."""
    if not isinstance(item, CheckItem) or _own_protocol(item):
        return None
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    keywords: dict[str, Literal[1]] = dict.fromkeys(item.keywords, 1)
    ihook.pytest_runtest_logreport(report=_passed(item, keywords, "setup"))
    reraise = (pytest.exit.Exception, KeyboardInterrupt)
    call = pytest.CallInfo.from_call(item.runtest, when="call", reraise=reraise)
    ihook.pytest_runtest_logreport(report=ihook.pytest_runtest_makereport(item=item, call=call))
    ihook.pytest_runtest_logreport(report=_passed(item, keywords, "teardown"))
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _passed(
    item: pytest.Item, keywords: dict[str, Literal[1]], when: Literal["setup", "teardown"]
) -> pytest.TestReport:
    now = time.time()
    return pytest.TestReport(
        # The item's structured id where pytest has one (9+): junit.xml keys its test case by
        # it, so the three reports of an item must carry the same one.
        getattr(item, "id", item.nodeid),
        item.location,
        keywords,
        "passed",
        None,
        when,
        (),
        0.0,
        now,
        now,
        user_properties=item.user_properties,
    )
