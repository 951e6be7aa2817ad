"""The suites are derived from the check tables: `suites/test_<stage>.py` holds one test per
registered check of its stage, made here, so a check cannot exist without its item nor an item
without its check.

    # suites/test_reach.py
    from nodegate.session.suite import stage_tests
    globals().update(stage_tests("reach", __name__))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from nodegate.stages.registry import STAGES, stage


def _item(check_id: str, title: str, test: str, module: str) -> Callable[[Any], None]:
    def item(nodegate_check: Any) -> None:
        nodegate_check.assert_pass()

    item.__name__ = item.__qualname__ = test
    item.__module__ = module
    item.__doc__ = f"{check_id}: {title}"
    return item


def stage_tests(stage_name: str, module: str) -> dict[str, Callable[[Any], None]]:
    """One pytest test function per check of the stage, named by the check's `test`."""
    return {c.test: _item(c.id, c.title, c.test, module) for c in stage(stage_name).checks}


def suite_mismatches(
    registered: Iterable[tuple[str, str, str]], suite_tests: Iterable[tuple[str, str]]
) -> list[str]:
    """Disagreements between check tables and suite modules, both ways.

    `registered`: (stage, check id, test name); `suite_tests`: (stage, test name) found in
    `suites/test_<stage>.py`. Empty when every check has its item and every item its check.
    """
    want = {(s, t): c for s, c, t in registered}
    have = set(suite_tests)
    out = [
        f"check {c} ({s}) has no suite item {t} in suites/test_{s}.py"
        for (s, t), c in sorted(want.items())
        if (s, t) not in have
    ]
    out += [
        f"suites/test_{s}.py::{t} has no registered check in stage {s}"
        for s, t in sorted(have - set(want))
    ]
    return out


def registered_tests() -> list[tuple[str, str, str]]:
    """(stage, check id, test name) of every registered check."""
    return [(s.name, c.id, c.test) for s in STAGES for c in s.checks]
